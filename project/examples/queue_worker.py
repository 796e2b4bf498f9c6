"""Spec "Queue-driven worker": external systems enqueue jobs (``{"id": str, "amount": number}``) and the
actor processes each one durably."""

from __future__ import annotations

from typing import Any

from rivet_workflows import workflow


async def worker_iteration(loop_ctx: Any) -> None:
    """One iteration of ``worker-loop``: wait up to 30 s for a job, then count it in state."""
    messages = await loop_ctx.queue.next_batch("wait-job", timeout=30)
    if not messages:
        return
    job = messages[0].body

    async def process_job(step: Any) -> None:
        step.state["processed"] += 1
        step.state["total_amount"] += job["amount"]

    await loop_ctx.step("process-job", process_job)


async def run(ctx: Any) -> None:
    """Workflow: the worker loop, forever."""
    await ctx.loop("worker-loop", worker_iteration)


queue_worker_actor = workflow(
    state={"processed": 0, "total_amount": 0},
    run=run,
    actions={"get_state": lambda c: c.state},
)
