"""Atomic steps across real worker crashes (DESIGN.md section 13): a Celery worker process SIGKILLed right
after an atomic body wrote its ``shop.Order`` row and before the commit (the ``before-commit`` kill point of
tests/system/workflows fires inside the transaction) leaves no row; the next worker runs the body again and
exactly one row exists at the end. Repeated ``RUNS`` times; a kill right after the commit never runs the
body again. Lease 2 s, sweep 0.2 s; SQLite by default, PostgreSQL with DATABASE_URL."""

from __future__ import annotations

import pytest

from rivet_workflows.engine.model import ports

from .conftest import history

pytestmark = pytest.mark.system

#: how many crash-and-recover rounds the test runs
RUNS = 5


def _orders(checkout: str) -> list[int]:
    from django.db import close_old_connections

    from project.shop.models import Order

    close_old_connections()
    return list(Order.objects.filter(checkout=checkout).values_list("attempt", flat=True))


def _done(rt, actor_id: str) -> bool:
    return rt.store.get_actor(actor_id).workflow_state in ports.FINISHED_STATES


def test_a_kill_between_an_atomic_body_and_its_commit_leaves_exactly_one_row(cluster, rt, capsys) -> None:
    counts = []
    for i in range(RUNS):
        checkout = f"crash-{i}"
        cluster.arm("before-commit-place-order")
        handle = rt.client().atomic_order.create(checkout)
        worker = cluster.start_worker()
        cluster.wait_for(lambda: cluster.fired("before-commit-place-order"), 60, what="the kill point")
        cluster.wait_for(lambda w=worker: not w.alive(), 10, what="the worker to die")
        aid = handle.actor_id
        # the body ran and wrote its row inside the transaction; the worker died before the commit
        assert cluster.count("done-place-order", aid) == 1
        rows_after_kill = len(_orders(checkout))
        assert rows_after_kill == 0, "a row of the killed attempt is visible"
        cluster.start_worker()
        cluster.wait_for(lambda a=aid: _done(rt, a), 90, keep_workers=1, what="recovery")
        record = rt.store.get_actor(aid)
        assert record.workflow_state == ports.COMPLETED
        rows = _orders(checkout)
        assert len(rows) == 1, rows
        bodies = cluster.count("done-place-order", aid)
        assert bodies == 2  # the killed attempt and the one that committed
        status, attempts, _ = history(aid)["place-order"]
        assert (status, attempts) == ("completed", 2)
        assert record.output is not None and cluster.count("after", aid) == 1
        counts.append((rows_after_kill, len(rows), bodies))
        for proc in cluster.live_workers():
            proc.kill()
    with capsys.disabled():
        print(
            f"\natomic crash runs: {RUNS}; rows visible after the kill / rows at the end / body runs: {counts}"
        )
    assert counts == [(0, 1, 2)] * RUNS


def test_a_kill_right_after_the_atomic_commit_does_not_run_the_body_again(cluster, rt) -> None:
    cluster.arm("after-commit-place-order")
    handle = rt.client().atomic_order.create("after-commit")
    cluster.start_worker()
    cluster.wait_for(lambda: _done(rt, handle.actor_id), 90, keep_workers=1, what="completion")
    assert cluster.fired("after-commit-place-order")
    aid = handle.actor_id
    assert cluster.count("done-place-order", aid) == 1
    assert _orders("after-commit") == [1]
    assert rt.store.get_actor(aid).workflow_state == ports.COMPLETED
