"""Spec "Bounded drain and concurrency cap": take at most 10 work messages (``{"id": str, "value": number}``)
per iteration and process them with at most 3 running at once.

**We differ** from the spec's code in one detail: it waits ten times under the same entry name
``wait-work`` in one iteration, but an entry name may appear only once per scope
(ENGINE-SEMANTICS.md section 2), so the waits are named ``wait-work-0`` ... ``wait-work-9``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from rivet_workflows import WorkflowStepContextOf, workflow

T = TypeVar("T")

MAX_PER_ITERATION = 10
CONCURRENCY_LIMIT = 3


async def process_work(value: float) -> float:
    """The work of one message: doubles its value."""
    return value * 2


async def run_with_limit(limit: int, items: list[T], fn: Callable[[T], Awaitable[None]]) -> None:
    """Run ``fn(item)`` for every item with at most ``limit`` calls in flight."""
    pending = iter(items)

    async def worker() -> None:
        for item in pending:  # the shared iterator hands each item to exactly one worker
            await fn(item)

    await asyncio.gather(*(worker() for _ in range(limit)))


async def process_window(step: WorkflowStepContextOf[Any], window: list[dict]) -> None:
    """Process one window under the concurrency cap and record its size and total in state."""
    total = 0.0

    async def handle(work: dict) -> None:
        nonlocal total
        total += await process_work(work["value"])

    await run_with_limit(CONCURRENCY_LIMIT, window, handle)
    step.state["processed"] += len(window)
    step.state["last_window_size"] = len(window)
    step.state["last_window_total"] = total


async def drain_iteration(loop_ctx: Any) -> None:
    """One iteration of ``bounded-drain-loop``: wait up to 30 s for the first message, then 10 ms each
    for up to 9 more, then process the window in one step."""
    window: list[dict] = []
    for i in range(MAX_PER_ITERATION):
        messages = await loop_ctx.queue.next_batch(f"wait-work-{i}", timeout=30 if i == 0 else 0.01)
        if not messages:
            break
        window.append(messages[0].body)
    if not window:
        return

    async def process(step: Any) -> None:
        await process_window(step, window)

    await loop_ctx.step("process-window", process)


async def run(ctx: Any) -> None:
    """Workflow: the bounded drain loop, forever."""
    await ctx.loop("bounded-drain-loop", drain_iteration)


bounded_drain_actor = workflow(
    state={"processed": 0, "last_window_size": 0, "last_window_total": 0},
    run=run,
    actions={"get_state": lambda c: c.state},
)
