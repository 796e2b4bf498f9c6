"""Deduplicated sends (``Store.send(dedup_id=)``) and deferred starts (``Store.defer_start``, the debounce) on
every store (DESIGN.md section 20): a second send with a kept message's dedup id stores nothing and answers
with that message, also under concurrent senders; an unstarted workflow's start moves, a started one's
not; a creation records its parent."""

from __future__ import annotations

from datetime import timedelta

from rivet_workflows.engine.model import ports
from tests.conftest import run_in_threads


def test_a_second_send_with_the_same_dedup_id_stores_nothing_and_returns_the_first_message(h):
    actor_id = h.new_actor()
    first = h.store.send(actor_id, "jobs", {"n": 1}, dedup_id="webhook-7")
    again, hint = h.store.send_and_check(actor_id, "jobs", {"n": 2}, dedup_id="webhook-7")
    assert again.id == first.id and again.body == {"n": 1} and again.dedup_id == "webhook-7"
    assert hint in (None, False)
    assert [(m.body, m.dedup_id) for m in h.store.pending_messages(actor_id, None, 10)] == [
        ({"n": 1}, "webhook-7")
    ]
    assert h.message_count() == 1


def test_sends_without_or_with_other_dedup_ids_and_to_other_actors_are_all_stored(h):
    actor_id, other = h.new_actor("a"), h.new_actor("b")
    h.store.send(actor_id, "jobs", 1, dedup_id="x")
    h.store.send(actor_id, "jobs", 2)
    h.store.send(actor_id, "jobs", 3)  # no dedup id: never collides (NULLs are distinct)
    h.store.send(actor_id, "jobs", 4, dedup_id="y")
    h.store.send(other, "jobs", 5, dedup_id="x")  # the id is per actor
    assert [m.body for m in h.store.pending_messages(actor_id, None, 10)] == [1, 2, 3, 4]
    assert [m.body for m in h.store.pending_messages(other, None, 10)] == [5]


def test_a_deduplicated_send_neither_wakes_the_actor_nor_is_refused_once_the_workflow_closed(h):
    actor_id = h.new_actor()
    token = h.store.claim(actor_id, "w", 30)
    h.store.commit(
        actor_id, token, ports.Commit(workflow_state=ports.SLEEPING, waiting_for=["q"], release=True)
    )
    first = h.store.send(actor_id, "q", 1, dedup_id="d")
    token = h.store.claim(actor_id, "w", 30)
    h.store.commit(
        actor_id,
        token,
        ports.Commit(workflow_state=ports.COMPLETED, receive_messages=[first.id], release=True),
    )
    # the redelivered send after the workflow completed: answered as the first was, nothing stored
    again = h.store.send(actor_id, "q", 2, dedup_id="d")
    assert again.id == first.id and again.status == ports.MESSAGE_RECEIVED
    assert h.message_count() == 1 and h.store.get_actor(actor_id).wake_at is None


def test_a_hundred_concurrent_sends_with_one_dedup_id_store_one_message(h):
    actor_id = h.new_actor()

    def sender(i: int) -> list[str]:
        # 8 threads, 100 sends in all (12 or 13 each)
        return [
            h.store.send(actor_id, "jobs", {"i": i, "n": n}, dedup_id="once").id for n in range(12 + (i < 4))
        ]

    ids = [message_id for batch in run_in_threads(sender, 8) for message_id in batch]
    assert len(ids) == 100 and len(set(ids)) == 1
    assert h.message_count() == 1
    assert [m.id for m in h.store.pending_messages(actor_id, None, 10)] == ids[:1]


# --- deferred starts (debounce) ------------------------------------------------------------------------


def test_defer_start_replaces_the_input_and_pushes_the_start_back_bounded_by_max_delay(h):
    record, created = h.store.get_or_create_actor("order", ["d"], {"v": 0}, lambda: {"s": 0})
    assert created and record.wake_at is None
    first = h.store.defer_start(record.actor_id, {"v": 1}, {"s": 1}, 30.0, None)
    assert first.input == {"v": 1} and first.state == {"s": 1}
    assert 29 <= (first.wake_at - h.store.now()).total_seconds() <= 30
    assert h.store.claim_due("sweeper", 10, 30) == []  # not due: deferred
    bounded = h.store.defer_start(record.actor_id, {"v": 2}, ports.UNSET, 30.0, 10.0)
    assert bounded.input == {"v": 2} and bounded.state == {"s": 1}  # state kept: UNSET
    assert bounded.wake_at == record.created_at + timedelta(seconds=10)


def test_defer_start_leaves_a_started_or_due_workflow_alone(h):
    due, _ = h.store.get_or_create_actor("order", ["due"], 1, dict, due=True)
    assert h.store.defer_start(due.actor_id, 2, ports.UNSET, 30.0, None) is None
    assert h.store.get_actor(due.actor_id).input == 1
    leased = h.new_actor("leased")
    h.set_columns(leased, wake_at=h.store.now() + timedelta(hours=1))
    token = h.store.claim(leased, "w", 30)
    assert token is not None
    assert h.store.defer_start(leased, 2, ports.UNSET, 30.0, None) is None  # a run holds it
    h.store.commit(leased, token, ports.Commit(workflow_state=ports.SLEEPING, release=True))
    assert h.store.defer_start(leased, 2, ports.UNSET, 30.0, None) is None  # it started
    assert h.store.get_actor(leased).input == {"in": 1}


# --- parents -------------------------------------------------------------------------------------------


def test_a_created_actor_records_its_parent_and_list_children_lists_live_children_oldest_first(h):
    parent = h.new_actor("parent")
    first, _ = h.store.create_actor("order", ["c1"], None, {}, parent_id=parent)
    second, _ = h.store.get_or_create_actor("order", ["c2"], None, dict, parent_id=parent)
    h.store.create_actor("order", ["other"], None, {})
    assert first.parent_id == parent and h.store.get_actor(second.actor_id).parent_id == parent
    assert [c.actor_id for c in h.store.list_children(parent)] == [first.actor_id, second.actor_id]
    h.store.destroy_actor(first.actor_id)
    assert [c.actor_id for c in h.store.list_children(parent)] == [second.actor_id]
    assert h.store.list_children("0" * 32) == [] and h.store.get_actor(parent).parent_id is None


def test_an_actor_created_with_a_deferred_start_is_due_only_after_it(h):
    record, created = h.store.get_or_create_actor("order", ["later"], 1, dict, start_after=30.0)
    assert created and 29 <= (record.wake_at - h.store.now()).total_seconds() <= 30
    other, _ = h.store.create_actor("order", ["later2"], 1, {}, start_after=0.0)
    assert other.wake_at <= h.store.now()
    assert [a for a, _ in h.store.claim_due("sweeper", 10, 30)] == [other.actor_id]
