"""Spec "Error hooks", in both spellings: ``workflow(run=..., on_error=..., **actor options)``
(``error_hook_actor``, @rivet-dev/workflows) and ``actor(run=workflow(fn, on_error=...))``
(``error_hook_rivetkit_actor``, rivetkit). The step always fails; the hook keeps the last event in state
and broadcasts it as ``workflow_error``.
"""

from __future__ import annotations

from typing import Any

from rivet_workflows import WorkflowErrorEvent, actor, event, workflow


async def run(ctx: Any) -> None:
    """Workflow: one step that always fails (3 retries, backoff 0.25 s doubling up to 1 s)."""

    async def sync_ledger(_step: Any) -> None:
        raise RuntimeError("ledger unavailable")

    await ctx.step(
        name="sync-ledger",
        max_retries=3,
        retry_backoff_base=0.25,
        retry_backoff_max=1.0,
        run=sync_ledger,
    )


def on_error(c: Any, error_event: WorkflowErrorEvent) -> None:
    """The hook: remember the event (a ``WorkflowErrorEvent`` dict) and broadcast it."""
    c.state["last_error"] = error_event
    c.state["error_events"] = c.state.get("error_events", 0) + 1
    c.broadcast("workflow_error", error_event)


error_hook_actor = workflow(
    state={"last_error": None, "error_events": 0},
    events={"workflow_error": event()},
    run=run,
    on_error=on_error,
    actions={"get_state": lambda c: c.state},
)

error_hook_rivetkit_actor = actor(
    state={"last_error": None, "error_events": 0},
    events={"workflow_error": event()},
    run=workflow(run, on_error=on_error),
    actions={"get_state": lambda c: c.state},
)
