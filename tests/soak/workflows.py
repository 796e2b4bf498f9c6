"""The soak's workflow (RIVET_REGISTRY=tests.soak.workflows.registry in its workers).

Every step body appends ``<actor_id> start-<step> <attempt> <pid> <epoch seconds>`` to the effects log of
tests/system/workflows (``$RIVET_FAULT_DIR/effects.log``) before it works, so the soak can match each body
run with the attempt the engine recorded for it.
"""

from __future__ import annotations

import os
import time
from typing import Any

from rivet_workflows.engine.model.definitions import queue, setup, workflow
from tests.system.workflows import effect


def _body(name: str, seconds_key: str = "work"):
    def body(step: Any) -> str:
        effect(step.actor_id, f"start-{name}", f"{step.attempt} {os.getpid()} {time.time():.6f}")
        time.sleep(float(step.state[seconds_key] or step.state["work"]))
        return name

    body.__name__ = f"soak_{name}"
    return body


async def run_soak(ctx: Any) -> list:
    """Three steps (``state["work"]`` seconds each; the middle one ``state["long"]`` seconds, past the
    lease for some actors: the heartbeat keeps it), a durable sleep of ``state["nap"]`` seconds, then one
    ``ping`` message per ``state["messages"]``; returns the bodies received, in order, then a last step."""
    await ctx.step("s1", _body("s1"))
    await ctx.step("s2", _body("s2", "long"), timeout=120)
    await ctx.step("s3", _body("s3"))
    await ctx.sleep("nap", float(await ctx.step("read-nap", lambda step: step.state["nap"])))
    count = int(await ctx.step("read-messages", lambda step: step.state["messages"]))
    got = []
    for i in range(count):
        message = await ctx.queue.next(f"recv-{i}", names=["ping"])
        got.append(message.body)
    await ctx.step("s4", _body("s4"))
    return got


soak_actor = workflow(
    run=run_soak,
    queues={"ping": queue()},
    create_state=lambda input: {
        "work": input["work"],
        "long": input.get("long", 0),
        "nap": input["nap"],
        "messages": input["messages"],
    },
)

registry = setup(use={"soak": soak_actor})
