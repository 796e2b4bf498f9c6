"""Writes a store refuses (values a column cannot hold, a database DataError) fail the workflow with a clear
error instead of escaping the executor and re-running the step every lease period; an actor of a type this
process does not know is left alone (DjangoStore, SQLite or PostgreSQL)."""

from __future__ import annotations

import logging

import pytest
from django.db.utils import DataError, OperationalError

from rivet_workflows.engine.model import ports
from rivet_workflows.engine.model.definitions import actor, setup, workflow
from rivet_workflows.engine.runtime import executor

pytestmark = pytest.mark.django_db(transaction=True)


def _registry(body, name="wf"):
    async def run(ctx):
        await ctx.step("first", lambda s: s.state.update(first=True))
        return await ctx.step("bad", body, max_retries=3)

    return setup(use={name: actor(state={"n": 0}, run=workflow(run))})


def test_a_step_state_with_a_lone_surrogate_fails_the_workflow_once(make_django_runtime, caplog):
    calls = []

    def body(step):
        calls.append(1)
        step.state["s"] = "\ud800"
        return "ok"

    runtime = make_django_runtime(_registry(body), lease_seconds=2)
    handle = runtime.client().wf.get_or_create("k")
    with caplog.at_level(logging.ERROR, logger="rivet_workflows"):
        executor.drain(runtime, timeout=5)  # returns: nothing escapes
    record = runtime.store.get_actor(handle.actor_id)
    assert record.workflow_state == ports.FAILED
    assert "surrogate" in record.error["message"]
    assert record.wake_at is None and record.lease_owner is None
    assert "\ud800" not in str(record.state)
    assert len(calls) == 1
    assert any(handle.actor_id in r.getMessage() and "failed" in r.getMessage() for r in caplog.records)
    executor.drain(runtime, timeout=0.5)
    assert len(calls) == 1  # never run again


@pytest.mark.parametrize(("raised", "fails"), [(DataError, True), (OperationalError, False)])
def test_a_database_data_error_fails_the_workflow_but_a_connection_error_does_not(
    make_django_runtime, django_store, monkeypatch, raised, fails
):
    """DataError: the same write would fail forever, so fail. OperationalError: transient, retry later."""
    calls = []

    def body(step):
        calls.append(1)
        step.state["refuse"] = True
        return "ok"

    real_commit = django_store.commit

    def commit(actor_id, token, c):
        if isinstance(c.state, dict) and c.state.get("refuse"):
            raise raised("simulated: the database refused this")
        return real_commit(actor_id, token, c)

    monkeypatch.setattr(django_store, "commit", commit)
    runtime = make_django_runtime(_registry(body), lease_seconds=2)
    handle = runtime.client().wf.get_or_create("k")
    if fails:
        executor.drain(runtime, timeout=5)
        record = runtime.store.get_actor(handle.actor_id)
        assert record.workflow_state == ports.FAILED
        assert record.error["name"] == "StoreRejectedError"
        assert "DataError" in record.error["message"] and "refused" in record.error["message"]
        assert record.state == {"n": 0, "first": True}  # what was stored before the refused commit
        assert len(calls) == 1
    else:
        with pytest.raises(executor.StoreUnavailableError):
            executor.drain(runtime, timeout=5)
        assert runtime.store.get_actor(handle.actor_id).workflow_state != ports.FAILED


def test_an_actor_of_an_unregistered_type_is_left_alone(make_django_runtime, caplog):
    from rivet_workflows.engine.model import errors
    from rivet_workflows.engine.operate import inspector, repairs

    def body(step):
        return 1

    old = make_django_runtime(_registry(body, name="old_type"))
    handle = old.client().old_type.get_or_create("k")
    # run the first step only, then the type disappears (a deploy renamed it)
    new_registry = setup(use={"other": actor(state={}, run=workflow(lambda ctx: None))})
    executor.drain(old, timeout=5)
    assert old.store.get_actor(handle.actor_id).workflow_state == ports.COMPLETED
    old.store.commit(
        handle.actor_id,
        old.store.claim(handle.actor_id, "t", 30),
        ports.Commit(workflow_state=ports.SLEEPING, wake_at=old.store.now(), release=True),
    )
    new = make_django_runtime(new_registry)
    with caplog.at_level(logging.WARNING, logger="rivet_workflows"):
        first = executor.drain(new, timeout=1)
        executor.drain(new, timeout=1)
    record = new.store.get_actor(handle.actor_id)
    assert record.workflow_state == ports.SLEEPING and record.lease_owner is None
    assert record.wake_at > new.store.now()  # not due again at every sweep
    assert first.steps_executed == 0
    warnings = [r for r in caplog.records if "old_type" in r.getMessage()]
    assert len(warnings) == 1 and "not registered" in warnings[0].getMessage()
    view = inspector.workflow_history(new, handle.actor_id)
    assert view["isWorkflowEnabled"] is False
    assert view["history"] is not None and view["history"]["entries"]
    for repair in (repairs.replay, repairs.recover):
        with pytest.raises(errors.ActorTypeNotRegisteredError, match="not registered"):
            repair(new, handle.actor_id)
    assert new.store.get_actor(handle.actor_id).lease_owner is None
