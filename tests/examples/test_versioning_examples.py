"""The versioning examples across a deploy: an instance started under the old code resumes under the new."""

from __future__ import annotations

import time

import pytest

from project.examples import versioning
from project.registry import ACTORS
from rivet_workflows.engine.model import ports
from rivet_workflows.engine.model.definitions import setup
from rivet_workflows.engine.run import context
from rivet_workflows.engine.runtime import executor
from rivet_workflows.testing import make_runtime


def _needs(feature: str):
    return pytest.mark.skipif(
        not hasattr(context.WorkflowContext, feature), reason=f"ctx.{feature} lands with a later issue"
    )


def _drain_until(runtime, handle, predicate, timeout: float = 15.0):
    deadline = time.monotonic() + timeout
    while True:
        record = runtime.store.get_actor(handle.actor_id)
        assert record.workflow_state != ports.FAILED, record.error
        if predicate(record.state):
            return record
        assert time.monotonic() < deadline, f"not reached: {record.state}"
        executor.drain(runtime, timeout=0.3)
        time.sleep(0.02)


def _deploy(old_runtime):
    """A runtime on the same store whose registry has the new code of every example (the deploy)."""
    return make_runtime(setup(use={**ACTORS}), store=old_runtime.store)


def _start_old(name: str = "in-flight"):
    """An instance of the versioned actor started under the old code, suspended inside main-loop-v2."""
    old = make_runtime(setup(use={"versioned_workflow_actor": versioning.versioned_workflow_actor_v1}))
    handle = old.client().versioned_workflow_actor.get_or_create([name])
    _drain_until(old, handle, lambda s: s["runs"] >= 2)  # validate-v1 and one heartbeat
    return old, handle


@_needs("removed")
def test_spec_versioned_workflow_runs_on_a_fresh_instance():
    runtime = make_runtime(setup(use=ACTORS))
    handle = runtime.client().versioned_workflow_actor.get_or_create(["fresh"])
    record = _drain_until(runtime, handle, lambda s: s["runs"] >= 3)  # validate-v2 and two heartbeats
    history = {e.key: e for e in runtime.store.load_history(handle.actor_id)}
    assert history["validate-v2"].status == ports.ENTRY_COMPLETED
    assert history["validate-v1"].kind == "removed"  # the placeholder ctx.removed writes on a fresh run
    assert "main-loop-v2" in history
    assert record.workflow_state == ports.SLEEPING


@_needs("get_version")
def test_migrated_versioned_workflow_resumes_an_instance_started_before_validate_was_renamed():
    old, handle = _start_old()
    before = {e.key for e in old.store.load_history(handle.actor_id)}

    new = make_runtime(
        setup(use={"versioned_workflow_actor": versioning.versioned_workflow_actor_migrated}), store=old.store
    )
    handle = new.client().versioned_workflow_actor.get_for_id(handle.actor_id)
    runs = handle.state()["runs"]
    record = _drain_until(new, handle, lambda s: s["runs"] >= runs + 2)  # the loop goes on
    history = {e.key: e for e in new.store.load_history(handle.actor_id)}
    assert history["validate"].data["resolved"] == 1  # the gate pinned the old instance to v1
    assert "validate-v2" not in history  # the new step is for fresh instances only
    assert history["validate-v1"].kind == "step"  # retired by ctx.removed, still in history
    assert {"validate-v1", "main-loop-v2"} <= before <= set(history) | {k for k in before if "/~" in k}
    assert record.workflow_state == ports.SLEEPING

    fresh = new.client().versioned_workflow_actor.get_or_create(["fresh-after-deploy"])
    _drain_until(new, fresh, lambda s: s["runs"] >= 2)
    fresh_history = {e.key: e for e in new.store.load_history(fresh.actor_id)}
    assert fresh_history["validate"].data["resolved"] == 2
    assert fresh_history["validate-v2"].status == ports.ENTRY_COMPLETED


@_needs("removed")
def test_spec_versioned_workflow_refuses_an_in_flight_instance_before_running_the_new_step():
    """The spec's code creates validate-v2 ahead of entries the old instance recorded; the engine stops it
    before the step runs (ENGINE-SEMANTICS.md section 2, kept by the lead) and names the fix."""
    old, handle = _start_old("refused")
    new = _deploy(old)
    handle = new.client().versioned_workflow_actor.get_for_id(handle.actor_id)
    runs = handle.state()["runs"]
    deadline = time.monotonic() + 15
    while new.store.get_actor(handle.actor_id).workflow_state != ports.FAILED:
        assert time.monotonic() < deadline
        executor.drain(new, timeout=0.3)
    record = new.store.get_actor(handle.actor_id)
    assert record.error["name"] == "HistoryDivergedError"
    assert "validate-v2" in record.error["message"] and "ctx.get_version" in record.error["message"]
    assert "validate-v2" not in {e.key for e in new.store.load_history(handle.actor_id)}
    assert record.state["runs"] == runs  # nothing ran


@_needs("get_version")
def test_version_gate_keeps_the_in_flight_iteration_on_v1_and_moves_new_ones_to_v2():
    old = make_runtime(setup(use={"version_gate_actor": versioning.version_gate_actor_v1}))
    handle = old.client().version_gate_actor.get_or_create(["in-flight"])
    _drain_until(old, handle, lambda s: s["processed"] >= 1)  # iteration 0 sleeps after process-v1

    new = _deploy(old)
    handle = new.client().version_gate_actor.get_for_id(handle.actor_id)
    record = _drain_until(new, handle, lambda s: s["processed"] >= 3)
    versions = record.state["versions"]
    assert versions[0] == 1  # recorded by the old code
    assert set(versions[1:]) == {2}  # every iteration that began after the deploy


@_needs("get_version")
def test_a_fresh_version_gate_instance_takes_the_latest_version():
    runtime = make_runtime(setup(use=ACTORS))
    handle = runtime.client().version_gate_actor.get_or_create(["fresh"])
    record = _drain_until(runtime, handle, lambda s: s["processed"] >= 2)
    assert set(record.state["versions"]) == {2}
