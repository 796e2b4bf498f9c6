"""Production controls through real Celery worker processes (DESIGN.md section 12): two workers never run
more than N actors of a limited type at once, a rate limit holds across processes, a pause during a running
step, and a workflow timeout while sleeping and while waiting on a queue. The measured numbers are printed
(``pytest -s``)."""

from __future__ import annotations

import time

import pytest

from rivet_workflows import models

from .conftest import uses_redis

pytestmark = pytest.mark.django_db(transaction=True)


def _finished(ids: list[str]) -> bool:
    states = set(models.Actor.objects.filter(pk__in=ids).values_list("workflow_state", flat=True).distinct())
    return states <= {"completed", "failed", "cancelled"} and len(states) > 0


def _intervals(cluster, label: str, ids: set[str]) -> list[tuple[float, float, str]]:
    starts, ends = {}, {}
    for actor_id, what, detail in cluster.effects():
        if actor_id in ids and what == f"{label}-start":
            starts.setdefault(actor_id, []).append(float(detail))
        elif actor_id in ids and what == f"{label}-end":
            ends.setdefault(actor_id, []).append(float(detail))
    out = []
    for actor_id, begun in starts.items():
        for i, start in enumerate(begun):
            out.append((start, ends[actor_id][i], actor_id))
    return out


def _max_overlap(intervals: list[tuple[float, float, str]]) -> int:
    events = sorted([(s, 1) for s, _, _ in intervals] + [(e, -1) for _, e, _ in intervals])
    running = peak = 0
    for _, delta in events:
        running += delta
        peak = max(peak, running)
    return peak


def test_two_workers_never_run_more_than_the_concurrency_limit(cluster, rt) -> None:
    cluster.start_worker(4, RIVET_LEASE_SECONDS="15")
    cluster.start_worker(4, RIVET_LEASE_SECONDS="15")
    ids = [rt.client().limited.create(f"l{i}").actor_id for i in range(16)]
    tenants = [
        rt.client().per_tenant.create(f"t{i}", input={"tenant": f"acme-{i % 2}"}).actor_id for i in range(8)
    ]
    cluster.wait_for(lambda: _finished(ids + tenants), 180, what="limited actors")
    limited = _intervals(cluster, "flow", set(ids))
    assert len(limited) == 16  # each ran its step once
    peak = _max_overlap(limited)
    per_tenant = {}
    for tenant in ("acme-0", "acme-1"):
        mine = {a for i, a in enumerate(tenants) if f"acme-{i % 2}" == tenant}
        per_tenant[tenant] = _max_overlap(_intervals(cluster, "flow", mine))
    span = max(e for _, e, _ in limited) - min(s for s, _, _ in limited)
    print(
        f"\nconcurrency=2 over 16 actors on 2 workers x 4 threads: max overlap {peak}, "
        f"{span:.2f} s for 16 x 0.3 s steps; Concurrency(1, key=tenant): max overlap per tenant {per_tenant}"
    )
    assert peak == 2  # never more than the limit, and the limit is used
    assert all(v == 1 for v in per_tenant.values())


def test_a_rate_limit_holds_across_processes(cluster, rt) -> None:
    cluster.start_worker(4)
    cluster.start_worker(4)
    ids = [rt.client().rated.create(f"r{i}").actor_id for i in range(9)]
    cluster.wait_for(lambda: _finished(ids), 120, what="rated actors")
    starts = sorted(s for s, _, _ in _intervals(cluster, "rate", set(ids)))
    assert len(starts) == 9
    # In any window of 2 s at most 3 starts. The limit counts claims (database clock); the effect is written
    # when the step body starts, up to a few hundred ms later on a loaded machine: allow that much.
    jitter = 0.3
    worst = max(sum(1 for t in starts if s <= t < s + 2.0 - jitter) for s in starts)
    windows = [round(starts[i + 3] - starts[i], 2) for i in range(len(starts) - 3)]
    print(
        f"\nRateLimit(3, 2 s) over 9 actors on 2 workers: at most {worst} starts in a 2 s window; "
        f"gaps start[i+3]-start[i] {windows} s; all 9 in {starts[-1] - starts[0]:.2f} s"
    )
    assert worst <= 3
    assert starts[-1] - starts[0] >= 4.0 - jitter  # 9 starts need at least three windows


def test_pause_during_a_running_step(cluster, rt) -> None:
    cluster.start_worker(2)
    handle = rt.client().pausable.create("p1")
    cluster.wait_for(lambda: cluster.count("gated-start", handle.actor_id), 60, what="step running")
    assert handle.pause("maintenance") is True
    (cluster.fault_dir / f"release-{handle.actor_id}").touch()  # the running step finishes
    cluster.wait_for(lambda: cluster.count("gated-end", handle.actor_id), 30, what="step finished")

    def idle():
        row = models.Actor.objects.get(pk=handle.actor_id)
        return row.lease_owner is None and handle.workflow_state() == "paused"

    cluster.wait_for(idle, 30, what="run ended paused")
    time.sleep(2.0)  # several sweeps (0.2 s) pass: a paused actor is never claimed
    assert cluster.count("second", handle.actor_id) == 0
    assert handle.workflow_state() == "paused"
    assert handle.resume() is True
    cluster.wait_for(lambda: handle.workflow_state() == "completed", 30, what="resumed run")
    assert (
        cluster.count("gated-start", handle.actor_id) == 1 and cluster.count("second", handle.actor_id) == 1
    )
    print("\npause during a running step: the step finished, no step ran for 2 s, resume completed the run")


@pytest.mark.parametrize("wait", ["sleep", "queue"])
def test_a_workflow_timeout_fires_while_it_sleeps_or_waits(cluster, rt, wait) -> None:
    cluster.start_worker(2)
    handle = rt.client().overdue.create(f"o-{wait}", input={"wait": wait})
    begun = time.time()
    cluster.wait_for(lambda: handle.workflow_state() == "failed", 30, what="timeout")
    took = time.time() - begun
    record = handle.record()
    assert record.error["name"] == "WorkflowTimeoutError"
    assert cluster.count("on_error-workflow", handle.actor_id) == 1
    print(
        f"\nworkflow timeout 2 s while {wait}ing: failed after {took:.2f} s ({'Redis' if uses_redis() else 'fs'})"
    )
    assert 1.9 <= took < 10
