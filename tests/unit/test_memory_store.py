"""MemoryStore: the reference implementation of ports.Store (fencing, wake rules, step lock, outbox)."""

from __future__ import annotations

import threading
from datetime import UTC, datetime, timedelta
from decimal import Decimal

import pytest

from rivet_workflows.engine import errors, ports
from rivet_workflows.testing import ManualClock, MemoryStore

T0 = datetime(2030, 1, 1, tzinfo=UTC)


@pytest.fixture
def clock():
    return ManualClock(T0)


@pytest.fixture
def store(clock):
    return MemoryStore(clock=clock, poll_interval=0.005)


def new_actor(store, key="k", state=None, name="worker"):
    record, created = store.get_or_create_actor(name, [key], {"in": 1}, lambda: state or {"n": 0})
    assert created
    return record.actor_id


def entry(key, **data):
    return ports.EntryRecord(key=key, location=key.split("/"), kind="step", data=data)


def test_get_or_create_creates_once_and_calls_create_state_once(store):
    calls = []

    def create():
        calls.append(1)
        return {"n": 0}

    first, created = store.get_or_create_actor("worker", ["a"], None, create)
    again, created_again = store.get_or_create_actor("worker", ["a"], None, create)
    assert created and not created_again
    assert first.actor_id == again.actor_id and calls == [1]
    assert first.workflow_state == ports.PENDING and first.wake_at is None
    other, _ = store.get_or_create_actor("worker", ["b"], None, create)
    assert other.actor_id != first.actor_id
    assert store.find_actor("worker", ["a"]).actor_id == first.actor_id
    assert store.find_actor("worker", ["zzz"]) is None


def test_concurrent_get_or_create_yields_one_actor(store):
    ids = []

    def go():
        ids.append(store.get_or_create_actor("worker", ["same"], None, lambda: {})[0].actor_id)

    threads = [threading.Thread(target=go) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(set(ids)) == 1


def test_unserializable_state_or_input_fails_at_creation(store):
    with pytest.raises(errors.SerializationError):
        store.get_or_create_actor("worker", ["x"], None, lambda: {"bad": object()})
    assert store.find_actor("worker", ["x"]) is None


def test_values_are_copied_in_and_out(store):
    actor_id = new_actor(store, state={"items": [1]})
    record = store.get_actor(actor_id)
    record.state["items"].append(2)
    assert store.get_actor(actor_id).state == {"items": [1]}


def test_claim_is_exclusive_until_the_lease_expires(store, clock):
    actor_id = new_actor(store)
    token = store.claim(actor_id, "w1", 10)
    assert token is not None
    assert store.claim(actor_id, "w2", 10) is None
    clock.advance(11)
    token2 = store.claim(actor_id, "w2", 10)
    assert token2 is not None and token2 > token


def test_stale_token_cannot_write(store, clock):
    actor_id = new_actor(store)
    old = store.claim(actor_id, "w1", 10)
    clock.advance(11)
    new = store.claim(actor_id, "w2", 10)
    stale = store.commit(actor_id, old, ports.Commit(state={"n": 99}, upserts=[entry("a")]))
    assert stale.ok is False
    assert store.get_actor(actor_id).state == {"n": 0}
    assert store.load_history(actor_id) == []
    assert store.commit(actor_id, new, ports.Commit(state={"n": 1})).ok
    assert store.get_actor(actor_id).state == {"n": 1}


def test_renew_extends_only_for_the_current_token(store, clock):
    actor_id = new_actor(store)
    token = store.claim(actor_id, "w1", 10)
    clock.advance(8)
    assert store.renew(actor_id, token, 10)
    clock.advance(8)
    assert store.claim(actor_id, "w2", 10) is None  # renewed lease still live
    assert not store.renew(actor_id, token + 1, 10)


def test_claim_keeps_wake_at_so_a_dead_executor_leaves_the_actor_due(store, clock):
    actor_id = new_actor(store)
    token = store.claim(actor_id, "w1", 10)
    store.commit(actor_id, token, ports.Commit(wake_at=T0, release=True))
    token = store.claim(actor_id, "w1", 10)
    assert store.get_actor(actor_id).wake_at == T0
    assert store.claim_due("w2", 10, 10) == []  # leased
    clock.advance(11)  # w1 died
    assert [a for a, _ in store.claim_due("w2", 10, 10)] == [actor_id]


def test_claim_due_orders_by_wake_at_and_honours_limit(store, clock):
    ids = [new_actor(store, key=str(i)) for i in range(3)]
    for offset, actor_id in zip((3, 1, 2), ids, strict=True):
        token = store.claim(actor_id, "setup", 10)
        store.commit(actor_id, token, ports.Commit(wake_at=T0 + timedelta(seconds=offset), release=True))
    not_due = new_actor(store, key="later")
    token = store.claim(not_due, "setup", 10)
    store.commit(not_due, token, ports.Commit(wake_at=T0 + timedelta(hours=1), release=True))
    clock.advance(5)
    claimed = store.claim_due("w", 2, 10)
    assert [a for a, _ in claimed] == [ids[1], ids[2]]
    assert [a for a, _ in store.claim_due("w", 10, 10)] == [ids[0]]


def test_next_deadline_is_earliest_wake_of_unfinished_actors(store):
    assert store.next_deadline() is None
    a, b = new_actor(store, key="a"), new_actor(store, key="b")
    token = store.claim(a, "w", 10)
    store.commit(a, token, ports.Commit(wake_at=T0 + timedelta(seconds=30), release=True))
    token = store.claim(b, "w", 10)
    store.commit(b, token, ports.Commit(wake_at=T0 + timedelta(seconds=5), workflow_state=ports.COMPLETED))
    assert store.get_actor(b).wake_at is None  # finished actors never stay due
    assert store.next_deadline() == T0 + timedelta(seconds=30)


def test_commit_is_all_or_nothing_on_serialization_error(store):
    actor_id = new_actor(store)
    token = store.claim(actor_id, "w", 10)
    bad = ports.Commit(state={"n": 5}, upserts=[entry("a", output=object())])
    with pytest.raises(errors.SerializationError):
        store.commit(actor_id, token, bad)
    assert store.get_actor(actor_id).state == {"n": 0}
    assert store.load_history(actor_id) == []


def test_entries_get_increasing_seq_and_upserts_keep_it(store):
    actor_id = new_actor(store)
    token = store.claim(actor_id, "w", 10)
    store.commit(actor_id, token, ports.Commit(upserts=[entry("a"), entry("b")]))
    store.commit(actor_id, token, ports.Commit(upserts=[entry("c")]))
    done = entry("a", output=Decimal("1.5"))
    done.status = ports.ENTRY_COMPLETED
    store.commit(actor_id, token, ports.Commit(upserts=[done], deletes=["b"]))
    history = store.load_history(actor_id)
    assert [e.key for e in history] == ["a", "c"]
    assert history[0].seq < history[1].seq
    assert history[0].data == {"output": Decimal("1.5")} and history[0].status == ports.ENTRY_COMPLETED
    assert history[0].created_at == T0


def test_step_lock_commit_returns_fresh_state(store):
    actor_id = new_actor(store, state={"n": 7})
    token = store.claim(actor_id, "w", 10)
    result = store.commit(actor_id, token, ports.Commit(step_lock_until=T0 + timedelta(seconds=30)))
    assert result.ok and result.state == {"n": 7}
    unlocked = store.commit(actor_id, token, ports.Commit(state={"n": 8}, step_lock_until=None))
    assert unlocked.state is ports.UNSET


def test_send_wakes_a_workflow_waiting_on_that_queue(store):
    actor_id = new_actor(store)
    token = store.claim(actor_id, "w", 10)
    result = store.commit(actor_id, token, ports.Commit(waiting_for=["approval"], release=True))
    assert result.wake_at is None and result.woken == []
    store.send(actor_id, "other", {"x": 1})
    assert store.get_actor(actor_id).wake_at is None
    store.send(actor_id, "approval", {"ok": True})
    assert store.get_actor(actor_id).wake_at == T0


def test_star_waits_on_any_queue(store):
    actor_id = new_actor(store)
    token = store.claim(actor_id, "w", 10)
    store.commit(actor_id, token, ports.Commit(waiting_for=["*"], release=True))
    store.send(actor_id, "anything", 1)
    assert store.get_actor(actor_id).wake_at == T0


def test_send_during_a_run_is_not_missed(store):
    actor_id = new_actor(store)
    token = store.claim(actor_id, "w", 10)
    store.send(actor_id, "jobs", {"n": 1})  # arrives while the executor runs, before it waits
    later = T0 + timedelta(hours=1)
    result = store.commit(actor_id, token, ports.Commit(waiting_for=["jobs"], wake_at=later, release=True))
    assert result.wake_at == T0 and result.woken == [actor_id]


def test_release_does_not_wake_for_messages_it_does_not_wait_on(store):
    actor_id = new_actor(store)
    token = store.claim(actor_id, "w", 10)
    store.send(actor_id, "other", 1)  # sets wake_at=now while leased; the release overrides it
    result = store.commit(actor_id, token, ports.Commit(waiting_for=["jobs"], wake_at=None, release=True))
    assert result.wake_at is None and result.woken == []


def test_send_to_finished_workflow_does_not_wake_it(store):
    actor_id = new_actor(store)
    token = store.claim(actor_id, "w", 10)
    store.commit(
        actor_id, token, ports.Commit(workflow_state=ports.COMPLETED, waiting_for=["*"], release=True)
    )
    store.send(actor_id, "jobs", 1)
    assert store.get_actor(actor_id).wake_at is None


def test_receive_and_complete_messages_in_a_commit(store):
    actor_id = new_actor(store)
    m1 = store.send(actor_id, "q", {"a": 1}, completable=True)
    m2 = store.send(actor_id, "q", {"a": 2})
    m3 = store.send(actor_id, "r", {"a": 3})
    assert [m.id for m in store.pending_messages(actor_id, None, 10)] == [m1.id, m2.id, m3.id]
    assert [m.id for m in store.pending_messages(actor_id, ["q"], 1)] == [m1.id]
    assert [m.id for m in store.pending_messages(actor_id, ["*"], 10)] == [m1.id, m2.id, m3.id]
    token = store.claim(actor_id, "w", 10)
    store.commit(actor_id, token, ports.Commit(receive_messages=[m1.id, m2.id]))
    assert [m.id for m in store.pending_messages(actor_id, None, 10)] == [m3.id]
    store.commit(actor_id, token, ports.Commit(complete_messages=[(m1.id, {"ok": True})]))
    done = store.get_message(m1.id)
    assert done.status == ports.MESSAGE_COMPLETED and done.response == {"ok": True}
    with pytest.raises(errors.MessageAlreadyCompletedError):
        store.complete_message(m1.id, "again")
    with pytest.raises(errors.MessageAlreadyCompletedError):
        store.commit(actor_id, token, ports.Commit(complete_messages=[(m1.id, 1)], state={"n": 5}))
    assert store.get_actor(actor_id).state == {"n": 0}


def test_complete_message_directly(store):
    actor_id = new_actor(store)
    message = store.send(actor_id, "q", 1, completable=True)
    store.complete_message(message.id, [1, 2])
    assert store.get_message(message.id).response == [1, 2]
    with pytest.raises(LookupError):
        store.get_message("nope")


def test_outbox_is_delivered_with_the_commit_and_wakes_target(store):
    sender, target = new_actor(store, key="s"), new_actor(store, key="t")
    t_token = store.claim(target, "w", 10)
    store.commit(target, t_token, ports.Commit(waiting_for=["inbox"], release=True))
    token = store.claim(sender, "w", 10)
    result = store.commit(sender, token, ports.Commit(outbox=[(target, "inbox", {"hi": 1}, False)]))
    assert result.woken == [target]
    assert [m.body for m in store.pending_messages(target, ["inbox"], 10)] == [{"hi": 1}]
    stale = store.commit(sender, token - 1, ports.Commit(outbox=[(target, "inbox", 2, False)]))
    assert not stale.ok
    assert len(store.pending_messages(target, None, 10)) == 1


def test_run_action_saves_state_and_returns_result(store):
    actor_id = new_actor(store, state={"n": 1})

    def increment(state):
        state["n"] += 1
        return state["n"]

    result, state = store.run_action(actor_id, increment, timeout=1)
    assert result == 2 and state == {"n": 2}
    assert store.get_actor(actor_id).state == {"n": 2}


def test_run_action_failure_does_not_save_state(store):
    actor_id = new_actor(store, state={"n": 1})

    def broken(state):
        state["n"] = 100
        raise ValueError("boom")

    with pytest.raises(ValueError):
        store.run_action(actor_id, broken, timeout=1)
    with pytest.raises(errors.SerializationError):
        store.run_action(actor_id, lambda s: s.update(bad=object()), timeout=1)
    assert store.get_actor(actor_id).state == {"n": 1}


def test_run_action_waits_for_a_live_step_lock(store):
    actor_id = new_actor(store, state={"n": 0})
    token = store.claim(actor_id, "w", 10)
    locked = store.commit(actor_id, token, ports.Commit(step_lock_until=T0 + timedelta(seconds=30)))
    results = []

    def call_action():
        results.append(store.run_action(actor_id, lambda s: s.__setitem__("n", s["n"] + 1), timeout=10))

    waiter = threading.Thread(target=call_action)
    waiter.start()
    waiter.join(0.1)
    assert waiter.is_alive() and results == []  # blocked behind the step
    step_state = locked.state
    step_state["n"] += 10
    store.commit(actor_id, token, ports.Commit(state=step_state, step_lock_until=None))
    waiter.join(5)
    assert not waiter.is_alive()
    assert store.get_actor(actor_id).state == {"n": 11}  # neither update lost


def test_run_action_gives_up_after_timeout(store):
    actor_id = new_actor(store)
    token = store.claim(actor_id, "w", 10)
    store.commit(actor_id, token, ports.Commit(step_lock_until=T0 + timedelta(seconds=30)))
    with pytest.raises(errors.WorkflowInFlightError):
        store.run_action(actor_id, lambda s: None, timeout=0.05)


def test_step_lock_of_an_expired_lease_does_not_block_actions(store, clock):
    actor_id = new_actor(store)
    token = store.claim(actor_id, "w", 10)
    store.commit(actor_id, token, ports.Commit(step_lock_until=T0 + timedelta(seconds=30)))
    clock.advance(11)  # the executor died; its lease is gone
    assert store.run_action(actor_id, lambda s: "ran", timeout=0.05)[0] == "ran"


def test_destroyed_actor_is_gone_and_its_key_is_free(store):
    actor_id = new_actor(store, key="d")
    token = store.claim(actor_id, "w", 10)
    store.send(actor_id, "q", 1)
    store.destroy_actor(actor_id)
    with pytest.raises(errors.ActorNotFoundError):
        store.get_actor(actor_id)
    with pytest.raises(errors.ActorNotFoundError):
        store.send(actor_id, "q", 1)
    assert store.claim(actor_id, "w", 10) is None
    assert not store.commit(actor_id, token, ports.Commit(state={})).ok
    fresh, created = store.get_or_create_actor("worker", ["d"], None, lambda: {})
    assert created and fresh.actor_id != actor_id


def test_concurrent_actions_lose_no_update(store):
    actor_id = new_actor(store, state={"n": 0})

    def hammer():
        for _ in range(200):
            store.run_action(actor_id, lambda s: s.__setitem__("n", s["n"] + 1), timeout=10)

    threads = [threading.Thread(target=hammer) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert store.get_actor(actor_id).state == {"n": 400}
