"""Not in the spec: a durable pydantic-ai agent (docs/howto/agents.md, DESIGN.md section 17).

A support agent handles a damaged parcel: it looks the order up (a tool, run as a step), asks for a refund
(a tool that waits for a person's approval on the queue ``approval``, then pays in a step) and streams its
answer to the durable stream ``answer``. The model is a scripted pydantic-ai ``FunctionModel`` (no network):
its three requests are fixed, and the last one streams its answer slowly, so the demo can kill the worker
while it runs. Every model request and tool call counts its runs in the fake service
(``POST /counters/agent-demo:<key>:<name>``), which outlives the worker, so the demo shows that nothing
completed before the crash ran again.

Input: ``{"order_id": str, "answer_seconds": float}`` (default ``"order-7"``, 3.0 s for the streamed
answer). Send ``{"approved": bool}`` to queue ``approval``. Counter names: ``model-1``, ``model-2``,
``model-3:start``, ``model-3:done``, ``tool:lookup_order``, ``tool:refund``.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

from pydantic_ai import Agent, RunContext
from pydantic_ai.messages import ModelMessage, ModelRequest, ModelResponse, TextPart, ToolCallPart
from pydantic_ai.models.function import AgentInfo, DeltaToolCall, DeltaToolCalls, FunctionModel

from rivet_workflows import queue, workflow
from rivet_workflows.contrib.pydantic_ai import DurableAgent, workflow_context

from . import fake_service

#: the words of the agent's final answer (streamed one by one)
ANSWER = "Sorry about the damaged parcel. I refunded {amount} EUR for order {order_id}; it is on its way back to your card."


def counter_name(key: str, name: str) -> str:
    """The fake-service counter ``name`` of the agent actor keyed ``key``."""
    return f"agent-demo:{key}:{name}"


def _bump(key: str, name: str) -> int:
    return fake_service.post(f"/counters/{counter_name(key, name)}")["count"]


async def bump(key: str, name: str) -> int:
    """Count one run of ``name`` in the fake service (in a thread: the HTTP call blocks)."""
    return await asyncio.to_thread(_bump, key, name)


class Deps:
    """What the agent's tools and scripted model need: the actor's key (counters) and the answer pace."""

    def __init__(self, key: str, answer_seconds: float) -> None:
        self.key = key
        self.answer_seconds = answer_seconds


def _turn(messages: list[ModelMessage]) -> int:
    """The number of model responses so far: 0 for the first request of the run."""
    return sum(1 for m in messages if isinstance(m, ModelResponse))


def _tool_return(messages: list[ModelMessage], tool: str) -> Any:
    for message in messages:
        if isinstance(message, ModelRequest):
            for part in message.parts:
                if getattr(part, "tool_name", None) == tool and part.part_kind == "tool-return":
                    return part.content
    return None


def _script(messages: list[ModelMessage], info: AgentInfo, order_id: str) -> ToolCallPart | str:
    turn = _turn(messages)
    if turn == 0:
        return ToolCallPart("lookup_order", {"order_id": order_id}, tool_call_id="lookup-1")
    if turn == 1:
        order = _tool_return(messages, "lookup_order")
        return ToolCallPart(
            "refund", {"order_id": order_id, "amount": order["total"]}, tool_call_id="refund-1"
        )
    order = _tool_return(messages, "lookup_order")
    return ANSWER.format(amount=order["total"], order_id=order_id)


def _scripted(info: AgentInfo) -> dict:
    """What the workflow tells the scripted model through ``model_settings["extra_body"]`` (a real model
    would send it to its provider): the actor's key (for the counters), the order and the answer pace."""
    return dict((info.model_settings or {}).get("extra_body") or {})


def _count_name(turn: int) -> str:
    return f"model-{turn + 1}" if turn < 2 else "model-3:start"


async def model_function(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    """The scripted model without streaming: one request of ``_script``."""
    script, turn = _scripted(info), _turn(messages)
    await bump(script["key"], _count_name(turn))
    answer = _script(messages, info, script["order_id"])
    if turn >= 2:
        await asyncio.sleep(float(script["answer_seconds"]))  # a model takes its time to answer
        await bump(script["key"], "model-3:done")
    return ModelResponse(parts=[answer if isinstance(answer, ToolCallPart) else TextPart(answer)])


async def stream_function(
    messages: list[ModelMessage], info: AgentInfo
) -> AsyncIterator[str | DeltaToolCalls]:
    """The scripted model streaming: a tool call in one chunk, the final answer word by word, slowly."""
    script, turn = _scripted(info), _turn(messages)
    await bump(script["key"], _count_name(turn))
    answer = _script(messages, info, script["order_id"])
    if isinstance(answer, ToolCallPart):
        yield {
            0: DeltaToolCall(answer.tool_name, answer.args_as_json_str(), tool_call_id=answer.tool_call_id)
        }
        return
    words = answer.split(" ")
    for i, word in enumerate(words):
        await asyncio.sleep(float(script["answer_seconds"]) / len(words))
        yield word if i == 0 else " " + word
    await bump(script["key"], "model-3:done")


agent = Agent(
    FunctionModel(model_function, stream_function=stream_function, model_name="scripted-support"),
    name="support",
    deps_type=Deps,
    instructions="You are a support agent. Be brief.",
)


@agent.tool
async def lookup_order(ctx: RunContext[Deps], order_id: str) -> dict:
    """Look the order up (a step: recorded, never called again once it completed)."""
    await bump(ctx.deps.key, "tool:lookup_order")
    return {"order_id": order_id, "status": "delivered damaged", "total": "30.00"}


@agent.tool
async def refund(ctx: RunContext[Deps], order_id: str, amount: str) -> str:
    """Refund ``amount`` once a person approved it: waits on the queue ``approval`` in workflow code, then
    pays in a step (``workflow_tools=["refund"]`` below)."""
    wf = workflow_context()
    decision = await wf.queue.next(f"approval-{ctx.tool_call_id}", names=["approval"])
    if not decision.body.get("approved"):
        return "refused by the support lead"

    async def pay(step: Any) -> str:
        await bump(ctx.deps.key, "tool:refund")
        step.state["refunded"] = amount
        return f"refunded {amount} EUR"

    return await wf.step(f"pay-{ctx.tool_call_id}", pay)


durable_support = DurableAgent(agent, workflow_tools=["refund"])


async def run(ctx: Any) -> str:
    """Workflow: run the support agent on the customer's complaint; its answer streams to ``answer``."""
    options = ctx.input or {}
    order_id = options.get("order_id", "order-7")
    deps = Deps(ctx.key[0], float(options.get("answer_seconds", 3.0)))
    result = await durable_support.run(
        ctx,
        f"My parcel arrived broken, order {order_id}",
        deps=deps,
        stream="answer",
        model_settings={
            "extra_body": {"key": deps.key, "order_id": order_id, "answer_seconds": deps.answer_seconds}
        },
    )

    def save(step: Any) -> None:
        step.state["answer"] = result.output

    await ctx.step("save-answer", save)
    return result.output


support_agent_actor = workflow(
    state={"refunded": None, "answer": None},
    queues={"approval": queue()},
    run=run,
    actions={"get_state": lambda c: c.state},
)
