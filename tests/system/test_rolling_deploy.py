"""A rolling deploy with real Celery worker processes (case C65): an old-code worker (CODE_VERSION v1) and a
new-code worker (v2, ``validate-v3`` behind a version gate) share the queue and the same runs.

Runs are started under each code, then every run gets its message while both workers run: a wake-up of a
run v2 advanced past the gate often reaches the old worker, whose replay diverges on v2's entries. It must
leave the run unchanged for the new worker: no run fails, and every run completes with each step run once.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from rivet_workflows.engine.model import ports

from .conftest import history

pytestmark = pytest.mark.system

OLD = {"RIVET_CODE_VERSION": "v1", "RIVET_DEPLOY_CODE": "old"}
NEW = {"RIVET_CODE_VERSION": "v2", "RIVET_DEPLOY_CODE": "new"}


def _states(rt, ids):
    return Counter(rt.store.get_actor(a).workflow_state for a in ids)


def _waiting(rt, ids) -> bool:
    """Every run recorded its validate step and waits for its message."""
    for actor_id in ids:
        actor = rt.store.get_actor(actor_id)
        keys = {e.key for e in rt.store.load_history(actor_id)}
        if actor.workflow_state != ports.SLEEPING or not keys & {"validate-v2", "validate-v3"}:
            return False
    return True


def test_old_and_new_workers_side_by_side_fail_no_run_and_complete_each_once(cluster, rt) -> None:
    client = rt.client()
    new = cluster.start_worker(**NEW)
    by_new = [client.deploy.create(f"new-{i}").actor_id for i in range(10)]  # past the gate under v2
    cluster.wait_for(lambda: _waiting(rt, by_new), 60, what="runs of the new code at their queue wait")
    old = cluster.start_worker(loglevel="INFO", **OLD)  # Celery logs "ready" once it consumes
    cluster.wait_for(lambda: " ready." in Path(old.log_path).read_text(), 60, what="the old worker")
    mixed = [client.deploy.create(f"mixed-{i}").actor_id for i in range(10)]  # whichever worker takes it
    cluster.wait_for(lambda: _waiting(rt, mixed), 60, what="runs of both codes at their queue wait")
    ids = by_new + mixed
    for actor_id in ids:  # the sweep hands each wake-up to whichever worker takes the task
        rt.store.send(actor_id, "go", actor_id)

    def finished():
        states = _states(rt, ids)
        assert states[ports.FAILED] == 0, (states, cluster.logs())
        return states[ports.COMPLETED] == len(ids)

    cluster.wait_for(finished, 180, what="every run completed")  # backoffs of unlucky draws
    assert new.alive() and old.alive()

    counts = cluster.counts()
    for actor_id in ids:
        actor = rt.store.get_actor(actor_id)
        assert actor.output == actor_id and actor.awaiting_code_version is None
        validates = counts[(actor_id, "validate-v2")] + counts[(actor_id, "validate-v3")]
        assert (validates, counts[(actor_id, "ship")]) == (1, 1), actor_id  # every step exactly once
        entries = {e.key: e for e in rt.store.load_history(actor_id)}
        if "validate-v3" in entries:  # past the gate: only the new code could ship it
            assert entries["ship"].code_version == "v2", history(actor_id)
        assert {e.code_version for e in entries.values()} <= {"v1", "v2"}
    assert all(counts[(a, "validate-v3")] == 1 for a in by_new)

    # The old worker met runs of the new code and left them (logged once per run, not once per wake-up).
    old_log = Path(old.log_path).read_text()
    left = [  # the project's console handler's lines (Celery's root handler repeats them with a prefix)
        line
        for line in old_log.splitlines()
        if line.startswith("actor ") and "left unchanged for a worker of that version" in line
    ]
    assert left, (old_log[-3000:], [e for e in cluster.effects() if e[2] == "old"])
    per_run = Counter(a for line in left for a in ids if a in line)
    assert max(per_run.values()) == 1, per_run
    assert "HistoryDivergedError" not in Path(new.log_path).read_text()
