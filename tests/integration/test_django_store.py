"""The Django store honours the storage port (engine/ports.py): leases, fencing, atomic commits, wake rules."""

from __future__ import annotations

import threading
from datetime import UTC, datetime, timedelta
from unittest import mock

import pytest
from django.db import connection, connections, transaction
from django.test.utils import CaptureQueriesContext

from rivet_workflows import models
from rivet_workflows.engine import errors, ports
from tests.conftest import requires_postgres, run_in_threads

pytestmark = pytest.mark.django_db(transaction=True)

HOUR = timedelta(hours=1)


def make_actor(store, key="k", name="order", state=None):
    """Create an actor and mark it due the way the client does (claim + release with wake_at=now)."""
    record, created = store.get_or_create_actor(name, [key], {"in": 1}, lambda: dict(state or {"count": 0}))
    assert created
    token = store.claim(record.actor_id, "client", 30)
    assert store.commit(record.actor_id, token, ports.Commit(wake_at=store.now(), release=True)).ok
    return record.actor_id


def sleep_on(store, actor_id, token, *, queues=(), until=None):
    """Commit the end of a run that sleeps until ``until`` (default: in an hour) waiting on ``queues``."""
    until = until or store.now() + HOUR
    return store.commit(
        actor_id,
        token,
        ports.Commit(workflow_state=ports.SLEEPING, wake_at=until, waiting_for=list(queues), release=True),
    )


def entry(key, *, status=ports.ENTRY_COMPLETED, output=None):
    return ports.EntryRecord(
        key=key, location=key.split("/"), kind="step", data={"output": output}, status=status
    )


# --- actors -----------------------------------------------------------------------------------------


def test_new_actor_is_pending_and_not_due_until_marked(django_store):
    record, created = django_store.get_or_create_actor("order", ["k"], None, dict)
    assert created and record.workflow_state == ports.PENDING and record.wake_at is None
    assert django_store.claim_due("sweeper", 10, 30) == []


def test_get_or_create_returns_the_same_actor(django_store):
    actor_id = make_actor(django_store, state={"count": 3})
    again, created = django_store.get_or_create_actor(
        "order", ["k"], None, lambda: pytest.fail("state rebuilt")
    )
    assert not created and again.actor_id == actor_id
    assert again.state == {"count": 3} and again.input == {"in": 1}
    assert again.wake_at is not None and again.wake_at <= django_store.now()
    assert django_store.find_actor("order", ["k"]).actor_id == actor_id
    assert django_store.find_actor("order", ["other"]) is None


def test_concurrent_get_or_create_makes_one_actor(django_store):
    results = run_in_threads(lambda i: django_store.get_or_create_actor("order", ["same"], None, dict), 8)
    assert len({record.actor_id for record, _ in results}) == 1
    assert sum(created for _, created in results) == 1


def test_create_actor_due_is_claimable_at_once(django_store):
    before = django_store.now()
    record, created = django_store.create_actor("order", ["k"], {"in": 1}, {"count": 2}, due=True)
    assert created and record.workflow_state == ports.PENDING and record.lease_owner is None
    assert before <= record.wake_at <= django_store.now()
    assert (record.state, record.input, record.key) == ({"count": 2}, {"in": 1}, ["k"])
    assert django_store.get_actor(record.actor_id) == record
    assert [a for a, _ in django_store.claim_due("sweeper", 10, 30)] == [record.actor_id]


def test_create_actor_not_due_and_of_a_taken_key(django_store):
    record, created = django_store.create_actor("order", ["k"], None, {"count": 0})
    assert created and record.wake_at is None
    assert django_store.claim_due("sweeper", 10, 30) == []
    again, created = django_store.create_actor("order", ["k"], {"in": 9}, {"count": 9}, due=True)
    assert not created and again.actor_id == record.actor_id
    assert django_store.get_actor(record.actor_id) == record  # nothing written: not due, old state
    with pytest.raises(errors.SerializationError):
        django_store.create_actor("order", ["bad"], None, {"x": object()}, due=True)
    assert django_store.find_actor("order", ["bad"]) is None


def test_concurrent_create_actor_of_one_key_makes_one_due_actor(django_store):
    results = run_in_threads(
        lambda i: django_store.create_actor("order", ["same"], {"caller": i}, {"count": i}, due=True), 8
    )
    assert len({record.actor_id for record, _ in results}) == 1
    assert sum(created for _, created in results) == 1
    winner = next(i for i, (_, created) in enumerate(results) if created)
    stored = django_store.get_actor(results[0][0].actor_id)
    assert stored.input == {"caller": winner} and stored.state == {"count": winner}
    assert models.Actor.objects.filter(name="order").count() == 1
    assert len(django_store.claim_due("sweeper", 10, 30)) == 1


def test_get_or_create_actor_due(django_store):
    record, created = django_store.get_or_create_actor("order", ["k"], None, dict, due=True)
    assert created and record.wake_at is not None and record.wake_at <= django_store.now()
    again, created = django_store.get_or_create_actor("order", ["k"], None, lambda: pytest.fail("rebuilt"))
    assert not created and again == record


def test_run_action_make_due_saves_the_state_and_the_wake_up_together(django_store):
    record, _ = django_store.create_actor("order", ["k"], None, {"count": 0})

    def broken(state):
        state["count"] = 5
        raise ValueError("no")

    with pytest.raises(ValueError):
        django_store.run_action(record.actor_id, broken, timeout=1, make_due=True)
    assert django_store.get_actor(record.actor_id).wake_at is None  # nothing saved
    result, state = django_store.run_action(
        record.actor_id, lambda s: s.update(count=1), timeout=1, make_due=True
    )
    after = django_store.get_actor(record.actor_id)
    assert state == after.state == {"count": 1}
    assert after.wake_at is not None and after.wake_at <= django_store.now()
    assert [a for a, _ in django_store.claim_due("sweeper", 10, 30)] == [record.actor_id]


def test_run_action_make_due_keeps_an_earlier_wake_up_and_a_finished_workflow(django_store):
    early = make_actor(django_store, key="early")
    wake_at = django_store.get_actor(early).wake_at
    django_store.run_action(early, lambda s: None, timeout=1, make_due=True)
    assert django_store.get_actor(early).wake_at == wake_at
    done = make_actor(django_store, key="done")
    token = django_store.claim(done, "w", 30)
    django_store.commit(done, token, ports.Commit(workflow_state=ports.COMPLETED, release=True))
    django_store.run_action(done, lambda s: None, timeout=1, make_due=True)
    assert django_store.get_actor(done).wake_at is None


def test_destroyed_actor_is_gone_fences_its_executor_and_frees_its_key(django_store):
    first = make_actor(django_store)
    token = django_store.claim(first, "w", 30)
    django_store.send(first, "approval", {})
    django_store.destroy_actor(first)
    assert django_store.commit(first, token, ports.Commit(state={"count": 1})).ok is False
    assert django_store.claim(first, "w", 30) is None
    for call in (django_store.get_actor, django_store.load_history):
        with pytest.raises(errors.ActorNotFoundError):
            call(first)
    with pytest.raises(errors.ActorNotFoundError):
        django_store.send(first, "approval", {})
    assert django_store.find_actor("order", ["k"]) is None
    assert make_actor(django_store) != first


def test_values_round_trip_through_the_serializer(django_store):
    value = {"when": datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC), "ids": (1, 2), "tags": {"a"}}
    actor_id = make_actor(django_store, state=value)
    assert django_store.get_actor(actor_id).state == value


# --- leases -----------------------------------------------------------------------------------------


def test_claim_of_a_released_lease_token_is_fenced(django_store):
    actor_id = make_actor(django_store)
    token = django_store.claim(actor_id, "w", 30)
    django_store.commit(actor_id, token, ports.Commit(release=True))
    assert django_store.commit(actor_id, token, ports.Commit(state={"count": 7})).ok is False
    assert django_store.get_actor(actor_id).state == {"count": 0}


def test_claim_race_has_exactly_one_winner(django_store):
    actor_id = make_actor(django_store)
    tokens = run_in_threads(lambda i: django_store.claim(actor_id, f"worker-{i}", 30), 8)
    winners = [t for t in tokens if t is not None]
    assert len(winners) == 1
    assert django_store.get_actor(actor_id).lease_token == winners[0]


def test_claim_keeps_wake_at(django_store):
    actor_id = make_actor(django_store)
    before = django_store.get_actor(actor_id).wake_at
    assert django_store.claim(actor_id, "w", 30) is not None
    assert django_store.get_actor(actor_id).wake_at == before


def test_expired_lease_is_reclaimed_and_the_old_token_is_fenced_off(django_store):
    actor_id = make_actor(django_store)
    old = django_store.claim(actor_id, "dead-worker", 30)
    assert django_store.claim(actor_id, "other", 30) is None  # live lease
    models.Actor.objects.filter(pk=actor_id).update(
        lease_expires_at=django_store.now() - timedelta(seconds=1)
    )

    claimed = django_store.claim_due("sweeper", 10, 30)
    assert [a for a, _ in claimed] == [actor_id]
    new = claimed[0][1]
    assert new != old

    stale = django_store.commit(actor_id, old, ports.Commit(state={"count": 99}, upserts=[entry("charge")]))
    assert stale.ok is False
    assert django_store.get_actor(actor_id).state == {"count": 0}
    assert django_store.load_history(actor_id) == []
    assert django_store.renew(actor_id, old, 30) is False
    assert django_store.renew(actor_id, new, 30) is True
    assert django_store.commit(actor_id, new, ports.Commit(state={"count": 1})).ok


@requires_postgres
def test_claim_and_load_that_waited_for_the_row_lock_reads_what_the_holder_committed(django_store):
    """The claim and the history read go in one round trip, but the read still sees the history a
    previous holder (lease expired, still writing) committed while the claim waited for its row lock."""
    actor_id = make_actor(django_store)
    old = django_store.claim(actor_id, "slow-worker", 30)
    models.Actor.objects.filter(pk=actor_id).update(
        lease_expires_at=django_store.now() - timedelta(seconds=1)
    )
    locked, go = threading.Event(), threading.Event()

    def slow_holder():
        try:
            with transaction.atomic():
                list(models.Actor.objects.select_for_update().filter(pk=actor_id))
                django_store.commit(actor_id, old, ports.Commit(upserts=[entry("paid", output="charge-1")]))
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
        got = django_store.claim_and_load(actor_id, "new-worker", 30)
    finally:
        go.set()
        holder.join(30)
    assert got is not None
    token, actor, history, _now = got
    assert token == old + 1 and actor.lease_owner == "new-worker"
    assert [(e.key, e.data) for e in history] == [("paid", {"output": "charge-1"})]


def test_claim_and_load_and_load_for_run_read_the_actor_and_its_history(django_store):
    actor_id = make_actor(django_store)
    token = django_store.claim(actor_id, "w", 30)
    django_store.commit(actor_id, token, ports.Commit(state={"count": 4}, upserts=[entry("a"), entry("b")]))
    actor, history, now = django_store.load_for_run(actor_id)
    assert actor.state == {"count": 4} and [e.key for e in history] == ["a", "b"]
    assert now <= django_store.now()
    assert django_store.claim_and_load(actor_id, "other", 30) is None  # lease held
    django_store.commit(actor_id, token, ports.Commit(release=True))
    token2, actor2, history2, now2 = django_store.claim_and_load(actor_id, "other", 30)
    assert token2 == token + 1 and actor2.lease_owner == "other" and actor2.state == {"count": 4}
    assert history2 == history and now2 >= now
    django_store.destroy_actor(actor_id)
    assert django_store.claim_and_load(actor_id, "other", 30) is None
    with pytest.raises(errors.ActorNotFoundError):
        django_store.load_for_run(actor_id)


def test_claim_due_orders_by_wake_at_and_respects_limit_and_leases(django_store):
    now = django_store.now()
    ids = [make_actor(django_store, key=str(i)) for i in range(6)]
    # wake times: ids[5] earliest ... ids[1] latest past; ids[0] in the future
    for offset, actor_id in enumerate(ids):
        models.Actor.objects.filter(pk=actor_id).update(wake_at=now - timedelta(seconds=100 - offset * 10))
    models.Actor.objects.filter(pk=ids[0]).update(wake_at=now + HOUR)
    assert django_store.claim(ids[1], "busy", 30) is not None  # leased: not due for others

    first = django_store.claim_due("sweeper", 2, 30)
    assert [a for a, _ in first] == [ids[2], ids[3]]
    rest = django_store.claim_due("sweeper", 10, 30)
    assert [a for a, _ in rest] == [ids[4], ids[5]]
    assert django_store.claim_due("sweeper", 10, 30) == []


def test_concurrent_sweeps_claim_each_due_actor_once(django_store):
    ids = {make_actor(django_store, key=str(i)) for i in range(12)}
    batches = run_in_threads(lambda i: django_store.claim_due(f"sweeper-{i}", 5, 30), 4)
    claimed = [actor_id for batch in batches for actor_id, _ in batch]
    assert sorted(claimed) == sorted(ids)


def test_next_deadline_is_the_earliest_wake_at_of_unfinished_actors(django_store):
    a = make_actor(django_store, key="a")
    b = make_actor(django_store, key="b")
    now = django_store.now()
    for actor_id, when in ((a, now + HOUR), (b, now + 2 * HOUR)):
        sleep_on(django_store, actor_id, django_store.claim(actor_id, "w", 30), until=when)
    assert django_store.next_deadline() == now + HOUR
    token = django_store.claim(a, "w", 30)
    django_store.commit(a, token, ports.Commit(workflow_state=ports.COMPLETED, output=1, release=True))
    assert django_store.get_actor(a).wake_at is None
    assert django_store.next_deadline() == now + 2 * HOUR


def test_deadlines_use_the_database_clock_not_the_python_clock(django_store):
    actor_id = make_actor(django_store)
    sleep_on(django_store, actor_id, django_store.claim(actor_id, "w", 30), until=django_store.now() + HOUR)
    future = datetime.now(UTC) + timedelta(days=1)
    with mock.patch("django.utils.timezone.now", return_value=future):
        assert abs(django_store.now() - datetime.now(UTC)) < timedelta(seconds=5)
        assert django_store.claim_due("sweeper", 10, 30) == []


# --- commits ----------------------------------------------------------------------------------------


def test_commit_writes_history_state_and_status_together(django_store):
    actor_id = make_actor(django_store)
    token = django_store.claim(actor_id, "w", 30)
    result = django_store.commit(
        actor_id,
        token,
        ports.Commit(state={"count": 1}, workflow_state=ports.RUNNING, upserts=[entry("a", output=[1, 2])]),
    )
    assert result.ok
    actor = django_store.get_actor(actor_id)
    assert actor.state == {"count": 1} and actor.workflow_state == ports.RUNNING
    [a] = django_store.load_history(actor_id)
    assert a.key == "a" and a.data == {"output": [1, 2]} and a.status == ports.ENTRY_COMPLETED


def test_an_error_mid_commit_leaves_nothing_written(django_store):
    actor_id = make_actor(django_store)
    token = django_store.claim(actor_id, "w", 30)
    bad_outbox = ports.Commit(
        state={"count": 5}, upserts=[entry("a")], outbox=[("no-such-actor", "jobs", {}, False)]
    )
    with pytest.raises(errors.ActorNotFoundError):
        django_store.commit(actor_id, token, bad_outbox)
    with pytest.raises(errors.SerializationError):
        django_store.commit(actor_id, token, ports.Commit(upserts=[entry("b")], state={"x": object()}))
    assert django_store.load_history(actor_id) == []
    assert django_store.get_actor(actor_id).state == {"count": 0}
    assert models.QueueMessage.objects.count() == 0


def test_upsert_keeps_creation_order_and_delete_removes_only_named_keys(django_store):
    actor_id = make_actor(django_store)
    token = django_store.claim(actor_id, "w", 30)
    django_store.commit(
        actor_id, token, ports.Commit(upserts=[entry("a", status=ports.ENTRY_RUNNING), entry("b")])
    )
    django_store.commit(actor_id, token, ports.Commit(upserts=[entry("c"), entry("a", output="done")]))
    history = django_store.load_history(actor_id)
    assert [e.key for e in history] == ["a", "b", "c"]
    assert history[0].data == {"output": "done"} and history[0].seq < history[1].seq < history[2].seq
    django_store.commit(actor_id, token, ports.Commit(deletes=["b"]))
    assert [e.key for e in django_store.load_history(actor_id)] == ["a", "c"]


def test_commit_cost_does_not_grow_with_history(django_store):
    actor_id = make_actor(django_store)
    token = django_store.claim(actor_id, "w", 30)

    def queries_for_one_step(n):
        with CaptureQueriesContext(connection) as ctx:
            django_store.commit(actor_id, token, ports.Commit(state={"n": n}, upserts=[entry(f"step-{n}")]))
        return len(ctx.captured_queries)

    small = queries_for_one_step(0)
    django_store.commit(actor_id, token, ports.Commit(upserts=[entry(f"old-{i}") for i in range(200)]))
    assert queries_for_one_step(1) == small


def test_outbox_messages_are_delivered_with_the_commit_and_wake_the_target(django_store):
    sender = make_actor(django_store, key="sender")
    target = make_actor(django_store, key="target")
    sleep_on(django_store, target, django_store.claim(target, "w", 30), queues=["jobs"])
    token = django_store.claim(sender, "w", 30)
    result = django_store.commit(sender, token, ports.Commit(outbox=[(target, "jobs", {"n": 1}, False)]))
    assert result.woken == [target]
    [message] = django_store.pending_messages(target, ["jobs"], 10)
    assert message.body == {"n": 1}
    assert [a for a, _ in django_store.claim_due("sweeper", 10, 30)] == [target]


# --- queues and wake-ups -----------------------------------------------------------------------------


def test_send_wakes_a_sleeping_actor_waiting_on_that_queue(django_store):
    actor_id = make_actor(django_store)
    sleep_on(django_store, actor_id, django_store.claim(actor_id, "w", 30), queues=["approval"])
    assert django_store.claim_due("sweeper", 10, 30) == []

    django_store.send(actor_id, "unrelated", {"x": 1})
    assert django_store.claim_due("sweeper", 10, 30) == []

    django_store.send(actor_id, "approval", {"ok": True})
    assert [a for a, _ in django_store.claim_due("sweeper", 10, 30)] == [actor_id]


def test_wildcard_wait_is_woken_by_any_queue(django_store):
    actor_id = make_actor(django_store)
    sleep_on(django_store, actor_id, django_store.claim(actor_id, "w", 30), queues=["*"])
    django_store.send(actor_id, "anything", 1)
    assert [a for a, _ in django_store.claim_due("sweeper", 10, 30)] == [actor_id]


def test_a_send_during_a_run_is_not_missed_after_release(django_store):
    actor_id = make_actor(django_store)
    token = django_store.claim(actor_id, "w", 30)
    django_store.send(actor_id, "approval", {"ok": True})  # arrives while the executor runs
    result = sleep_on(django_store, actor_id, token, queues=["approval"])
    assert result.ok and actor_id in result.woken
    assert result.wake_at <= django_store.now()
    assert [a for a, _ in django_store.claim_due("sweeper", 10, 30)] == [actor_id]


def test_release_without_a_matching_message_sleeps_until_the_deadline(django_store):
    actor_id = make_actor(django_store)
    token = django_store.claim(actor_id, "w", 30)
    django_store.send(actor_id, "other", {})
    until = django_store.now() + HOUR
    result = sleep_on(django_store, actor_id, token, queues=["approval"], until=until)
    assert result.woken == [] and result.wake_at == until
    assert django_store.claim_due("sweeper", 10, 30) == []


def test_messages_are_fifo_received_and_completed_once(django_store):
    actor_id = make_actor(django_store)
    first = django_store.send(actor_id, "jobs", 1, completable=True)
    django_store.send(actor_id, "jobs", 2)
    django_store.send(actor_id, "other", 3)
    assert [m.body for m in django_store.pending_messages(actor_id, ["jobs"], 10)] == [1, 2]
    assert [m.body for m in django_store.pending_messages(actor_id, None, 2)] == [1, 2]

    token = django_store.claim(actor_id, "w", 30)
    django_store.commit(actor_id, token, ports.Commit(receive_messages=[first.id]))
    assert [m.body for m in django_store.pending_messages(actor_id, ["*"], 10)] == [2, 3]
    assert django_store.get_message(first.id).status == ports.MESSAGE_RECEIVED

    django_store.complete_message(first.id, {"answer": 42})
    done = django_store.get_message(first.id)
    assert done.status == ports.MESSAGE_COMPLETED and done.response == {"answer": 42}
    with pytest.raises(errors.MessageAlreadyCompletedError):
        django_store.complete_message(first.id, "again")
    with pytest.raises(errors.MessageAlreadyCompletedError):
        django_store.commit(
            actor_id, token, ports.Commit(state={"count": 1}, complete_messages=[(first.id, 1)])
        )
    assert django_store.get_actor(actor_id).state == {"count": 0}
    with pytest.raises(LookupError):
        django_store.get_message("999999")


# --- actions and the step lock -------------------------------------------------------------------------


def test_action_waits_for_a_live_step_lock_and_then_sees_the_step_state(django_store):
    actor_id = make_actor(django_store)
    token = django_store.claim(actor_id, "w", 30)
    taken = django_store.commit(
        actor_id, token, ports.Commit(step_lock_until=django_store.now() + timedelta(seconds=30))
    )
    assert taken.state == {"count": 0}

    def increment(state):
        state["count"] += 1
        return state["count"]

    with pytest.raises(errors.WorkflowInFlightError):
        django_store.run_action(actor_id, increment, timeout=0.1)

    django_store.commit(actor_id, token, ports.Commit(state={"count": 10}, step_lock_until=None))
    assert django_store.run_action(actor_id, increment, timeout=1) == (11, {"count": 11})
    assert django_store.get_actor(actor_id).state == {"count": 11}


def test_step_lock_of_an_expired_lease_does_not_block_actions(django_store):
    actor_id = make_actor(django_store)
    token = django_store.claim(actor_id, "w", 30)
    django_store.commit(actor_id, token, ports.Commit(step_lock_until=django_store.now() + HOUR))
    models.Actor.objects.filter(pk=actor_id).update(
        lease_expires_at=django_store.now() - timedelta(seconds=1)
    )
    assert django_store.run_action(actor_id, lambda s: "ran", timeout=0.1)[0] == "ran"


def test_concurrent_actions_lose_no_update(django_store):
    actor_id = make_actor(django_store)

    def bump(_i):
        for _ in range(20):
            django_store.run_action(actor_id, lambda s: s.__setitem__("count", s["count"] + 1), timeout=30)

    run_in_threads(bump, 4)
    assert django_store.get_actor(actor_id).state == {"count": 80}


def test_a_slow_action_on_one_actor_does_not_block_writes_to_another(django_store):
    slow = make_actor(django_store, key="slow")
    other = make_actor(django_store, key="other")
    entered, release = threading.Event(), threading.Event()

    def wait_inside_action(state):
        entered.set()
        assert release.wait(30)
        state["count"] += 1

    def act():
        try:
            django_store.run_action(slow, wait_inside_action, timeout=30)
        finally:
            connections.close_all()

    worker = threading.Thread(target=act)
    worker.start()
    try:
        assert entered.wait(30)
        token = django_store.claim(other, "w", 30)
        assert django_store.commit(other, token, ports.Commit(state={"count": 5}, upserts=[entry("a")])).ok
        django_store.send(other, "jobs", 1)
        assert not release.is_set()  # all of that happened while the action was still running
    finally:
        release.set()
        worker.join(30)
    assert django_store.get_actor(slow).state == {"count": 1}
    assert django_store.get_actor(other).state == {"count": 5}


def test_the_sweep_query_uses_the_due_index(django_store):
    if connection.vendor != "sqlite":
        pytest.skip("the PostgreSQL planner prefers a scan on tiny tables")
    plan = django_store.due_queryset(django_store.now())[:100].explain()
    assert "rivet_actor_due_idx" in plan


def test_actors_messaging_each_other_concurrently_do_not_deadlock(django_store):
    a, b = make_actor(django_store, key="a"), make_actor(django_store, key="b")
    tokens = {a: django_store.claim(a, "w", 60), b: django_store.claim(b, "w", 60)}
    pairs = [(a, b), (b, a)]

    def ping(i):
        me, other = pairs[i]
        return [
            django_store.commit(
                me, tokens[me], ports.Commit(state={"n": n}, outbox=[(other, "ping", n, False)])
            ).ok
            for n in range(30)
        ]

    results = run_in_threads(ping, 2)
    assert all(ok for batch in results for ok in batch)
    assert models.QueueMessage.objects.filter(actor_id=a).count() == 30
    assert models.QueueMessage.objects.filter(actor_id=b).count() == 30
