"""A refused or no-op operator call writes nothing, on every store (docs/explanation/replay-and-recover.md):
recover, replay, cancel, pause and resume decide before they claim anything, so the actor row (every column:
lease owner, expiry and token, ``updated_at``, pause), the history and the audit trail are exactly as they
were. The contract suite runs on MemoryStore here and on DjangoStore/PostgresStore in
tests/integration/test_contract_on_django.py."""

from __future__ import annotations

import pytest

from rivet_workflows.engine.actor.cancel import cancel
from rivet_workflows.engine.model import errors, ports
from rivet_workflows.engine.model.definitions import queue, workflow
from rivet_workflows.engine.operate import repairs

FLAGS = {"fail": False}


def _charge(step):
    if FLAGS["fail"]:
        raise errors.CriticalError("card declined")
    return "charged"


async def _order(ctx):
    await ctx.step("charge", _charge)
    await ctx.sleep("cool-down", 0)
    msg = await ctx.queue.next("wait-go", names=["go"])
    return await ctx.step("ship", lambda s: msg.body)


async def _renamed(ctx):  # a deploy that renamed "charge": recorded runs no longer replay
    await ctx.step("bill", _charge)
    await ctx.sleep("cool-down", 0)
    msg = await ctx.queue.next("wait-go", names=["go"])
    return await ctx.step("ship", lambda s: msg.body)


async def _saga(ctx):
    await ctx.rollback_checkpoint("saga")
    await ctx.step(name="reserve", run=lambda s: "r-1", rollback=lambda rctx, out: None)
    await ctx.step(name="charge", run=_charge, max_retries=0)


def _setup(h):
    FLAGS["fail"] = False
    h.setup(wf=workflow(run=_order, queues={"go": queue()}), saga=workflow(run=_saga))


def _sleeping(h):
    aid = h.start()
    h.drain()
    assert h.actor(aid).workflow_state == ports.SLEEPING
    return aid


def _completed(h):
    aid = _sleeping(h)
    h.send(aid, "go", "shipped")
    h.drain()
    assert h.actor(aid).workflow_state == ports.COMPLETED
    return aid


def _failed(h):
    FLAGS["fail"] = True
    aid = h.start()
    h.drain()
    assert h.actor(aid).workflow_state == ports.FAILED
    FLAGS["fail"] = False
    return aid


def _rolled_back(h):
    FLAGS["fail"] = True
    aid = h.start("saga")
    h.drain()
    assert h.actor(aid).workflow_state == ports.FAILED
    return aid


def _in_flight(make):
    def build(h):
        aid = make(h)
        assert h.runtime.store.claim(aid, "a-running-worker", 60) is not None  # an executor holds it
        return aid

    return build


def _paused(h):
    aid = _sleeping(h)
    assert h.runtime.client().wf.get_for_id(aid).pause("maintenance")
    return aid


def _cancelled(h):
    aid = _sleeping(h)
    assert cancel(h.runtime, aid)
    return aid


def _swap_code(h):
    h.runtime.registry.get("wf").run = workflow(_renamed)


def _handle(h, aid):
    record = h.actor(aid)
    return h.runtime.client()[record.name].get_for_id(aid)


REFUSED = {
    # name: (actor builder, the call, what it raises, or the False it returns)
    "recover a completed workflow": (
        _completed,
        lambda h, a: repairs.recover(h.runtime, a),
        errors.WorkflowNotFailedError,
    ),
    "recover a sleeping workflow": (
        _sleeping,
        lambda h, a: repairs.recover(h.runtime, a),
        errors.WorkflowNotFailedError,
    ),
    "recover a rolled-back run": (
        _rolled_back,
        lambda h, a: repairs.recover(h.runtime, a),
        errors.WorkflowRolledBackError,
    ),
    "recover in flight": (
        _in_flight(_failed),
        lambda h, a: repairs.recover(h.runtime, a),
        errors.WorkflowInFlightError,
    ),
    "recover through the handle": (_completed, lambda h, a: _handle(h, a).recover(), False),
    "recover in bulk": (
        _completed,
        lambda h, a: repairs.recover(h.runtime, a, bulk=True),
        errors.WorkflowNotFailedError,
    ),
    "replay from an unknown entry": (
        _completed,
        lambda h, a: repairs.replay(h.runtime, a, "nope"),
        errors.EntryNotFoundError,
    ),
    "replay from a sleep": (
        _completed,
        lambda h, a: repairs.replay(h.runtime, a, "cool-down"),
        errors.InvalidReplayTargetError,
    ),
    "replay a rolled-back run from a later step": (
        _rolled_back,
        lambda h, a: repairs.replay(h.runtime, a, "charge"),
        errors.WorkflowRolledBackError,
    ),
    "replay in flight": (
        _in_flight(_sleeping),
        lambda h, a: repairs.replay(h.runtime, a),
        errors.WorkflowInFlightError,
    ),
    "replay that would diverge": (
        _completed,
        lambda h, a: (_swap_code(h), repairs.replay(h.runtime, a, "ship")),
        errors.HistoryDivergedError,
    ),
    "replay through the handle": (
        _completed,
        lambda h, a: _handle(h, a).replay("nope"),
        errors.EntryNotFoundError,
    ),
    "cancel a completed workflow": (_completed, lambda h, a: cancel(h.runtime, a), False),
    "cancel a failed workflow": (_failed, lambda h, a: _handle(h, a).cancel(), False),
    "cancel a cancelled workflow": (_cancelled, lambda h, a: cancel(h.runtime, a, bulk=True), False),
    "pause a paused actor": (_paused, lambda h, a: _handle(h, a).pause(), False),
    "pause a completed workflow": (_completed, lambda h, a: repairs.pause(h.runtime, a, bulk=True), False),
    "resume an actor that is not paused": (_sleeping, lambda h, a: _handle(h, a).resume(), False),
    "resume a workflow cancelled while paused": (
        lambda h: (lambda a: (cancel(h.runtime, a), a)[1])(_paused(h)),
        lambda h, a: _handle(h, a).resume(),
        False,
    ),
    "resume in bulk": (_completed, lambda h, a: repairs.resume(h.runtime, a, bulk=True), False),
}


@pytest.mark.parametrize("case", sorted(REFUSED))
def test_a_refused_or_no_op_operator_call_writes_nothing(h, case):
    _setup(h)
    build, call, outcome = REFUSED[case]
    aid = build(h)
    before = h.snapshot(aid)
    if outcome is False:
        assert call(h, aid) is False
    else:
        with pytest.raises(outcome):
            call(h, aid)
    assert h.snapshot(aid) == before
    FLAGS["fail"] = False
