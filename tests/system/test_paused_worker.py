"""A worker paused (SIGSTOP) mid-step for longer than its lease, then resumed (SIGCONT): its heartbeat finds
the lease lost and cancels the body it guards (``step.cancelled`` set), and nothing the resumed run does
is written; the worker that took over finishes the workflow (case C62, DESIGN.md section 12)."""

from __future__ import annotations

import os
import signal
import time

import pytest

from rivet_workflows.engine.model import ports

pytestmark = [pytest.mark.system, pytest.mark.django_db(transaction=True)]


def _starts(cluster, actor_id):
    return [detail for a, w, detail in cluster.effects() if a == actor_id and w == "start-watch"]


def test_a_paused_workers_body_is_cancelled_when_it_resumes_and_writes_nothing(cluster, rt) -> None:
    body_seconds = 5 * cluster.lease
    handle = rt.client().watchful.create("paused", input={"sleep": body_seconds})
    first = cluster.start_worker()
    (started,) = cluster.wait_for(lambda: _starts(cluster, handle.actor_id), 60, what="first body")
    paused_pid = int(started.split(":")[1])
    assert paused_pid == first.pid
    cluster.start_worker()
    os.kill(paused_pid, signal.SIGSTOP)
    paused_at = time.monotonic()
    try:
        # the lease runs out; the other worker takes the actor over and starts the step again
        cluster.wait_for(lambda: len(_starts(cluster, handle.actor_id)) >= 2, 60, what="the takeover")
        time.sleep(max(0.0, cluster.lease + 0.5 - (time.monotonic() - paused_at)))
    finally:
        os.kill(paused_pid, signal.SIGCONT)
    cluster.wait_for(
        lambda: rt.store.get_actor(handle.actor_id).workflow_state == ports.COMPLETED, 90, what="completion"
    )
    effects = [(w, d) for a, w, d in cluster.effects() if a == handle.actor_id]
    mine = [w for w, d in effects if d.endswith(f":{paused_pid}")]
    # the resumed body saw its cancellation and returned; it did not run to its end
    assert mine == ["start-watch", "cancelled-watch"], effects
    record = rt.store.get_actor(handle.actor_id)
    # no stale write landed: the state and the output are the new holder's
    winner = record.output
    assert winner == record.state["writer"] and not winner.endswith(f":{paused_pid}")
    assert ("done-watch", winner) in effects
    assert [w for w, _ in effects].count("after") == 1
