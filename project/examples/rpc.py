"""Spec "Request/response (using queue)" (no code in the spec): callers send a completable request and
wait for the response that the workflow computes.

Send ``{"op": "add" | "mul" | "square", "args": [numbers]}`` to queue ``request`` with
``handle.send("request", body, wait=True, timeout=...)``; the answer is ``SendResult(status="completed",
response={"result": number})`` (``{"error": str}`` for an unknown op).
"""

from __future__ import annotations

import math
from typing import Any

from rivet_workflows import queue, workflow

OPS = {
    "add": lambda args: sum(args),
    "mul": lambda args: math.prod(args),
    "square": lambda args: args[0] * args[0],
}


def compute(request: dict) -> dict:
    """The response to one request body."""
    op = OPS.get(request.get("op"))
    if op is None:
        return {"error": f"unknown op {request.get('op')!r}"}
    return {"result": op(request.get("args") or [])}


async def rpc_iteration(loop_ctx: Any) -> None:
    """One iteration of ``rpc-loop``: take a request, compute the answer in a step, complete the message."""
    message = await loop_ctx.queue.next("wait-request", names=["request"], completable=True)

    async def compute_step(step: Any) -> dict:
        response = compute(message.body)
        step.state["handled"] += 1
        step.state["last_response"] = response
        return response

    response = await loop_ctx.step("compute", compute_step)
    await message.complete(response)


async def run(ctx: Any) -> None:
    """Workflow: the request loop, forever."""
    await ctx.loop("rpc-loop", rpc_iteration)


rpc_actor = workflow(
    state={"handled": 0, "last_response": None},
    queues={"request": queue()},
    run=run,
    actions={"get_state": lambda c: c.state},
)
