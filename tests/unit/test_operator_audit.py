"""Every operator action writes an audit row with who, why, when and the entries it deleted or reset, in
the commit that makes the change; a refused action writes none (DESIGN.md section 12)."""

from __future__ import annotations

import asyncio

import pytest

from rivet_workflows.engine.actor import audit
from rivet_workflows.engine.model import errors, ports
from rivet_workflows.engine.model.definitions import setup, workflow
from rivet_workflows.testing import drain, make_runtime

FLAGS = {"broken": True}


def _charge(step):
    if FLAGS["broken"]:
        raise RuntimeError("card declined")
    return "charged"


async def _run(ctx):
    await ctx.step("fetch", lambda step: {"total": 12})
    return await ctx.step("charge", _charge, max_retries=0)


@pytest.fixture
def failed():
    FLAGS["broken"] = True
    runtime = make_runtime(setup(use={"order": workflow(run=_run)}))
    handle = runtime.client().order.get_or_create("o1")
    drain(runtime)
    assert handle.workflow_state() == ports.FAILED
    FLAGS["broken"] = False
    return runtime, handle


def _rows(runtime, handle):
    return audit.history_of(runtime, handle.actor_id)["items"]


def test_handle_replay_archives_the_deleted_entries_with_who_and_reason(failed):
    runtime, handle = failed
    result = handle.replay("charge", reason="card fixed")
    assert result.deleted == ["charge"]
    (row,) = _rows(runtime, handle)
    assert (row["action"], row["who"], row["reason"]) == ("replay", "python", "card fixed")
    assert row["at"] is not None
    (archived,) = audit.archived_records(runtime.store.operator_actions(handle.actor_id)[0])
    assert archived.key == "charge" and archived.status == ports.ENTRY_EXHAUSTED
    assert archived.error["message"] == "card declined"
    drain(runtime)
    assert handle.record().output == "charged"


def test_replay_all_and_its_async_twin(failed):
    runtime, handle = failed
    asyncio.run(handle.areplay())
    (row,) = _rows(runtime, handle)
    assert row["action"] == "replay_all" and row["reason"] is None
    kept = audit.archived_records(runtime.store.operator_actions(handle.actor_id)[0])
    assert [e.key for e in kept] == ["fetch", "charge"]
    assert kept[0].data["output"] == {"total": 12}


def test_recover_archives_the_failed_steps_as_they_were_before_the_reset(failed):
    runtime, handle = failed
    assert handle.recover(reason="retry after the outage")
    (row,) = _rows(runtime, handle)
    assert (row["action"], row["reason"]) == ("recover", "retry after the outage")
    (before,) = audit.archived_records(runtime.store.operator_actions(handle.actor_id)[0])
    assert before.key == "charge" and before.attempts == 1 and before.status == ports.ENTRY_EXHAUSTED
    reset = {e.key: e for e in runtime.store.load_history(handle.actor_id)}["charge"]
    assert reset.status == ports.ENTRY_PENDING and reset.attempts == 0


def test_cancel_is_recorded_and_a_cancel_of_a_finished_workflow_is_not(failed):
    runtime, handle = failed
    assert not handle.cancel(reason="too late")  # failed is finished: nothing done, nothing recorded
    assert _rows(runtime, handle) == []
    other = runtime.client().order.get_or_create("o2")
    assert other.cancel(reason="customer asked")
    (row,) = _rows(runtime, other)
    assert (row["action"], row["who"], row["reason"], row["archived_entries"]) == (
        "cancel",
        "python",
        "customer asked",
        [],
    )


def test_a_refused_repair_writes_no_audit_row(failed):
    runtime, handle = failed
    token = runtime.store.claim(handle.actor_id, "another-worker", 30)
    with pytest.raises(errors.WorkflowInFlightError):
        handle.replay("charge", reason="x")
    assert runtime.store.release(handle.actor_id, token).ok
    with pytest.raises(errors.EntryNotFoundError):
        handle.replay("nope")
    assert _rows(runtime, handle) == []
    assert handle.workflow_state() == ports.FAILED


def test_record_writes_an_action_without_a_commit_newest_first(failed):
    runtime, handle = failed
    audit.record(runtime, handle.actor_id, audit.PAUSE, who="alice", reason="  deploy  ")
    handle.recover()
    assert [(r["action"], r["who"], r["reason"]) for r in _rows(runtime, handle)] == [
        ("recover", "python", None),
        ("pause", "alice", "deploy"),
    ]
    with pytest.raises(ValueError):
        audit.record(runtime, handle.actor_id, "reboot", who="alice")
    with pytest.raises(errors.ActorNotFoundError):
        audit.record(runtime, "no-such-actor", audit.PAUSE, who="alice")
    assert audit.bulk(audit.RECOVER) == "bulk_recover"
    audit.record(runtime, handle.actor_id, audit.bulk(audit.RESUME), who="bob")
