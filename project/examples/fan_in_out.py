"""Spec "Fan-out / fan-in (join)": on each refresh message, fetch three counts in parallel from the
(fake) API and store their sum."""

from __future__ import annotations

from typing import Any

from rivet_workflows import workflow

from . import fake_service


def fetch_count(path: str) -> int:
    """``GET path`` on the fake service -> its ``count``; raises ``RuntimeError`` on an HTTP error."""
    try:
        return fake_service.get(path)["count"]
    except fake_service.ServiceError as exc:
        raise RuntimeError(f"fetch {path} failed: {exc.status}") from exc


def _branch(step_name: str, path: str) -> Any:
    async def branch(branch_ctx: Any) -> int:
        return await branch_ctx.step(step_name, lambda _step: fetch_count(path))

    return branch


async def join_iteration(loop_ctx: Any) -> None:
    """One iteration of ``join-loop``: wait for a refresh, join three fetches, merge."""
    messages = await loop_ctx.queue.next_batch("wait-refresh", timeout=30)
    if not messages:
        return
    joined = await loop_ctx.join(
        "parallel-work",
        {
            "users": {"run": _branch("fetch-users", "/users")},
            "orders": {"run": _branch("fetch-orders", "/orders")},
            "invoices": {"run": _branch("fetch-invoices", "/invoices")},
        },
    )

    async def merge(step: Any) -> None:
        step.state["total"] = joined["users"] + joined["orders"] + joined["invoices"]

    await loop_ctx.step("merge-results", merge)


async def run(ctx: Any) -> None:
    """Workflow: the join loop, forever."""
    await ctx.loop("join-loop", join_iteration)


fan_in_out_actor = workflow(
    state={"total": 0},
    run=run,
    actions={"get_state": lambda c: c.state},
)
