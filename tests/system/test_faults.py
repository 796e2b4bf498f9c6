"""Fault matrix with real Celery worker processes: SIGKILL of the worker (its whole process
group) in a step body, after the body before its commit, after the commit, mid-rollback and while a
workflow waits on a queue with a timeout; a step that kills its worker on every attempt.

Each test arms a kill point of tests/system/workflows, keeps one worker alive (restarting killed ones) and
checks the outcome in the database and in the side-effect log. Lease 2 s, sweep 0.2 s.
"""

from __future__ import annotations

import pytest

from rivet_workflows.engine.model import ports

from .conftest import history

pytestmark = pytest.mark.system


def _done(rt, actor_id: str, states=ports.FINISHED_STATES):
    return rt.store.get_actor(actor_id).workflow_state in states


def test_a_kill_in_a_step_body_reruns_only_that_step(cluster, rt) -> None:
    cluster.arm("body-two")
    handle = rt.client().steps.create("a")
    cluster.start_worker()
    cluster.wait_for(lambda: _done(rt, handle.actor_id), 90, keep_workers=1, what="completion")
    assert cluster.fired("body-two")
    record = rt.store.get_actor(handle.actor_id)
    assert record.workflow_state == ports.COMPLETED
    assert record.output == ["one", "two", "three"]
    c = cluster.counts()
    aid = handle.actor_id
    assert (c[(aid, "start-one")], c[(aid, "done-one")]) == (1, 1)
    assert (c[(aid, "start-two")], c[(aid, "done-two")]) == (2, 1)  # interrupted attempt + retry
    assert (c[(aid, "start-three")], c[(aid, "done-three")]) == (1, 1)
    status, attempts, _ = history(aid)["two"]
    assert (status, attempts) == ("completed", 2)  # the lost attempt counted as a failed attempt
    assert record.state["done"] == ["one", "two", "three"]  # no state change of the lost attempt kept


def test_an_attempt_killed_with_its_worker_is_listed_as_worker_lost(cluster, rt) -> None:
    """Case C57: the SIGKILLed attempt stays in the step's attempt log, started and never finished."""
    from rivet_workflows.engine.operate import inspector

    cluster.arm("body-two")
    handle = rt.client().steps.create("lost")
    cluster.start_worker()
    cluster.wait_for(lambda: _done(rt, handle.actor_id), 90, keep_workers=1, what="completion")
    assert cluster.fired("body-two")
    meta = inspector.workflow_history(rt, handle.actor_id)["history"]["entryMetadata"]
    log = meta["two"]["attemptLog"]
    assert [(a["attempt"], a["outcome"]) for a in log] == [(1, "worker lost"), (2, "completed")]
    assert log[0]["startedAt"] is not None and log[0]["finishedAt"] is None
    assert log[0]["error"]["name"] == "WorkerLostError"
    assert log[1]["finishedAt"] is not None and log[1]["error"] is None
    assert [(a["attempt"], a["outcome"]) for a in meta["one"]["attemptLog"]] == [(1, "completed")]


def test_b_kill_after_the_body_before_its_commit_runs_the_body_again(cluster, rt) -> None:
    cluster.arm("before-commit-two")
    handle = rt.client().steps.create("b")
    cluster.start_worker()
    cluster.wait_for(lambda: _done(rt, handle.actor_id), 90, keep_workers=1, what="completion")
    assert cluster.fired("before-commit-two")
    aid = handle.actor_id
    record = rt.store.get_actor(aid)
    assert record.workflow_state == ports.COMPLETED
    c = cluster.counts()
    # the body finished but its outcome was never committed: at-least-once, the body runs again ...
    assert c[(aid, "done-two")] == 2
    # ... with the same idempotency key, so an external call keyed on it takes effect once
    keys = {d for a, w, d in cluster.effects() if a == aid and w == "done-two"}
    assert len(keys) == 1
    assert (c[(aid, "done-one")], c[(aid, "done-three")]) == (1, 1)
    assert record.state["done"] == ["one", "two", "three"]  # the state change is applied once


def test_c_kill_after_the_commit_does_not_run_the_step_again(cluster, rt) -> None:
    cluster.arm("after-commit-two")
    handle = rt.client().steps.create("c")
    cluster.start_worker()
    cluster.wait_for(lambda: _done(rt, handle.actor_id), 90, keep_workers=1, what="completion")
    assert cluster.fired("after-commit-two")
    aid = handle.actor_id
    c = cluster.counts()
    assert [c[(aid, f"done-{s}")] for s in ("one", "two", "three")] == [1, 1, 1]
    assert rt.store.get_actor(aid).workflow_state == ports.COMPLETED


def test_d_kill_mid_rollback_resumes_the_rollback(cluster, rt) -> None:
    cluster.arm("rollback-charge")
    handle = rt.client().saga.create("d")
    cluster.start_worker()
    cluster.wait_for(lambda: _done(rt, handle.actor_id), 90, keep_workers=1, what="rollback end")
    assert cluster.fired("rollback-charge")
    aid = handle.actor_id
    record = rt.store.get_actor(aid)
    assert record.workflow_state == ports.FAILED
    c = cluster.counts()
    assert (c[(aid, "done-reserve")], c[(aid, "done-charge")]) == (1, 1)  # forward steps not re-run
    assert (c[(aid, "undo-start-charge")], c[(aid, "undo-done-charge")]) == (2, 1)  # resumed handler
    assert (c[(aid, "undo-start-reserve")], c[(aid, "undo-done-reserve")]) == (1, 1)  # runs once


def test_e_kill_while_waiting_on_a_queue_with_a_timeout(cluster, rt) -> None:
    timed_out = rt.client().waiter.create("e1", input={"timeout": 3})
    approved = rt.client().waiter.create("e2", input={"timeout": 3})
    worker = cluster.start_worker()

    def waiting() -> bool:
        return all(rt.store.get_actor(h.actor_id).waiting_for == ["approval"] for h in (timed_out, approved))

    cluster.wait_for(waiting, 60, what="both waiting")
    worker.kill()  # every worker is down while the wait runs; the timeout passes during the outage
    approved.send("approval", {"ok": True})  # a message arrives during the outage
    deadline = rt.store.get_actor(timed_out.actor_id).wake_at
    cluster.wait_for(lambda: rt.store.now() > deadline, 30, what="the timeout to pass")
    cluster.start_worker()
    cluster.wait_for(
        lambda: _done(rt, timed_out.actor_id) and _done(rt, approved.actor_id), 60, keep_workers=1
    )
    assert rt.store.get_actor(timed_out.actor_id).output == "timed-out"
    assert rt.store.get_actor(approved.actor_id).output == "approved"
    c = cluster.counts()
    assert c[(timed_out.actor_id, "outcome-timed-out")] == 1
    assert c[(approved.actor_id, "outcome-approved")] == 1
    assert c[(timed_out.actor_id, "outcome-approved")] == c[(approved.actor_id, "outcome-timed-out")] == 0


def test_a_step_that_kills_every_worker_ends_exhausted_with_one_on_error_event(cluster, rt) -> None:
    cluster.arm("body-doom", always=True)
    handle = rt.client().doomed.create("x")
    cluster.start_worker()
    cluster.wait_for(lambda: _done(rt, handle.actor_id), 150, keep_workers=1, what="exhaustion")
    aid = handle.actor_id
    record = rt.store.get_actor(aid)
    assert record.workflow_state == ports.FAILED
    status, attempts, error = history(aid)["doom"]
    assert (status, attempts, error) == ("exhausted", 3, "WorkerLostError")  # max_retries=2 -> 3 attempts
    c = cluster.counts()
    assert c[(aid, "start-doom")] == 3 and c[(aid, "done-doom")] == 0
    assert c[(aid, "on_error-step")] == 1
    assert c[(aid, "on_error-workflow")] == 0
