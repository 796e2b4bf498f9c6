"""The storage port, member by member, on every store (MemoryStore, DjangoStore, PostgresStore): one
conformance suite (DESIGN.md section 11; the invariants are those of the ``engine.ports`` docstring)."""

from __future__ import annotations

import threading
import time
from datetime import UTC, datetime, timedelta
from decimal import Decimal

import pytest

from rivet_workflows.engine.model import base_store, errors, ports
from rivet_workflows.storage import DjangoStore, PostgresStore
from rivet_workflows.testing import MemoryStore
from tests.conftest import run_in_threads

from .support import HOUR, entry

# --- the port itself -----------------------------------------------------------------------------------


def test_base_store_cannot_be_used_without_the_required_capabilities():
    with pytest.raises(TypeError, match="abstract"):
        base_store.BaseStore()  # type: ignore[abstract]
    assert {"commit", "claim", "run_action", "cron_due", "list_actors"} <= ports.Store.__abstractmethods__


def test_every_store_implements_the_whole_port(h):
    assert isinstance(h.store, ports.Store) and isinstance(h.store, base_store.BaseStore)
    assert h.store.inline_calls is isinstance(h.store, MemoryStore)  # only memory skips the thread hop
    fast = [
        "claim_and_load",
        "load_for_run",
        "send_and_check",
        "wait_for_messages",
        "watch_sends",
        "wait_for_wakes",
    ]
    native = {
        MemoryStore: [*fast, "release", "get_or_create_actor"],
        PostgresStore: [*fast, "pending_messages"],
    }.get(type(h.store), [])
    assert [
        name for name in native if getattr(type(h.store), name) is getattr(base_store.BaseStore, name)
    ] == []


def test_the_portable_defaults_and_the_native_members_answer_alike(h):
    store = h.store
    record, created = store.get_or_create_actor("a", ["k"], None, lambda: {"n": 1}, due=True)
    assert created
    token, actor, history, _now = store.claim_and_load(record.actor_id, "me", 30)
    assert (actor.state, history) == ({"n": 1}, [])
    assert store.claim_and_load(record.actor_id, "other", 30) is None  # held
    message, hint = store.send_and_check(record.actor_id, "q", 1)
    assert message.body == 1 and hint in (None, False)  # leased: no hint
    assert store.release(record.actor_id, token).ok
    assert not store.release(record.actor_id, token).ok  # released already: fenced
    assert [a.actor_id for a in store.list_actors("a")] == [record.actor_id]


# --- actors -------------------------------------------------------------------------------------------


def test_the_trace_context_of_a_creation_and_of_a_send_is_stored_and_read_back(h):
    store = h.store
    carrier = {"traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"}
    record, created = store.create_actor("order", ["t"], None, {}, due=True, trace_context=carrier)
    assert created and record.trace_context == carrier
    other, _ = store.get_or_create_actor("order", ["u"], None, dict, trace_context={"traceparent": "x"})
    plain, _ = store.create_actor("order", ["v"], None, {})
    assert store.get_actor(other.actor_id).trace_context == {"traceparent": "x"}
    assert plain.trace_context is None and store.get_actor(plain.actor_id).trace_context is None
    _token, loaded, _history, _now = store.claim_and_load(record.actor_id, "w", 30)
    assert loaded.trace_context == carrier  # what a run is parented to
    sent = store.send(record.actor_id, "q", 1, trace_context={"traceparent": "s1"})
    checked, _hint = store.send_and_check(record.actor_id, "q", 2, trace_context={"traceparent": "s2"})
    store.send(record.actor_id, "q", 3)
    assert store.get_message(sent.id).trace_context == {"traceparent": "s1"}
    pending = store.pending_messages(record.actor_id, ["q"], 10)
    assert [m.trace_context for m in pending] == [{"traceparent": "s1"}, {"traceparent": "s2"}, None]
    assert checked.trace_context == {"traceparent": "s2"}


def test_actor_counts_group_live_actors_by_type_and_state_with_due_and_expired_leases(h):
    store = h.store
    due = h.new_actor("due", due=True)
    h.new_actor("idle")
    h.new_actor("other", name="invoice", due=True)
    leased = h.new_actor("leased", due=True)
    store.claim(leased, "dead-worker", 30)
    h.expire_lease(leased)  # its executor died: due again, and counted as an expired lease
    done = h.new_actor("done")
    token = store.claim(done, "w", 30)
    store.commit(done, token, ports.Commit(workflow_state=ports.COMPLETED, release=True))
    gone = h.new_actor("gone", due=True)
    store.destroy_actor(gone)
    held = h.new_actor("held", due=True)
    store.claim(held, "w", 30)  # a live lease: not due
    counts = store.actor_counts()
    assert counts.by_state == {
        ("order", ports.PENDING): 4,
        ("invoice", ports.PENDING): 1,
        ("order", ports.COMPLETED): 1,
    }
    assert (counts.due, counts.leases_expired) == (3, 1)  # due, other, leased
    assert counts == base_store.BaseStore.actor_counts(store)  # the portable default agrees
    assert store.get_actor(due).wake_at is not None


def test_get_or_create_creates_once_and_builds_the_state_once(h):
    calls = []

    def create():
        calls.append(1)
        return {"count": 3}

    first, created = h.store.get_or_create_actor("order", ["a"], {"in": 1}, create)
    again, created_again = h.store.get_or_create_actor("order", ["a"], None, create)
    assert created and not created_again and calls == [1]
    assert again.actor_id == first.actor_id and again.state == {"count": 3} and again.input == {"in": 1}
    assert first.workflow_state == ports.PENDING and first.wake_at is None and first.lease_owner is None
    assert h.store.claim_due("sweeper", 10, 30) == []  # not due until something makes it due
    other, _ = h.store.get_or_create_actor("order", ["b"], None, create)
    assert other.actor_id != first.actor_id
    assert h.store.find_actor("order", ["a"]).actor_id == first.actor_id
    assert h.store.find_actor("order", ["zzz"]) is None


def test_get_or_create_actor_due_is_due_at_once(h):
    before = h.store.now()
    record, created = h.store.get_or_create_actor("order", ["k"], None, dict, due=True)
    assert created and before <= record.wake_at <= h.store.now()
    again, created = h.store.get_or_create_actor("order", ["k"], None, lambda: pytest.fail("rebuilt"))
    assert not created and again == record


def test_create_actor_due_is_claimable_at_once(h):
    before = h.store.now()
    record, created = h.store.create_actor("order", ["k"], {"in": 1}, {"count": 2}, due=True)
    assert created and record.workflow_state == ports.PENDING and record.lease_owner is None
    assert before <= record.wake_at <= h.store.now()
    assert (record.state, record.input, record.key) == ({"count": 2}, {"in": 1}, ["k"])
    assert h.store.get_actor(record.actor_id) == record
    assert [a for a, _ in h.store.claim_due("sweeper", 10, 30)] == [record.actor_id]


def test_create_actor_of_a_taken_key_writes_nothing(h):
    record, created = h.store.create_actor("order", ["k"], None, {"count": 0})
    assert created and record.wake_at is None
    again, created = h.store.create_actor("order", ["k"], {"in": 9}, {"count": 9}, due=True)
    assert not created and again.actor_id == record.actor_id
    assert h.store.get_actor(record.actor_id) == record  # nothing written: not due, old state


def test_unserializable_state_or_input_fails_at_creation_and_creates_nothing(h):
    with pytest.raises(errors.SerializationError):
        h.store.get_or_create_actor("order", ["x"], None, lambda: {"bad": object()})
    with pytest.raises(errors.SerializationError):
        h.store.create_actor("order", ["y"], {"bad": object()}, {}, due=True)
    assert h.store.find_actor("order", ["x"]) is None and h.store.find_actor("order", ["y"]) is None


def test_concurrent_get_or_create_makes_one_actor(h):
    results = run_in_threads(lambda i: h.store.get_or_create_actor("order", ["same"], None, dict), 8)
    assert len({record.actor_id for record, _ in results}) == 1
    assert sum(created for _, created in results) == 1


def test_concurrent_create_actor_of_one_key_makes_one_due_actor(h):
    results = run_in_threads(
        lambda i: h.store.create_actor("order", ["same"], {"caller": i}, {"count": i}, due=True), 8
    )
    assert len({record.actor_id for record, _ in results}) == 1
    assert sum(created for _, created in results) == 1
    winner = next(i for i, (_, created) in enumerate(results) if created)
    stored = h.store.get_actor(results[0][0].actor_id)
    assert stored.input == {"caller": winner} and stored.state == {"count": winner}
    assert len(h.store.list_actors("order")) == 1
    assert len(h.store.claim_due("sweeper", 10, 30)) == 1


def test_values_round_trip_through_the_serializer_and_are_copied_in_and_out(h):
    value = {"when": datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC), "ids": (1, 2), "tags": {"a"}, "items": [1]}
    actor_id = h.new_actor(state=value)
    record = h.store.get_actor(actor_id)
    assert record.state == value
    record.state["items"].append(2)
    assert h.store.get_actor(actor_id).state == value


def test_list_actors_lists_live_actors_of_a_type_oldest_first(h):
    first, second = h.new_actor("1"), h.new_actor("2")
    other = h.new_actor("3", name="invoice")
    now = h.store.now()
    for age, actor_id in ((3, first), (2, second), (1, other)):  # distinct instants (a fast clock may tie)
        h.set_columns(actor_id, created_at=now - timedelta(seconds=age))
    assert [a.actor_id for a in h.store.list_actors("order")] == [first, second]
    assert [a.actor_id for a in h.store.list_actors()] == [first, second, other]
    assert [a.actor_id for a in h.store.list_actors(limit=1)] == [first]
    h.store.destroy_actor(first)
    assert [a.actor_id for a in h.store.list_actors("order")] == [second]


def test_a_destroyed_actor_is_gone_fences_its_executor_and_frees_its_key(h):
    first = h.new_actor("d", due=True)
    token = h.store.claim(first, "w", 30)
    h.store.send(first, "approval", {})
    h.store.destroy_actor(first)
    assert h.store.commit(first, token, ports.Commit(state={"count": 1})).ok is False
    assert h.store.claim(first, "w", 30) is None
    assert h.store.claim_and_load(first, "w", 30) is None
    for call in (h.store.get_actor, h.store.load_history, h.store.load_for_run):
        with pytest.raises(errors.ActorNotFoundError):
            call(first)
    with pytest.raises(errors.ActorNotFoundError):
        h.store.send(first, "approval", {})
    with pytest.raises(errors.ActorNotFoundError):
        h.store.destroy_actor(first)
    assert h.store.find_actor("order", ["d"]) is None and h.message_count() == 0
    again = h.new_actor("d")
    if h.sharded:  # the id is computed from (type, key) (DESIGN.md section 21): the same key, the same id
        assert again == first
    else:
        assert again != first
    # either way the destroyed actor's executor stays fenced off from the new one, even once it is claimed
    assert h.store.claim(again, "w2", 30) is not None
    assert h.store.commit(first, token, ports.Commit(state={"count": 1})).ok is False
    assert h.store.get_actor(again).state != {"count": 1} and h.store.pending_messages(again, None, 10) == []


# --- leases ---------------------------------------------------------------------------------------------


def test_claim_is_exclusive_until_the_lease_expires_and_keeps_wake_at(h):
    actor_id = h.new_actor(due=True)
    wake_at = h.store.get_actor(actor_id).wake_at
    token = h.store.claim(actor_id, "w1", 30)
    assert token is not None and h.store.claim(actor_id, "w2", 30) is None
    record = h.store.get_actor(actor_id)
    assert record.lease_owner == "w1" and record.lease_token == token and record.wake_at == wake_at
    assert h.store.claim_due("w2", 10, 30) == []  # leased: not due for others
    h.expire_lease(actor_id)  # w1 died
    claimed = h.store.claim_due("w2", 10, 30)
    assert [a for a, _ in claimed] == [actor_id] and claimed[0][1] > token


def test_claim_due_expired_only_takes_over_expired_leases_and_leaves_free_due_actors(h):
    free, held, live = (
        h.new_actor("free", due=True),
        h.new_actor("held", due=True),
        h.new_actor("live", due=True),
    )
    token = h.store.claim(held, "w1", 30)
    h.store.claim(live, "w3", 30)
    h.expire_lease(held)  # w1 died; w3 lives
    claimed = h.store.claim_due("w2", 10, 30, expired_only=True)
    assert [a for a, _ in claimed] == [held] and claimed[0][1] > token
    assert h.store.get_actor(free).lease_owner is None  # new work: left to the other claim
    assert h.store.claim_due("w2", 10, 30, expired_only=True) == []
    assert [a for a, _ in h.store.claim_due("w2", 10, 30)] == [free]


def test_an_expired_lease_is_reclaimed_and_the_old_token_is_fenced_off(h):
    actor_id = h.new_actor(due=True)
    old = h.store.claim(actor_id, "dead-worker", 30)
    h.expire_lease(actor_id)
    new = h.store.claim(actor_id, "other", 30)
    assert new is not None and new > old
    stale = h.store.commit(actor_id, old, ports.Commit(state={"count": 99}, upserts=[entry("charge")]))
    assert stale.ok is False
    assert h.store.get_actor(actor_id).state == {"count": 0} and h.store.load_history(actor_id) == []
    assert h.store.renew(actor_id, old, 30) is False
    assert h.store.handoff(actor_id, old, "thief", 30) is None
    assert h.store.renew(actor_id, new, 30) is True
    assert h.store.commit(actor_id, new, ports.Commit(state={"count": 1})).ok
    assert h.store.get_actor(actor_id).state == {"count": 1}


def test_a_released_lease_token_is_fenced(h):
    actor_id = h.new_actor()
    token = h.store.claim(actor_id, "w", 30)
    assert h.store.commit(actor_id, token, ports.Commit(release=True)).ok
    assert h.store.commit(actor_id, token, ports.Commit(state={"count": 7})).ok is False
    assert h.store.renew(actor_id, token, 30) is False
    assert h.store.get_actor(actor_id).state == {"count": 0}


def test_renew_extends_only_the_lease_of_the_current_token(h):
    actor_id = h.new_actor()
    token = h.store.claim(actor_id, "w1", 30)
    h.set_columns(actor_id, lease_expires_at=h.store.now() + timedelta(seconds=1))  # about to expire
    assert h.store.renew(actor_id, token, 30)
    assert h.store.get_actor(actor_id).lease_expires_at >= h.store.now() + timedelta(seconds=25)
    assert h.store.claim(actor_id, "w2", 30) is None  # the renewed lease is live
    assert not h.store.renew(actor_id, token + 1, 30)


def test_handoff_moves_the_lease_once(h):
    actor_id = h.new_actor(due=True)
    ((claimed, token),) = h.store.claim_due("sweep", 10, 30)
    assert claimed == actor_id
    new = h.store.handoff(actor_id, token, "task", 30)
    assert new == token + 1 and h.store.get_actor(actor_id).lease_owner == "task"
    assert h.store.handoff(actor_id, token, "duplicate", 30) is None  # a redelivered hand-over
    assert h.store.commit(actor_id, token, ports.Commit(state={"count": 5})).ok is False
    assert h.store.commit(actor_id, new, ports.Commit(state={"count": 5})).ok


def test_claim_race_has_exactly_one_winner(h):
    actor_id = h.new_actor(due=True)
    tokens = run_in_threads(lambda i: h.store.claim(actor_id, f"worker-{i}", 30), 8)
    winners = [t for t in tokens if t is not None]
    assert len(winners) == 1 and h.store.get_actor(actor_id).lease_token == winners[0]


def test_claim_due_orders_by_wake_at_and_respects_limit_and_leases(h):
    now = h.store.now()
    ids = [h.new_actor(str(i)) for i in range(6)]
    # wake times: ids[5] earliest ... ids[1] latest past; ids[0] in the future
    for offset, actor_id in enumerate(ids):
        h.set_columns(actor_id, wake_at=now - timedelta(seconds=100 - offset * 10))
    h.set_columns(ids[0], wake_at=now + HOUR)
    assert h.store.claim(ids[1], "busy", 30) is not None  # leased: not due for others
    first = h.store.claim_due("sweeper", 2, 30)
    assert [a for a, _ in first] == [ids[2], ids[3]]
    assert all(h.store.get_actor(a).lease_token == t for a, t in first)
    assert [a for a, _ in h.store.claim_due("sweeper", 10, 30)] == [ids[4], ids[5]]
    assert h.store.claim_due("sweeper", 10, 30) == [] and h.store.claim_due("sweeper", 0, 30) == []


def test_concurrent_sweeps_claim_each_due_actor_once(h):
    ids = {h.new_actor(str(i), due=True) for i in range(12)}
    batches = run_in_threads(lambda i: h.store.claim_due(f"sweeper-{i}", 5, 30), 4)
    claimed = [actor_id for batch in batches for actor_id, _ in batch]
    assert sorted(claimed) == sorted(ids)


def test_next_deadline_is_the_earliest_wake_at_of_unfinished_actors(h):
    assert h.store.next_deadline() is None
    a, b, c = h.new_actor("a"), h.new_actor("b"), h.new_actor("c")
    now = h.store.now()
    h.sleep_on(a, h.store.claim(a, "w", 30), until=now + HOUR)
    h.sleep_on(b, h.store.claim(b, "w", 30), until=now + 2 * HOUR)
    token = h.store.claim(c, "w", 30)
    done = ports.Commit(workflow_state=ports.COMPLETED, wake_at=now + timedelta(seconds=5), release=True)
    assert h.store.commit(c, token, done).ok
    assert h.store.get_actor(c).wake_at is None  # finished actors are never due
    assert h.store.next_deadline() == now + HOUR
    token = h.store.claim(a, "w", 30)
    h.store.commit(a, token, ports.Commit(workflow_state=ports.COMPLETED, output=1, release=True))
    assert h.store.get_actor(a).wake_at is None and h.store.next_deadline() == now + 2 * HOUR


# --- the run's reads -----------------------------------------------------------------------------------


def test_claim_and_load_and_load_for_run_read_the_actor_and_its_history(h):
    actor_id = h.new_actor(due=True)
    token = h.store.claim(actor_id, "w", 30)
    h.store.commit(actor_id, token, ports.Commit(state={"count": 4}, upserts=[entry("a"), entry("b")]))
    actor, history, now = h.store.load_for_run(actor_id)
    assert actor.state == {"count": 4} and [e.key for e in history] == ["a", "b"]
    assert now <= h.store.now()
    assert h.store.claim_and_load(actor_id, "other", 30) is None  # lease held
    h.store.commit(actor_id, token, ports.Commit(release=True))
    token2, actor2, history2, now2 = h.store.claim_and_load(actor_id, "other", 30)
    assert token2 == token + 1 and actor2.lease_owner == "other" and actor2.lease_token == token2
    assert actor2.state == {"count": 4} and history2 == history and now <= now2 <= h.store.now()


# --- commits --------------------------------------------------------------------------------------------


def test_a_commit_writes_history_state_and_status_together(h):
    actor_id = h.new_actor()
    token = h.store.claim(actor_id, "w", 30)
    commit = ports.Commit(
        state={"count": 1}, workflow_state=ports.RUNNING, upserts=[entry("a", output=[1, 2])]
    )
    assert h.store.commit(actor_id, token, commit).ok
    actor = h.store.get_actor(actor_id)
    assert actor.state == {"count": 1} and actor.workflow_state == ports.RUNNING
    [a] = h.store.load_history(actor_id)
    assert a.key == "a" and a.location == ["a"] and a.data == {"output": [1, 2]}
    assert a.status == ports.ENTRY_COMPLETED


def test_a_commit_sets_the_replay_generation_only_when_told(h):
    actor_id = h.new_actor()
    assert h.store.get_actor(actor_id).replay_generation == 0
    token = h.store.claim(actor_id, "w", 30)
    assert h.store.commit(actor_id, token, ports.Commit(replay_generation=3)).ok
    assert h.store.commit(actor_id, token, ports.Commit(state={"n": 1}, release=True)).ok
    assert h.store.get_actor(actor_id).replay_generation == 3
    assert h.store.claim(actor_id, "w", 30) is not None  # loaded by a claim too
    assert h.store.get_actor(actor_id).replay_generation == 3


def test_a_failing_commit_writes_nothing(h):
    actor_id = h.new_actor()
    token = h.store.claim(actor_id, "w", 30)
    bad_outbox = ports.Commit(
        state={"count": 5}, upserts=[entry("a")], outbox=[("no-such-actor", "jobs", {}, False)]
    )
    with pytest.raises(errors.ActorNotFoundError):
        h.store.commit(actor_id, token, bad_outbox)
    with pytest.raises(errors.SerializationError):
        h.store.commit(actor_id, token, ports.Commit(upserts=[entry("b")], state={"x": object()}))
    with pytest.raises(errors.SerializationError):
        h.store.commit(
            actor_id, token, ports.Commit(state={"count": 5}, upserts=[entry("c", output=object())])
        )
    assert h.store.load_history(actor_id) == []
    assert h.store.get_actor(actor_id).state == {"count": 0} and h.message_count() == 0
    assert h.store.commit(actor_id, token, ports.Commit(state={"count": 1})).ok  # the lease still holds


def test_upserts_keep_creation_order_and_deletes_remove_only_the_named_keys(h):
    actor_id = h.new_actor()
    token = h.store.claim(actor_id, "w", 30)
    before = h.store.now()
    h.store.commit(
        actor_id, token, ports.Commit(upserts=[entry("a", status=ports.ENTRY_RUNNING), entry("b")])
    )
    after = h.store.now()
    h.store.commit(actor_id, token, ports.Commit(upserts=[entry("c"), entry("a", output=Decimal("1.5"))]))
    history = h.store.load_history(actor_id)
    assert [e.key for e in history] == ["a", "b", "c"]
    assert history[0].seq < history[1].seq < history[2].seq
    assert history[0].data == {"output": Decimal("1.5")} and history[0].status == ports.ENTRY_COMPLETED
    assert before <= history[0].created_at <= after  # the upsert kept the first write's created_at
    h.store.commit(actor_id, token, ports.Commit(deletes=["b"]))
    assert [e.key for e in h.store.load_history(actor_id)] == ["a", "c"]


def test_a_commit_taking_the_step_lock_returns_the_fresh_state(h):
    actor_id = h.new_actor(state={"n": 7})
    token = h.store.claim(actor_id, "w", 30)
    result = h.store.commit(actor_id, token, ports.Commit(step_lock_until=h.store.now() + HOUR))
    assert result.ok and result.state == {"n": 7}
    assert h.column(actor_id, "step_lock_until") is not None
    written = h.store.commit(
        actor_id, token, ports.Commit(state={"n": 8}, step_lock_until=h.store.now() + HOUR)
    )
    assert written.state == {"n": 8}
    unlocked = h.store.commit(actor_id, token, ports.Commit(state={"n": 9}, step_lock_until=None))
    assert unlocked.state is ports.UNSET and h.column(actor_id, "step_lock_until") is None


def test_outbox_messages_are_delivered_with_the_commit_and_wake_the_target(h):
    sender, target = h.new_actor("sender"), h.new_actor("target")
    h.sleep_on(target, h.store.claim(target, "w", 30), queues=["jobs"])
    token = h.store.claim(sender, "w", 30)
    result = h.store.commit(sender, token, ports.Commit(outbox=[(target, "jobs", {"n": 1}, False)] * 2))
    assert result.woken == [target]
    assert [m.body for m in h.store.pending_messages(target, ["jobs"], 10)] == [{"n": 1}, {"n": 1}]
    assert [a for a, _ in h.store.claim_due("sweeper", 10, 30)] == [target]
    stale = h.store.commit(sender, token - 1, ports.Commit(outbox=[(target, "jobs", 2, False)]))
    assert not stale.ok and len(h.store.pending_messages(target, None, 10)) == 2


def test_run_in_commit_applies_what_the_body_built_with_the_fence(h):
    actor_id = h.new_actor()
    token = h.store.claim(actor_id, "w", 30)
    calls = []

    def body():
        calls.append(1)
        return ports.Commit(state={"count": 9}, upserts=[entry("atomic", output="placed")])

    assert h.store.run_in_commit(actor_id, token, body).ok and calls == [1]
    assert h.store.get_actor(actor_id).state == {"count": 9}
    assert [(e.key, e.data) for e in h.store.load_history(actor_id)] == [("atomic", {"output": "placed"})]
    # a body that raises writes nothing and its exception propagates
    with pytest.raises(ZeroDivisionError):
        h.store.run_in_commit(actor_id, token, lambda: 1 / 0)
    assert h.store.get_actor(actor_id).state == {"count": 9}
    # a stale token: the body never runs
    assert not h.store.run_in_commit(actor_id, token - 1, body).ok and calls == [1]
    h.store.commit(actor_id, token, ports.Commit(release=True))
    assert not h.store.run_in_commit(actor_id, token, body).ok and calls == [1]  # released lease


# --- queues and wake-ups --------------------------------------------------------------------------------


def test_a_send_wakes_a_workflow_waiting_on_that_queue_only(h):
    actor_id = h.new_actor()
    result = h.sleep_on(actor_id, h.store.claim(actor_id, "w", 30), queues=["approval"])
    assert result.woken == [] and h.store.claim_due("sweeper", 10, 30) == []
    h.store.send(actor_id, "unrelated", {"x": 1})
    assert h.store.get_actor(actor_id).wake_at > h.store.now()  # still the sleep's deadline
    before = h.store.now()
    h.store.send(actor_id, "approval", {"ok": True})
    assert before <= h.store.get_actor(actor_id).wake_at <= h.store.now()
    assert [a for a, _ in h.store.claim_due("sweeper", 10, 30)] == [actor_id]


def test_a_wildcard_wait_is_woken_by_any_queue(h):
    actor_id = h.new_actor()
    h.sleep_on(actor_id, h.store.claim(actor_id, "w", 30), queues=["*"])
    h.store.send(actor_id, "anything", 1)
    assert [a for a, _ in h.store.claim_due("sweeper", 10, 30)] == [actor_id]


def test_a_send_keeps_an_earlier_wake_up(h):
    actor_id = h.new_actor()
    h.sleep_on(actor_id, h.store.claim(actor_id, "w", 30), queues=["q"])
    earlier = h.store.now() - timedelta(seconds=30)
    h.set_columns(actor_id, wake_at=earlier)
    h.store.send(actor_id, "q", 1)
    assert h.store.get_actor(actor_id).wake_at == earlier


def test_a_send_during_a_run_is_not_missed_after_release(h):
    actor_id = h.new_actor()
    token = h.store.claim(actor_id, "w", 30)
    h.store.send(actor_id, "approval", {"ok": True})  # arrives while the executor runs
    result = h.sleep_on(actor_id, token, queues=["approval"])
    assert result.ok and result.woken == [actor_id] and result.wake_at <= h.store.now()
    assert [a for a, _ in h.store.claim_due("sweeper", 10, 30)] == [actor_id]


def test_a_release_without_a_matching_message_sleeps_until_the_deadline(h):
    actor_id = h.new_actor()
    token = h.store.claim(actor_id, "w", 30)
    h.store.send(actor_id, "other", {})  # made the leased actor due; the release decides again
    until = h.store.now() + HOUR
    result = h.sleep_on(actor_id, token, queues=["approval"], until=until)
    assert result.woken == [] and result.wake_at == until and h.store.claim_due("sweeper", 10, 30) == []
    token = h.store.claim(actor_id, "w", 30)
    result = h.store.commit(actor_id, token, ports.Commit(waiting_for=["jobs"], wake_at=None, release=True))
    assert result.wake_at is None and result.woken == []


def test_a_send_to_a_failed_workflow_is_kept_but_does_not_wake_it(h):
    actor_id = h.new_actor()
    token = h.store.claim(actor_id, "w", 30)
    h.store.commit(
        actor_id, token, ports.Commit(workflow_state=ports.FAILED, waiting_for=["*"], release=True)
    )
    message, hint = h.store.send_and_check(actor_id, "jobs", 1)
    assert h.store.get_actor(actor_id).wake_at is None and not hint
    assert [m.id for m in h.store.pending_messages(actor_id, None, 10)] == [message.id]


@pytest.mark.parametrize("state", [ports.COMPLETED, ports.CANCELLED])
def test_a_send_to_a_completed_or_cancelled_workflow_is_refused_and_stores_nothing(h, state):
    actor_id = h.new_actor()
    token = h.store.claim(actor_id, "w", 30)
    h.store.commit(actor_id, token, ports.Commit(workflow_state=state, waiting_for=["*"], release=True))
    old = _mark_old(h, actor_id)
    for send in (h.store.send, h.store.send_and_check):
        with pytest.raises(errors.WorkflowFinishedError) as caught:
            send(actor_id, "jobs", 1)
        assert caught.value.metadata == {"actor_id": actor_id, "workflow_state": state, "queue": "jobs"}
    assert h.store.pending_messages(actor_id, None, 10) == []
    record = h.store.get_actor(actor_id)
    assert record.wake_at is None and record.updated_at == old
    with pytest.raises(errors.ActorNotFoundError):  # a missing actor is still that, not a finished one
        h.store.send("0" * 32, "jobs", 1)


def test_send_and_check_hints_a_dispatch_only_when_the_actor_is_due_and_not_leased(h):
    actor_id = h.new_actor()
    h.sleep_on(actor_id, h.store.claim(actor_id, "w", 30), queues=["q"])
    _, hint = h.store.send_and_check(actor_id, "other", 1)
    assert hint in (None, False)  # not due: nothing to dispatch
    _, hint = h.store.send_and_check(actor_id, "q", 2)
    assert hint in (None, True)  # due now, nobody holds it
    if hint is None:  # a store that cannot tell in the same write: the caller asks
        assert h.store.get_actor(actor_id).wake_at <= h.store.now()
    h.store.claim(actor_id, "runner", 30)
    _, hint = h.store.send_and_check(actor_id, "q", 3)
    assert hint in (None, False)  # a live lease: its holder takes the message
    with pytest.raises(errors.ActorNotFoundError):
        h.store.send_and_check("no-such-actor", "q", 1)
    with pytest.raises(errors.SerializationError):
        h.store.send_and_check(actor_id, "q", object())


def test_a_pending_message_reads_back_as_it_was_sent(h):
    actor_id = h.new_actor()
    body = {"at": datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC), "amount": Decimal("1.50"), "tags": ["a", None]}
    sent = h.store.send(
        actor_id, "jobs", body, completable=True, trace_context={"traceparent": "00-ab-cd-01"}
    )
    [got] = h.store.pending_messages(actor_id, ["jobs", "other"], 10)
    assert got == h.store.get_message(sent.id)
    assert (got.id, got.body, got.completable, got.status) == (sent.id, body, True, ports.MESSAGE_PENDING)
    assert got.trace_context == {"traceparent": "00-ab-cd-01"} and got.created_at == sent.created_at


def test_messages_are_fifo_received_and_completed_once(h):
    actor_id = h.new_actor()
    first = h.store.send(actor_id, "jobs", 1, completable=True)
    second = h.store.send(actor_id, "jobs", 2)
    third = h.store.send(actor_id, "other", 3)
    assert (first.status, first.completable, second.completable) == (ports.MESSAGE_PENDING, True, False)
    assert [m.body for m in h.store.pending_messages(actor_id, ["jobs"], 10)] == [1, 2]
    assert [m.body for m in h.store.pending_messages(actor_id, None, 2)] == [1, 2]
    assert [m.id for m in h.store.pending_messages(actor_id, ["*"], 10)] == [first.id, second.id, third.id]
    assert h.store.pending_messages(actor_id, None, 0) == []
    token = h.store.claim(actor_id, "w", 30)
    h.store.commit(actor_id, token, ports.Commit(receive_messages=[first.id, second.id]))
    assert [m.body for m in h.store.pending_messages(actor_id, None, 10)] == [3]
    assert h.store.get_message(first.id).status == ports.MESSAGE_RECEIVED
    h.store.commit(actor_id, token, ports.Commit(complete_messages=[(first.id, {"answer": 42})]))
    done = h.store.get_message(first.id)
    assert done.status == ports.MESSAGE_COMPLETED and done.response == {"answer": 42}
    assert done.completed_at is not None
    with pytest.raises(errors.MessageAlreadyCompletedError):
        h.store.complete_message(first.id, "again")
    with pytest.raises(errors.MessageAlreadyCompletedError):
        h.store.commit(actor_id, token, ports.Commit(state={"count": 1}, complete_messages=[(first.id, 1)]))
    assert h.store.get_actor(actor_id).state == {"count": 0}
    h.store.complete_message(second.id, [1, 2])  # directly, outside a commit
    assert h.store.get_message(second.id).response == [1, 2]
    for unknown in ("999999", "nope"):
        with pytest.raises(LookupError):
            h.store.get_message(unknown)
        with pytest.raises(LookupError):
            h.store.complete_message(unknown, 1)


def test_a_commit_cannot_complete_another_actors_message(h):
    mine, theirs = h.new_actor("mine"), h.new_actor("theirs")
    message = h.store.send(theirs, "q", 1, completable=True)
    token = h.store.claim(mine, "w", 30)
    with pytest.raises(LookupError):
        h.store.commit(mine, token, ports.Commit(state={"count": 1}, complete_messages=[(message.id, 2)]))
    assert h.store.get_message(message.id).status == ports.MESSAGE_PENDING
    assert h.store.get_actor(mine).state == {"count": 0}


# --- warm waits -----------------------------------------------------------------------------------------


def test_wait_for_messages_sees_a_pending_message_a_send_in_the_window_and_a_timeout(h):
    actor_id = h.new_actor()
    token = h.store.claim(actor_id, "runner", 30)  # a run holds the lease, as in a warm wait
    if not h.warm_waits:  # a store without notifications answers at once: the run releases as usual
        started = time.monotonic()
        assert h.store.wait_for_messages(actor_id, ["inbox"], 30.0) is False
        assert time.monotonic() - started < 30.0
        return
    assert h.store.wait_for_messages(actor_id, ["inbox"], 0.05) is False

    def send_later(_i):
        time.sleep(0.3)
        h.store.send(actor_id, "inbox", "hello")

    sender = threading.Thread(target=run_in_threads, args=(send_later, 1))
    sender.start()
    assert h.store.wait_for_messages(actor_id, ["inbox"], 30.0) is True  # woken by the send
    sender.join()
    assert h.store.wait_for_messages(actor_id, ["inbox"], 0.0) is True  # still pending: the look
    assert h.store.wait_for_messages(actor_id, ["*"], 0.0) is True
    assert h.store.commit(actor_id, token, ports.Commit(release=True)).ok


def test_a_send_watch_wakes_on_the_completion_and_on_the_end_and_times_out_otherwise(h):
    """A waiting send's watch (docs/howto/calling.md), taken before the message is stored. A store told of
    completions (memory, PostgreSQL LISTEN/NOTIFY through one connection per process) wakes it as soon as
    the commit that completes its message lands, or the one that finishes the workflow, or the actor's
    destruction; a completion of another message of the actor does not. The portable default polls: its
    watch sleeps the window out and says nothing (the sender looks on its backoff)."""
    notified = h.kind in ("memory", "postgres")
    actor_id = h.new_actor()
    token = h.store.claim(actor_id, "runner", 30)

    def watched(action, window=3.0):
        """Send a completable message under a watch, run ``action(message_id)`` on a thread 0.2 s later;
        (woke, seconds waited)."""
        with h.store.watch_sends(actor_id) as watch:
            assert watch.notifies is notified
            message = h.store.send(actor_id, "inbox", "ask", completable=True)
            watch.expect(message.id)

            def later(_i):
                time.sleep(0.2)
                action(message.id)

            worker = threading.Thread(target=run_in_threads, args=(later, 1))
            started = time.monotonic()
            worker.start()
            woke = watch.wait(window)
            waited = time.monotonic() - started
            worker.join()
            return woke, waited

    def by_commit(message_id):
        assert h.store.commit(actor_id, token, ports.Commit(complete_messages=[(message_id, "yes")])).ok

    def another_completed(_message_id):
        other = h.store.send(actor_id, "inbox", "other", completable=True)
        h.store.complete_message(other.id, "not yours")

    for action in (by_commit, lambda message_id: h.store.complete_message(message_id, "yes")):
        woke, waited = watched(action)
        assert (woke, waited < 1.5) == (True, True) if notified else (woke, waited >= 2.9) == (False, True)
    woke, waited = watched(another_completed, window=1.0)
    assert woke is False and waited >= 0.9
    finish = ports.Commit(workflow_state=ports.COMPLETED, release=True)
    woke, waited = watched(lambda _m: h.store.commit(actor_id, token, finish), window=3.0)
    assert (woke, waited < 1.5) == (True, True) if notified else woke is False
    doomed = h.new_actor("doomed")
    with h.store.watch_sends(doomed) as watch:
        watch.expect(h.store.send(doomed, "inbox", "ask", completable=True).id)
        destroyer = threading.Thread(
            target=run_in_threads, args=(lambda _i: h.store.destroy_actor(doomed), 1)
        )
        destroyer.start()
        woke = watch.wait(3.0 if notified else 0.2)
        destroyer.join()
    assert woke is notified


def test_release_connection_closes_the_threads_connection_outside_a_transaction_only(h):
    """A waiting send gives its connection back before it waits (docs/howto/calling.md); inside a
    transaction nothing is closed (it would end the transaction); the next store call opens one again."""
    actor_id = h.new_actor()
    h.store.release_connection()
    assert h.store.get_actor(actor_id).name == "order"
    if h.kind == "memory":
        return
    from django.db import connection, transaction

    with transaction.atomic():
        h.store.get_actor(actor_id)
        h.store.release_connection()
        assert connection.connection is not None and not connection.needs_rollback
    h.store.get_actor(actor_id)
    h.store.release_connection()
    assert connection.connection is None or connection.vendor == "sqlite" and connection.is_in_memory_db()
    assert h.store.get_actor(actor_id).name == "order"


# --- actions and the step lock ----------------------------------------------------------------------------


def increment(state):
    state["count"] += 1
    return state["count"]


def test_run_action_saves_the_state_and_returns_the_result(h):
    actor_id = h.new_actor(state={"count": 1})
    assert h.store.run_action(actor_id, increment, timeout=1) == (2, {"count": 2})
    assert h.store.get_actor(actor_id).state == {"count": 2}
    with pytest.raises(errors.ActorNotFoundError):
        h.store.run_action("no-such-actor", increment, timeout=1)


def test_a_failing_action_saves_nothing(h):
    actor_id = h.new_actor(state={"count": 1})

    def broken(state):
        state["count"] = 100
        raise ValueError("boom")

    with pytest.raises(ValueError):
        h.store.run_action(actor_id, broken, timeout=1, make_due=True)
    with pytest.raises(errors.SerializationError):
        h.store.run_action(actor_id, lambda s: s.update(bad=object()), timeout=1)
    record = h.store.get_actor(actor_id)
    assert record.state == {"count": 1} and record.wake_at is None


def test_run_action_make_due_saves_the_state_and_the_wake_up_together(h):
    actor_id = h.new_actor()
    result, state = h.store.run_action(actor_id, lambda s: s.update(count=1), timeout=1, make_due=True)
    after = h.store.get_actor(actor_id)
    assert state == after.state == {"count": 1}
    assert after.wake_at is not None and after.wake_at <= h.store.now()
    assert [a for a, _ in h.store.claim_due("sweeper", 10, 30)] == [actor_id]


def test_run_action_make_due_keeps_an_earlier_wake_up_and_a_finished_workflow(h):
    early = h.new_actor("early", due=True)
    wake_at = h.store.get_actor(early).wake_at
    h.store.run_action(early, lambda s: None, timeout=1, make_due=True)
    assert h.store.get_actor(early).wake_at == wake_at
    done = h.new_actor("done")
    token = h.store.claim(done, "w", 30)
    h.store.commit(done, token, ports.Commit(workflow_state=ports.COMPLETED, release=True))
    h.store.run_action(done, lambda s: None, timeout=1, make_due=True)
    assert h.store.get_actor(done).wake_at is None


def test_an_action_waits_for_a_live_step_lock_and_then_sees_the_step_state(h):
    actor_id = h.new_actor()
    token = h.store.claim(actor_id, "w", 30)
    taken = h.store.commit(
        actor_id, token, ports.Commit(step_lock_until=h.store.now() + timedelta(seconds=30))
    )
    assert taken.state == {"count": 0}
    with pytest.raises(errors.WorkflowInFlightError):
        h.store.run_action(actor_id, increment, timeout=0.1)
    results = []
    waiter = threading.Thread(
        target=run_in_threads,
        args=(lambda i: results.append(h.store.run_action(actor_id, increment, timeout=30)), 1),
    )
    waiter.start()
    waiter.join(0.2)
    assert waiter.is_alive() and results == []  # blocked behind the step
    step_state = taken.state
    step_state["count"] += 10
    h.store.commit(actor_id, token, ports.Commit(state=step_state, step_lock_until=None))
    waiter.join(30)
    assert results == [(11, {"count": 11})]  # neither update lost
    assert h.store.get_actor(actor_id).state == {"count": 11}


def test_the_step_lock_of_an_expired_lease_does_not_block_actions(h):
    actor_id = h.new_actor()
    token = h.store.claim(actor_id, "w", 30)
    h.store.commit(actor_id, token, ports.Commit(step_lock_until=h.store.now() + HOUR))
    h.expire_lease(actor_id)  # the executor died; its lease is gone
    assert h.store.run_action(actor_id, lambda s: "ran", timeout=0.1)[0] == "ran"
    assert h.store.claim(actor_id, "next", 30) is not None
    assert h.column(actor_id, "step_lock_until") is None  # a claim clears the dead step lock


def test_concurrent_actions_lose_no_update(h):
    actor_id = h.new_actor()

    def bump(_i):
        for _ in range(25):
            h.store.run_action(actor_id, increment, timeout=30)

    run_in_threads(bump, 4)
    assert h.store.get_actor(actor_id).state == {"count": 100}


def test_a_slow_action_on_one_actor_does_not_block_writes_to_another(h):
    slow, other = h.new_actor("slow"), h.new_actor("other")
    entered, release = threading.Event(), threading.Event()

    def wait_inside_action(state):
        entered.set()
        assert release.wait(30)
        state["count"] += 1

    worker = threading.Thread(
        target=run_in_threads, args=(lambda i: h.store.run_action(slow, wait_inside_action, timeout=30), 1)
    )
    worker.start()
    try:
        assert entered.wait(30)
        token = h.store.claim(other, "w", 30)
        assert h.store.commit(other, token, ports.Commit(state={"count": 5}, upserts=[entry("a")])).ok
        h.store.send(other, "jobs", 1)
        assert not release.is_set()  # all of that happened while the action was still running
    finally:
        release.set()
        worker.join(30)
    assert h.store.get_actor(slow).state == {"count": 1} and h.store.get_actor(other).state == {"count": 5}


def test_actors_messaging_each_other_concurrently_do_not_deadlock(h):
    a, b = h.new_actor("a"), h.new_actor("b")
    tokens = {a: h.store.claim(a, "w", 60), b: h.store.claim(b, "w", 60)}
    pairs = [(a, b), (b, a)]

    def ping(i):
        me, other = pairs[i]
        return [
            h.store.commit(
                me, tokens[me], ports.Commit(state={"n": n}, outbox=[(other, "ping", n, False)])
            ).ok
            for n in range(30)
        ]

    results = run_in_threads(ping, 2)
    assert all(ok for batch in results for ok in batch)
    assert (
        len(h.store.pending_messages(a, None, 100)) == 30
        and len(h.store.pending_messages(b, None, 100)) == 30
    )


def test_the_store_classes_are_the_dialects():
    """``storage.store_for`` picks the class; the PostgreSQL store is a DjangoStore (same contract)."""
    assert issubclass(PostgresStore, DjangoStore)


# --- updated_at: the last change, not the last touch (field case C50) --------------------------------------


def _mark_old(h, actor_id):
    """Set ``updated_at`` an hour back and return it: whatever writes it next moves it visibly."""
    old = h.store.now() - HOUR
    h.set_columns(actor_id, updated_at=old)
    assert h.store.get_actor(actor_id).updated_at == old
    return old


def test_lease_bookkeeping_and_a_claim_given_back_unchanged_leave_updated_at(h):
    actor_id = h.new_actor(due=True)
    old = _mark_old(h, actor_id)
    token = h.store.claim(actor_id, "w", 30)
    assert h.store.renew(actor_id, token, 30)
    token = h.store.handoff(actor_id, token, "task", 30)
    assert h.store.commit(actor_id, token, ports.Commit(step_lock_until=h.store.now() + HOUR)).ok
    assert h.store.commit(actor_id, token, ports.Commit(step_lock_until=None)).ok
    assert h.store.commit(actor_id, token, ports.Commit(release=True)).ok  # handed back unchanged
    token, *_ = h.store.claim_and_load(actor_id, "w", 30)
    assert h.store.release(actor_id, token).ok
    ((_, token),) = h.store.claim_due("sweeper", 10, 30)
    h.expire_lease(actor_id)
    token = h.store.claim(actor_id, "next", 30)
    h.store.load_for_run(actor_id)
    h.store.load_history(actor_id)
    assert not h.store.commit(actor_id, token - 1, ports.Commit(state={"count": 9})).ok  # refused: fenced
    record = h.store.get_actor(actor_id)
    assert record.updated_at == old and record.state == {"count": 0} and record.lease_owner == "next"


def test_a_commit_that_changes_the_actor_or_its_history_moves_updated_at(h):
    actor_id = h.new_actor()
    token = h.store.claim(actor_id, "w", 30)
    for change in (
        ports.Commit(state={"count": 1}),
        ports.Commit(upserts=[entry("a")]),
        ports.Commit(wake_at=h.store.now() + HOUR, release=True),
    ):
        old = _mark_old(h, actor_id)
        token = h.store.claim(actor_id, "w", 30) if h.store.get_actor(actor_id).lease_owner is None else token
        assert h.store.commit(actor_id, token, change).ok
        assert h.store.get_actor(actor_id).updated_at > old


def test_an_action_that_changes_nothing_leaves_the_row_and_one_that_does_moves_updated_at(h):
    actor_id = h.new_actor(state={"count": 1, "tags": ["a"]})
    old = _mark_old(h, actor_id)
    assert h.store.run_action(actor_id, lambda s: s["count"], timeout=1) == (1, {"count": 1, "tags": ["a"]})
    h.store.run_action(actor_id, lambda s: s.update(count=1), timeout=1)  # the same value again
    assert h.store.get_actor(actor_id).updated_at == old
    h.store.run_action(actor_id, lambda s: s.update(count=True), timeout=1)  # 1 -> true is a change
    changed = h.store.get_actor(actor_id)
    assert changed.state == {"count": True, "tags": ["a"]} and changed.updated_at > old
    old = _mark_old(h, actor_id)
    h.store.run_action(actor_id, lambda s: None, timeout=1, make_due=True)  # only the wake-up changes
    woken = h.store.get_actor(actor_id)
    assert woken.wake_at is not None and woken.updated_at > old
    old = _mark_old(h, actor_id)
    h.store.run_action(actor_id, lambda s: None, timeout=1, make_due=True)  # due already: no change
    assert h.store.get_actor(actor_id).updated_at == old


def test_reads_and_refused_calls_on_a_finished_actor_leave_updated_at(h):
    actor_id = h.new_actor()
    token = h.store.claim(actor_id, "w", 30)
    h.store.commit(actor_id, token, ports.Commit(workflow_state=ports.COMPLETED, output=1, release=True))
    old = _mark_old(h, actor_id)
    h.store.run_action(actor_id, lambda s: dict(s), timeout=1, make_due=True)  # a polled read
    with pytest.raises(errors.WorkflowFinishedError):  # refused: nothing stored, nothing woken
        h.store.send(actor_id, "late", 1)
    with pytest.raises(errors.SerializationError):
        h.store.run_action(actor_id, lambda s: s.update(bad=object()), timeout=1)
    with pytest.raises(ValueError):
        h.store.run_action(actor_id, lambda s: int("x"), timeout=1)
    token = h.store.claim(actor_id, "inspector", 30)  # a repair that is refused gives the lease back
    h.store.commit(actor_id, token, ports.Commit(release=True))
    record = h.store.get_actor(actor_id)
    assert record.updated_at == old and record.wake_at is None and record.output == 1


def test_a_send_that_makes_the_actor_due_moves_updated_at(h):
    actor_id = h.new_actor()
    h.sleep_on(actor_id, h.store.claim(actor_id, "w", 30), queues=["q"])
    old = _mark_old(h, actor_id)
    h.store.send(actor_id, "other", 1)  # not waited on: no change of the actor
    assert h.store.get_actor(actor_id).updated_at == old
    h.store.send(actor_id, "q", 1)
    assert h.store.get_actor(actor_id).updated_at > old


# --- the operator audit --------------------------------------------------------------------------------


def _action(actor_id, action="recover", who="alice", reason=None, archived=()):
    return ports.OperatorActionRecord(
        actor_id=actor_id, action=action, who=who, reason=reason, archived_entries=list(archived)
    )


def test_an_operator_action_rides_on_its_commit_and_is_read_back_newest_first(h):
    actor_id = h.new_actor()
    token = h.store.claim(actor_id, "w", 30)
    archived = [{"key": "a", "data": {"output": {"$decimal": "1.5"}}}]
    commit = ports.Commit(
        deletes=["a"], release=True, audit=_action(actor_id, "replay_all", archived=archived)
    )
    assert h.store.commit(actor_id, token, commit).ok
    written = h.store.record_operator_action(_action(actor_id, "pause", "token", "maintenance"))
    assert written.at is not None and written.id and written.reason == "maintenance"
    first, second = h.store.operator_actions(actor_id)[::-1]
    assert (first.action, first.who, first.archived_entries) == ("replay_all", "alice", archived)
    assert second.action == "pause" and second.at >= first.at
    assert [a.action for a in h.store.operator_actions(actor_id, limit=1)] == ["pause"]
    assert h.store.operator_actions(h.new_actor("other")) == []


def test_a_fenced_or_failing_commit_writes_no_operator_action(h):
    actor_id = h.new_actor()
    token = h.store.claim(actor_id, "w", 30)
    h.store.commit(actor_id, token, ports.Commit(release=True))
    assert not h.store.commit(actor_id, token, ports.Commit(release=True, audit=_action(actor_id))).ok
    token = h.store.claim(actor_id, "w", 30)
    with pytest.raises(errors.SerializationError):
        h.store.commit(actor_id, token, ports.Commit(audit=_action(actor_id, archived=[object()])))
    with pytest.raises(errors.SerializationError):
        h.store.record_operator_action(_action(actor_id, archived=[object()]))
    assert h.store.operator_actions(actor_id) == []
    with pytest.raises(errors.ActorNotFoundError):
        h.store.record_operator_action(_action("no-such-actor"))


def test_a_destroyed_actor_takes_its_operator_actions_with_it(h):
    actor_id = h.new_actor()
    h.store.record_operator_action(_action(actor_id))
    h.store.destroy_actor(actor_id)
    assert h.store.operator_actions(actor_id) == []


# --- fork (DESIGN.md section 19) ------------------------------------------------------------------------


def _fork(h, source_id, key="forked", entries=(), **kwargs):
    return h.store.fork_actor(
        source_id,
        "order",
        [key],
        kwargs.pop("input", {"in": 2}),
        kwargs.pop("state", {"count": 5}),
        list(entries),
        source_audit=_action(source_id, "fork", reason="to forked"),
        fork_audit=_action("", "fork", reason="from source"),
        **kwargs,
    )


def test_fork_actor_creates_a_due_actor_with_the_copied_history_and_both_audit_rows(h):
    source_id = h.new_actor("source")
    token = h.store.claim(source_id, "w", 30)
    h.store.commit(source_id, token, ports.Commit(upserts=[entry("a"), entry("b")], release=True))
    source_history = h.store.load_history(source_id)
    copies = [e.copy() for e in source_history]
    copies[1].status, copies[1].attempts = ports.ENTRY_PENDING, 0
    copies[0].data = {"output": Decimal("1.5"), "at": datetime(2026, 1, 2, tzinfo=UTC)}
    before = h.store.now()

    record = _fork(h, source_id, entries=copies, flow=ports.Flow(priority=3, timeout=60))

    assert record.actor_id != source_id and (record.name, record.key) == ("order", ["forked"])
    assert (record.input, record.state) == ({"in": 2}, {"count": 5})
    assert record.workflow_state == ports.PENDING and record.lease_owner is None
    assert record.wake_at is not None and before <= record.wake_at <= h.store.now()  # due now
    assert record.priority == 3 and record.deadline_at is not None
    assert [a for a, _ in h.store.claim_due("w2", 10, 30)] == [record.actor_id]
    forked = h.store.load_history(record.actor_id)
    assert [e.key for e in forked] == ["a", "b"] and forked[0].seq < forked[1].seq
    assert forked[0].data == copies[0].data and forked[0].created_at == source_history[0].created_at
    assert (forked[1].status, forked[1].attempts) == (ports.ENTRY_PENDING, 0)
    assert h.store.load_history(source_id) == source_history  # the source's history is its own
    [on_source] = h.store.operator_actions(source_id)
    [on_fork] = h.store.operator_actions(record.actor_id)
    assert (on_source.action, on_source.reason) == ("fork", "to forked")
    assert (on_fork.action, on_fork.reason, on_fork.actor_id) == ("fork", "from source", record.actor_id)
    assert h.store.find_actor("order", ["forked"]).actor_id == record.actor_id


def test_fork_actor_of_a_taken_key_or_a_missing_source_writes_nothing(h):
    source_id = h.new_actor("source")
    h.new_actor("taken")
    with pytest.raises(errors.ActorAlreadyExistsError):
        _fork(h, source_id, key="taken", entries=[entry("a")])
    with pytest.raises(errors.ActorNotFoundError):
        _fork(h, "no-such-actor", key="fresh")
    with pytest.raises(errors.SerializationError):
        _fork(h, source_id, key="fresh", entries=[entry("a", output=object())])
    with pytest.raises(errors.SerializationError):
        _fork(h, source_id, key="fresh", state=object())
    assert h.store.operator_actions(source_id) == []
    assert sorted(a.key[0] for a in h.store.list_actors()) == ["source", "taken"]
    assert h.store.find_actor("order", ["fresh"]) is None


def test_fork_actor_carries_the_copied_entries_attributes_and_stream_items_renumbered(h):
    source_id = h.new_actor("source")
    store = h.store
    store.stream_write(source_id, "log", "started", write_key="log~w0")
    store.stream_write(source_id, "tokens", "a1", attempt=1, step_key="s")
    store.stream_write(source_id, "tokens", "a2", attempt=2, step_key="s")
    store.stream_discard(source_id, "s", 2)
    store.stream_write(source_id, "tokens", "summary", write_key="tokens~w0")
    store.stream_write(source_id, "tokens", "t1", attempt=1, step_key="t")
    store.stream_write(source_id, "other", "not copied", write_key="other~w0")
    store.stream_close(source_id, "log")

    def recorded(key, kind, **data):
        return ports.EntryRecord(key=key, location=[key], kind=kind, data=data, status=ports.ENTRY_COMPLETED)

    copies = [
        recorded("~attributes0", "attributes", attributes={"customer": "c-0", "plan": "pro"}),
        recorded("log~w0", "stream", stream="log", offset=0),
        entry("s", output="ok"),
        recorded("tokens~w0", "stream", stream="tokens", offset=2),
        recorded("~attributes1", "attributes", attributes={"customer": "c-42"}),
        recorded("log~c0", "stream", stream="log", closed=True),
        entry("t", status=ports.ENTRY_PENDING),  # runs again in the fork: its item stays behind
    ]

    record = _fork(h, source_id, entries=copies)

    assert record.attributes == {"customer": "c-42", "plan": "pro"}
    assert store.get_actor(record.actor_id).attributes == {"customer": "c-42", "plan": "pro"}
    page = store.stream_read(record.actor_id, "tokens", 0, 10, include_discarded=True)
    assert [(i.offset, i.value, i.attempt, i.discarded) for i in page.items] == [
        (0, "a2", 2, False),
        (1, "summary", None, False),
    ]
    assert not page.closed and page.next_offset == 2
    log = store.stream_read(record.actor_id, "log", 0, 10)
    assert [(i.offset, i.value) for i in log.items] == [(0, "started")] and log.closed
    assert store.stream_names(record.actor_id) == ["log", "tokens"]
    history = {e.key: e for e in store.load_history(record.actor_id)}
    assert history["tokens~w0"].data == {"stream": "tokens", "offset": 1}  # follows its item
    # the fork's next write comes after the copied items; the source's stream is its own
    assert store.stream_write(record.actor_id, "tokens", "next").offset == 2
    assert store.stream_read(source_id, "tokens", 0, 10).next_offset == 4


# --- wakes of released actors -------------------------------------------------------------------------------


def test_wait_for_wakes_hears_a_send_that_makes_a_released_actor_due_and_no_other(h):
    actor_id = h.new_actor()
    h.sleep_on(actor_id, h.store.claim(actor_id, "w", 30), queues=["q"])
    if not h.store.notifies_wakes:  # no notifications: [] at once, the dispatcher's hint carries the wake
        started = time.monotonic()
        assert h.store.wait_for_wakes(30.0) == []
        assert time.monotonic() - started < 30.0
        return
    heard: list[list[str]] = []
    listening = threading.Event()

    def listen(_i):
        h.store.wait_for_wakes(0.0)  # starts listening
        listening.set()
        heard.append(h.store.wait_for_wakes(30.0))
        heard.append(h.store.wait_for_wakes(0.3))

    listener = threading.Thread(target=run_in_threads, args=(listen, 1))
    listener.start()
    assert listening.wait(30)
    h.store.send(actor_id, "other", 1)  # not due: nothing to hear
    h.store.send(actor_id, "q", 2)  # due now, released: heard
    listener.join()
    assert heard[0] == [actor_id]
    assert heard[1] == []  # each wake once
    token = h.store.claim(actor_id, "runner", 30)
    assert token is not None
    assert h.store.commit(actor_id, token, ports.Commit(release=True)).ok


# --- code versions (rolling deploys, DESIGN.md section 12) ----------------------------------------------


def test_commits_record_the_code_version_on_entries_and_the_actor(h):
    actor_id = h.new_actor()
    assert h.store.get_actor(actor_id).code_version is None
    token = h.store.claim(actor_id, "w", 30)
    written = entry("a", out=1)
    written.code_version = "v2"
    commit = ports.Commit(upserts=[written, entry("b", out=2)], code_version="v2", awaiting_code_version="v1")
    assert h.store.commit(actor_id, token, commit).ok
    assert {e.key: e.code_version for e in h.store.load_history(actor_id)} == {"a": "v2", "b": None}
    actor = h.store.get_actor(actor_id)
    assert (actor.code_version, actor.awaiting_code_version) == ("v2", "v1")
    rewritten = entry("b", out=3)
    rewritten.code_version = "v3"
    h.store.commit(actor_id, token, ports.Commit(upserts=[rewritten], awaiting_code_version=None))
    assert {e.key: e.code_version for e in h.store.load_history(actor_id)} == {"a": "v2", "b": "v3"}
    assert h.store.get_actor(actor_id).awaiting_code_version is None
    assert h.store.load_for_run(actor_id)[0].code_version == "v2"


def test_a_deferred_release_is_not_due_before_defer_until_even_with_a_pending_message(h):
    actor_id = h.new_actor()
    token = h.store.claim(actor_id, "w", 30)
    h.sleep_on(actor_id, token, queues=["approval"])
    h.store.send(actor_id, "approval", {"ok": True})  # due now
    token = h.store.claim(actor_id, "w", 30)
    h.store.send(actor_id, "approval", {"again": True})  # arrives during the run
    later = h.store.now() + timedelta(seconds=30)
    before = h.store.get_actor(actor_id).updated_at
    result = h.store.commit(actor_id, token, ports.Commit(release=True, defer_until=later))
    assert result.ok and result.wake_at == later and result.woken == []
    actor = h.store.get_actor(actor_id)
    assert actor.wake_at == later and actor.lease_owner is None and actor.workflow_state == ports.SLEEPING
    assert actor.updated_at == before  # lease bookkeeping: not a change of the actor
    assert h.store.claim_due("sweeper", 10, 30) == []
    assert len(h.store.pending_messages(actor_id, None, 10)) == 2  # nothing received
    h.store.send(actor_id, "approval", 3)  # a later send wakes it as usual
    assert h.store.get_actor(actor_id).wake_at <= h.store.now()


def test_a_deferred_release_keeps_a_later_or_no_wake_up(h):
    actor_id = h.new_actor()
    token = h.store.claim(actor_id, "w", 30)
    until = h.store.now() + HOUR
    h.sleep_on(actor_id, token, queues=["approval"], until=until)
    token = h.store.claim(actor_id, "w", 30)
    soon = h.store.now() + timedelta(seconds=5)
    assert h.store.commit(actor_id, token, ports.Commit(release=True, defer_until=soon)).wake_at == until
    token = h.store.claim(actor_id, "w", 30)
    h.store.commit(actor_id, token, ports.Commit(wake_at=None, waiting_for=["approval"], release=True))
    token = h.store.claim(actor_id, "w", 30)
    assert h.store.commit(actor_id, token, ports.Commit(release=True, defer_until=soon)).wake_at is None
