"""What only the Django stores have: the database clock, query counts and plans, the PostgreSQL pipeline, the
SQLite file locks, and the factory that picks the dialect (the shared behaviour is in the conformance suite)."""

from __future__ import annotations

import threading
from datetime import UTC, datetime, timedelta
from unittest import mock

import pytest
from django.db import connection, connections, transaction
from django.test.utils import CaptureQueriesContext

from rivet_workflows import models, storage
from rivet_workflows.engine.model import errors, ports
from rivet_workflows.storage import DjangoStore, PostgresStore
from rivet_workflows.storage.locks import ActorLocks
from tests.conftest import is_postgres, requires_postgres

from .support import HOUR, StoreHarness, entry

DJANGO_STORES = [DjangoStore, *([PostgresStore] if is_postgres() else [])]


@pytest.fixture(params=DJANGO_STORES, ids=lambda cls: cls.__name__)
def dh(request, transactional_db) -> StoreHarness:
    """A harness on each Django store class the test database supports."""
    return StoreHarness(request.param.__name__, request.param(poll_interval=0.005))


@pytest.mark.django_db
def test_store_for_picks_the_dialect_of_the_database():
    store = storage.store_for(poll_interval=0.5)
    assert type(store) is (PostgresStore if connection.vendor == "postgresql" else DjangoStore)
    assert (store.using, store.poll_interval) == ("default", 0.5)


def test_deadlines_use_the_database_clock_not_the_python_clock(dh):
    actor_id = dh.new_actor()
    dh.sleep_on(actor_id, dh.store.claim(actor_id, "w", 30), until=dh.store.now() + HOUR)
    future = datetime.now(UTC) + timedelta(days=1)
    with mock.patch("django.utils.timezone.now", return_value=future):
        assert abs(dh.store.now() - datetime.now(UTC)) < timedelta(seconds=5)
        assert dh.store.claim_due("sweeper", 10, 30) == []


def test_the_cost_of_a_step_commit_does_not_grow_with_the_history(dh):
    actor_id = dh.new_actor()
    token = dh.store.claim(actor_id, "w", 30)

    def queries_for_one_step(n):
        with CaptureQueriesContext(connection) as ctx:
            dh.store.commit(actor_id, token, ports.Commit(state={"n": n}, upserts=[entry(f"step-{n}")]))
        return len(ctx.captured_queries)

    small = queries_for_one_step(0)
    dh.store.commit(actor_id, token, ports.Commit(upserts=[entry(f"old-{i}") for i in range(200)]))
    assert queries_for_one_step(1) == small


@requires_postgres
@pytest.mark.django_db(transaction=True)
def test_a_postgres_step_commit_is_one_statement():
    store = PostgresStore()
    actor_id = StoreHarness("postgres", store).new_actor()
    token = store.claim(actor_id, "w", 30)
    step = ports.Commit(state={"n": 1}, upserts=[entry("a"), entry("b")], step_lock_until=store.now() + HOUR)
    with CaptureQueriesContext(connection) as ctx:
        assert store.commit(actor_id, token, step).ok
    assert len(ctx.captured_queries) == 1


@pytest.mark.django_db
def test_the_sweep_query_uses_the_due_index():
    if connection.vendor != "sqlite":
        pytest.skip("the PostgreSQL planner prefers a scan on tiny tables (tests/system checks it at scale)")
    store = storage.store_for()
    plan = store.due_queryset(store.now())[:100].explain()
    assert "rivet_actor_due_idx" in plan  # (rivet_actor_prio_due_idx holds only actors with a priority)


@requires_postgres
@pytest.mark.django_db(transaction=True)
def test_claim_and_load_that_waited_for_the_row_lock_reads_what_the_holder_committed():
    """The claim and the history read go in one round trip, but the read still sees the history a previous
    holder (lease expired, still writing) committed while the claim waited for its row lock."""
    store = PostgresStore()
    actor_id = StoreHarness("postgres", store).new_actor(due=True)
    old = store.claim(actor_id, "slow-worker", 30)
    models.Actor.objects.filter(pk=actor_id).update(lease_expires_at=store.now() - timedelta(seconds=1))
    locked, go = threading.Event(), threading.Event()

    def slow_holder():
        try:
            with transaction.atomic():
                list(models.Actor.objects.select_for_update().filter(pk=actor_id))
                store.commit(actor_id, old, ports.Commit(upserts=[entry("paid", output="charge-1")]))
                locked.set()
                go.wait(30)
        finally:
            connections.close_all()

    holder = threading.Thread(target=slow_holder)
    holder.start()
    try:
        assert locked.wait(30)
        timer = threading.Timer(0.3, go.set)  # the claim below blocks on the row lock until then
        timer.start()
        got = store.claim_and_load(actor_id, "new-worker", 30)
    finally:
        go.set()
        holder.join(30)
    assert got is not None
    token, actor, history, _now = got
    assert token == old + 1 and actor.lease_owner == "new-worker"
    assert [(e.key, e.data) for e in history] == [("paid", {"output": "charge-1"})]


# --- SQLite per-actor file locks ----------------------------------------------------------------------------


def test_an_actor_file_lock_is_exclusive_and_gives_up_after_its_timeout(tmp_path):
    locks = ActorLocks(tmp_path / "locks")
    held, done = threading.Event(), threading.Event()

    def hold():
        with locks.hold("a1", 5):
            held.set()
            done.wait(5)

    holder = threading.Thread(target=hold)
    holder.start()
    try:
        assert held.wait(5)
        with pytest.raises(errors.WorkflowInFlightError):
            with locks.hold("a1", 0.05):
                pass
        with locks.hold("b2", 0.05):  # another actor's lock is free
            pass
    finally:
        done.set()
        holder.join(5)
    with locks.hold("a1", 0.05):  # released with the holder
        pass
    locks.discard("a1")
    assert not (tmp_path / "locks" / "a1.lock").exists()
    with pytest.raises(ValueError):
        with locks.hold("../etc", 0.05):
            pass
