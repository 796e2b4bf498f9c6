"""Open trace pages hear of every change their header shows (case C63): a push follows every commit that
moves the workflow state or gives the lease back, also when it writes no history entry, and a cancel."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from rivet_workflows.engine.model import ports
from rivet_workflows.engine.runtime import executor
from rivet_workflows.testing import make_runtime
from tests.unit.test_warm_wait_engine import REGISTRY, ScriptedStore


def _watched():
    """A runtime whose history-change hook records what the store said when each push was asked for."""
    store = ScriptedStore()  # no message comes in the warm window
    runtime = make_runtime(REGISTRY, store=store)
    seen: list[ports.ActorRecord] = []
    runtime.on_history_change = lambda actor_id: seen.append(store.get_actor(actor_id))
    handle = runtime.client().one.create("k")
    seen.clear()
    return runtime, handle, seen


def test_the_release_after_an_empty_warm_wait_is_pushed_to_open_pages():
    runtime, handle, seen = _watched()
    live_until = datetime.now(UTC) + timedelta(seconds=30)
    summary = executor.run_actor(runtime, handle.actor_id, live_until=live_until, warm_wait=0.25)
    assert summary.workflow_state == ports.SLEEPING
    # the run wrote no entry (it waits at once), but the page showed "running" for the warm window
    assert seen, "no push after the run released the actor"
    last = seen[-1]
    assert last.workflow_state == ports.SLEEPING and last.lease_owner is None


def test_a_cancel_is_pushed_to_open_pages():
    runtime, handle, seen = _watched()
    assert handle.cancel() is True
    assert seen and seen[-1].workflow_state == ports.CANCELLED
