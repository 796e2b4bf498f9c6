"""Spec "Poll and backoff loop": poll a dependency; on failure double the delay (100 ms up to 5 s) and
sleep durably; on success reset and sleep the healthy interval (1 s)."""

from __future__ import annotations

from typing import Any

from rivet_workflows import workflow


async def poll_external(attempt: int) -> bool:
    """The dependency: healthy on every third poll."""
    return attempt % 3 == 0


async def poll_iteration(loop_ctx: Any) -> None:
    """One iteration of ``poll-loop``."""

    async def poll_target(step: Any) -> bool:
        step.state["attempts"] += 1
        return await poll_external(step.state["attempts"])

    success = await loop_ctx.step("poll-target", poll_target)
    if success:

        async def reset_backoff(step: Any) -> None:
            step.state["status"] = "healthy"
            step.state["backoff_ms"] = 100

        await loop_ctx.step("reset-backoff", reset_backoff)
        await loop_ctx.sleep("healthy-interval", 1.0)
        return

    async def grow_backoff(step: Any) -> int:
        step.state["status"] = "retrying"
        step.state["backoff_ms"] = min(step.state["backoff_ms"] * 2, 5000)
        return step.state["backoff_ms"]

    retry_delay_ms = await loop_ctx.step("grow-backoff", grow_backoff)
    await loop_ctx.sleep("retry-delay", retry_delay_ms / 1000)


async def run(ctx: Any) -> None:
    """Workflow: the poll loop, forever."""
    await ctx.loop("poll-loop", poll_iteration)


poll_backoff_actor = workflow(
    state={"attempts": 0, "backoff_ms": 100, "status": "unknown"},
    run=run,
    actions={"get_state": lambda c: c.state},
)
