"""Deduplicated sends (``Store.send(dedup_id=)``, DESIGN.md section 20) on every store: a second send with a
kept message's dedup id stores nothing and answers with that message, also under concurrent senders."""

from __future__ import annotations

from rivet_workflows.engine import ports
from tests.conftest import run_in_threads


def test_a_second_send_with_the_same_dedup_id_stores_nothing_and_returns_the_first_message(h):
    actor_id = h.new_actor()
    first = h.store.send(actor_id, "jobs", {"n": 1}, dedup_id="webhook-7")
    again, hint = h.store.send_and_check(actor_id, "jobs", {"n": 2}, dedup_id="webhook-7")
    assert again.id == first.id and again.body == {"n": 1} and again.dedup_id == "webhook-7"
    assert hint in (None, False)
    assert [m.body for m in h.store.pending_messages(actor_id, None, 10)] == [{"n": 1}]
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
