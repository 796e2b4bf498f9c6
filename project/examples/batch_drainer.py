"""Spec "Batch drainer": buffer metric messages (``{"value": number}``) and flush them five at a time."""

from __future__ import annotations

from typing import Any

from rivet_workflows import WorkflowStepContextOf, workflow

BATCH_SIZE = 5


def flush_batch(step: WorkflowStepContextOf[Any]) -> None:
    """Sum the buffered values into ``last_batch_total``, count the batch and empty the buffer."""
    step.state["last_batch_total"] = sum(step.state["pending"])
    step.state["flushed_batches"] += 1
    step.state["pending"] = []


async def drain_iteration(loop_ctx: Any) -> None:
    """One iteration of ``drain-loop``: buffer the next metric (if any within 5 s); flush at 5."""
    messages = await loop_ctx.queue.next_batch("wait-metric", timeout=5)

    async def buffer_message(step: Any) -> int:
        if messages:
            step.state["pending"].append(messages[0].body["value"])
        return len(step.state["pending"])

    pending_count = await loop_ctx.step("buffer-message", buffer_message)
    if pending_count < BATCH_SIZE:
        return

    async def flush(step: Any) -> None:
        flush_batch(step)

    await loop_ctx.step("flush-batch", flush)


async def run(ctx: Any) -> None:
    """Workflow: the drain loop, forever."""
    await ctx.loop("drain-loop", drain_iteration)


batch_drainer_actor = workflow(
    state={"pending": [], "flushed_batches": 0, "last_batch_total": 0},
    run=run,
    actions={"get_state": lambda c: c.state},
)
