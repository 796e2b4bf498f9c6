"""Replay shows its plan before it changes anything (DESIGN.md section 16; docs/explanation/replay-and-recover.md):
``handle.replay(entry_id, dry_run=True)`` returns a ``ReplayPlan`` and writes nothing, and the
replay that follows does exactly what the plan said."""

from __future__ import annotations

import dataclasses

import pytest

from rivet_workflows import ReplayPlan
from rivet_workflows.engine.model import errors, ports
from rivet_workflows.engine.model.definitions import workflow
from tests.contract.test_repairs import _booking


def _everything(h, aid):
    """The actor row, its whole history, its messages and its audit rows, as a user could read them."""
    store = h.runtime.store
    actor = dataclasses.asdict(h.actor(aid))
    history = sorted((dataclasses.asdict(e) for e in store.load_history(aid)), key=lambda e: e["seq"])
    audit = [dataclasses.asdict(row) for row in store.operator_actions(aid, limit=100)]
    return actor, history, audit


def _order(h, calls):
    async def run(ctx):
        await ctx.step("reserve", lambda s: calls.append("reserve") or "r-1")
        await ctx.join(
            "pay",
            {
                "card": lambda c: c.step("charge", lambda s: calls.append("charge") or 10),
                "points": lambda c: c.step("points", lambda s: calls.append("points") or 2),
            },
        )
        await ctx.step("ship", lambda s: calls.append("ship:" + s.idempotency_key) or "shipped")
        return "done"

    h.setup(wf=workflow(run=run))
    aid = h.start()
    h.drain()
    assert h.actor(aid).workflow_state == ports.COMPLETED
    return aid


def test_a_dry_run_replay_returns_the_plan_and_writes_nothing(h):
    calls: list = []
    aid = _order(h, calls)
    handle = h.runtime.client()["wf"].get("k")
    before = _everything(h, aid)

    plan = handle.replay("ship", reason="second shipment?", dry_run=True)

    assert plan == ReplayPlan(entry_id="ship", reset=(), deleted=("ship",), rerun=("ship",))
    assert _everything(h, aid) == before  # no row, entry, audit or lease written
    h.drain()
    assert calls.count("reserve") == 1 and len(calls) == 4  # nothing ran again
    assert h.actor(aid).workflow_state == ports.COMPLETED


def test_the_replay_does_what_its_plan_said(h):
    calls: list = []
    _order(h, calls)
    handle = h.runtime.client()["wf"].get("k")

    plan = handle.replay("pay/card/charge", dry_run=True)
    assert plan == ReplayPlan(
        entry_id="pay/card/charge",
        reset=("pay",),  # the join holding the replayed branch is reopened
        deleted=("pay/card/charge", "pay/points/points", "ship"),
        rerun=("pay/card/charge", "pay/points/points", "ship"),
    )
    assert plan.as_dict() == {
        "entryId": "pay/card/charge",
        "reset": list(plan.reset),
        "deleted": list(plan.deleted),
        "rerun": list(plan.rerun),
    }

    result = handle.replay("pay/card/charge", reason="card declined by mistake")
    assert result.deleted == list(plan.deleted) and result.reset == list(plan.reset)
    calls.clear()
    h.drain()
    assert [c.split(":")[0] for c in calls] == ["charge", "points", "ship"]


def test_a_plan_of_everything_lists_every_step_in_the_order_it_ran(h):
    calls: list = []
    aid = _order(h, calls)
    plan = h.runtime.client()["wf"].get("k").replay(dry_run=True)
    assert plan.entry_id is None and plan.reset == ()
    assert plan.rerun[0] == "reserve" and plan.rerun[-1] == "ship" and len(plan.rerun) == 4
    assert set(plan.deleted) == set(h.history(aid))


def test_a_plan_is_a_frozen_value(h):
    plan = ReplayPlan(entry_id=None, reset=(), deleted=("a",), rerun=("a",))
    with pytest.raises(dataclasses.FrozenInstanceError):
        plan.entry_id = "b"  # type: ignore[misc]


def test_a_dry_run_of_a_refused_replay_raises_the_refusal_and_writes_nothing(h):
    aid = _booking(h, [], {"broken": True})  # rolled back: reserve and charge were compensated
    handle = h.runtime.client()["wf"].get("k")
    before = _everything(h, aid)
    with pytest.raises(errors.WorkflowRolledBackError):
        handle.replay("notify", dry_run=True)
    with pytest.raises(errors.EntryNotFoundError):
        handle.replay("nope", dry_run=True)
    with pytest.raises(errors.InvalidReplayTargetError):
        handle.replay("start", dry_run=True)
    assert _everything(h, aid) == before
    assert handle.replay("reserve", dry_run=True).rerun == ("reserve", "charge", "notify")
