"""Spec "Scatter-gather across Actors": send ``{"input": number}``; three shard actors compute parts in
parallel (a join) and the sum is stored."""

from __future__ import annotations

from typing import Any

from rivet_workflows import WorkflowStepContextOf, actor, workflow


def compute(_c: Any, value: float) -> float:
    """Shard action: ten times the input."""
    return value * 10


shard_actor = actor(actions={"compute": compute})


def call_shard(step: WorkflowStepContextOf[Any], shard_id: str, value: float) -> float:
    """Call ``compute`` on the shard actor keyed ``shard_id`` (sync: the client runs in a worker thread)."""
    handle = step.client().shard_actor.get_or_create([shard_id])
    return handle.compute(value)


def _branch(shard_id: str, value: float) -> Any:
    async def branch(join_ctx: Any) -> float:
        return await join_ctx.step(f"call-shard-{shard_id}", lambda step: call_shard(step, shard_id, value))

    return branch


async def scatter_iteration(loop_ctx: Any) -> None:
    """One iteration of ``scatter-gather-loop``."""
    messages = await loop_ctx.queue.next_batch("wait-scatter", timeout=30)
    if not messages:
        return
    value = messages[0].body["input"]
    gathered = await loop_ctx.join(
        "gather",
        {
            "shard_a": {"run": _branch("a", value)},
            "shard_b": {"run": _branch("b", value)},
            "shard_c": {"run": _branch("c", value)},
        },
    )

    async def aggregate(step: Any) -> None:
        step.state["last_sum"] = gathered["shard_a"] + gathered["shard_b"] + gathered["shard_c"]

    await loop_ctx.step("aggregate", aggregate)


async def run(ctx: Any) -> None:
    """Workflow: the scatter-gather loop, forever."""
    await ctx.loop("scatter-gather-loop", scatter_iteration)


scatter_gather_actor = workflow(
    state={"last_sum": 0},
    run=run,
    actions={"get_state": lambda c: c.state},
)
