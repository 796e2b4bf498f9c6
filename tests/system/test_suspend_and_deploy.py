"""A code error suspends the run on a real Celery worker, and a deploy with the fix (a worker of a new
CODE_VERSION) retries it by itself (DESIGN.md section 16): no compensation runs, no completed step runs
again, the run completes once."""

from __future__ import annotations

import pytest

from rivet_workflows.engine.model import ports

pytestmark = pytest.mark.system

OLD = {"RIVET_CODE_VERSION": "v1", "RIVET_DEPLOY_CODE": "old"}
NEW = {"RIVET_CODE_VERSION": "v2", "RIVET_DEPLOY_CODE": "new"}


def _state(rt, actor_id):
    return rt.store.get_actor(actor_id).workflow_state


def test_a_typo_suspends_on_a_worker_and_a_worker_with_the_fix_completes_the_run(cluster, rt) -> None:
    old = cluster.start_worker(**OLD)
    ids = [rt.client().typo.create(f"order-{i}").actor_id for i in range(3)]
    cluster.wait_for(
        lambda: all(_state(rt, a) == ports.SUSPENDED for a in ids), 60, what="the runs suspended by the typo"
    )
    for actor_id in ids:
        record = rt.store.get_actor(actor_id)
        assert record.error["name"] == "AttributeError" and record.code_version == "v1"
        assert record.error["location"].endswith(" in run_typo")
        assert record.lease_owner is None and record.wake_at is None
    old.stop()  # the deploy: the old worker goes, a worker of the fixed code comes
    cluster.start_worker(**NEW)
    cluster.wait_for(
        lambda: all(_state(rt, a) == ports.COMPLETED for a in ids),
        60,
        what="the runs retried by the new code",
    )
    counts = cluster.counts()
    for actor_id in ids:
        assert counts[(actor_id, "reserve")] == 1 and counts[(actor_id, "charge")] == 1, counts
        assert counts[(actor_id, "ship")] == 1
        assert not any(w.startswith("undo-") for a, w in counts if a == actor_id)
        actions = rt.store.operator_actions(actor_id)
        assert [(a.action, a.who) for a in actions] == [("retry", "deploy")]
        assert rt.store.get_actor(actor_id).output == "shipped"
    ships = [detail for a, w, detail in cluster.effects() if w == "ship"]
    assert set(ships) == {"new"}  # only the fixed code shipped
