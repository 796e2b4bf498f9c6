"""Durable streams of the storage port on every store (DESIGN.md section 17): dense offsets, exactly-once
recorded writes, closing, discarding a failed attempt's items, pages, waiting and pruning with the actor."""

from __future__ import annotations

import threading
import time
from datetime import datetime
from decimal import Decimal

import pytest

from rivet_workflows.engine.model import errors, ports


def test_items_get_dense_offsets_per_stream_and_read_back_as_written(h):
    actor = h.new_actor()
    first = h.store.stream_write(actor, "tokens", {"t": "he"})
    second = h.store.stream_write(actor, "tokens", Decimal("1.5"), attempt=1, step_key="think")
    other = h.store.stream_write(actor, "logs", "x")
    assert (first.offset, second.offset, other.offset) == (0, 1, 0)
    assert isinstance(first.at, datetime) and first.at.tzinfo is not None
    page = h.store.stream_read(actor, "tokens", 0, 10)
    assert [(i.offset, i.value, i.attempt, i.discarded) for i in page.items] == [
        (0, {"t": "he"}, None, False),
        (1, Decimal("1.5"), 1, False),
    ]
    assert (page.closed, page.next_offset) == (False, 2)
    assert h.store.stream_read(actor, "tokens", 1, 10).items[0].value == Decimal("1.5")
    assert h.store.stream_read(actor, "tokens", 2, 10) == ports.StreamPage([], False, 2)
    assert h.store.stream_names(actor) == ["logs", "tokens"]


def test_a_recorded_write_is_written_once_whatever_the_retries(h):
    actor = h.new_actor()
    item = h.store.stream_write(actor, "s", "a", write_key="w/1")
    again = h.store.stream_write(actor, "s", "a", write_key="w/1")
    assert again.offset == item.offset == 0
    assert [i.value for i in h.store.stream_read(actor, "s", 0, 10).items] == ["a"]


def test_a_closed_stream_refuses_writes_and_ends_its_pages(h):
    actor = h.new_actor()
    h.store.stream_write(actor, "s", 1)
    assert h.store.stream_close(actor, "s") is True
    assert h.store.stream_close(actor, "s") is False
    with pytest.raises(errors.StreamClosedError):
        h.store.stream_write(actor, "s", 2)
    page = h.store.stream_read(actor, "s", 0, 10)
    assert ([i.value for i in page.items], page.closed, page.next_offset) == ([1], True, 1)
    # a page that stops before the end is not the end, even of a closed stream
    h.store.stream_write(actor, "t", 1)
    h.store.stream_write(actor, "t", 2)
    h.store.stream_close(actor, "t")
    assert h.store.stream_read(actor, "t", 0, 1).closed is False
    assert h.store.stream_read(actor, "t", 1, 1).closed is True


def test_close_all_closes_the_open_streams_and_a_finished_workflow_reads_closed(h):
    actor = h.new_actor()
    h.store.stream_write(actor, "a", 1)
    h.store.stream_write(actor, "b", 1)
    h.store.stream_close(actor, "b")
    assert h.store.stream_close_all(actor) == ["a"]
    assert h.store.stream_read(actor, "a", 0, 10).closed
    other = h.new_actor("other")
    token = h.store.claim(other, "me", 30)
    assert h.store.commit(other, token, ports.Commit(workflow_state=ports.COMPLETED, release=True)).ok
    assert h.store.stream_read(other, "never-written", 0, 10) == ports.StreamPage([], True, 0)
    with pytest.raises(errors.StreamClosedError):
        h.store.stream_write(other, "late", 1)


def test_discard_marks_the_items_of_attempts_that_did_not_complete(h):
    actor = h.new_actor()
    h.store.stream_write(actor, "s", "a1", attempt=1, step_key="think")
    h.store.stream_write(actor, "s", "other", attempt=1, step_key="other")
    h.store.stream_write(actor, "s", "a2", attempt=2, step_key="think")
    assert h.store.stream_discard(actor, "think", 2) == 1
    assert h.store.stream_discard(actor, "think", 2) == 0
    assert [i.value for i in h.store.stream_read(actor, "s", 0, 10).items] == ["other", "a2"]
    every = h.store.stream_read(actor, "s", 0, 10, include_discarded=True)
    assert [(i.value, i.discarded) for i in every.items] == [("a1", True), ("other", False), ("a2", False)]
    page = h.store.stream_read(actor, "s", 0, 1)  # the discarded row is skipped but counted
    assert (page.items, page.next_offset) == ([], 1)


def test_tail_returns_the_last_items_oldest_first(h):
    actor = h.new_actor()
    for n in range(5):
        h.store.stream_write(actor, "s", n)
    assert [i.value for i in h.store.stream_tail(actor, "s", 2).items] == [3, 4]
    assert h.store.stream_tail(actor, "missing", 2).items == []


def test_streams_go_with_their_actor(h):
    actor = h.new_actor()
    h.store.stream_write(actor, "s", 1)
    h.store.destroy_actor(actor)
    with pytest.raises(errors.ActorNotFoundError):
        h.store.stream_read(actor, "s", 0, 10)
    with pytest.raises(errors.ActorNotFoundError):
        h.store.stream_write(actor, "s", 2)
    assert h.store.stream_names(actor) == []


def test_an_unserializable_item_is_refused_and_nothing_is_written(h):
    actor = h.new_actor()
    with pytest.raises(errors.SerializationError):
        h.store.stream_write(actor, "s", object())
    assert h.store.stream_read(actor, "s", 0, 10).items == []


def test_a_waiting_reader_is_woken_by_a_write_from_another_thread(h):
    actor = h.new_actor()
    watch = h.store.watch_stream(actor)
    try:
        assert h.store.stream_read(actor, "s", 0, 10).items == []

        def write() -> None:
            time.sleep(0.2)
            h.store.stream_write(actor, "s", "late")
            h.store.close_thread_connection()

        thread = threading.Thread(target=write)
        started = time.monotonic()
        thread.start()
        if watch.notifies:
            assert watch.wait(10.0) is True
            assert time.monotonic() - started < 5.0
        thread.join()
        assert [i.value for i in h.store.stream_read(actor, "s", 0, 10).items] == ["late"]
    finally:
        watch.close()
    assert watch.notifies is (h.kind in ("memory", "postgres"))


def test_concurrent_writers_to_one_stream_get_dense_distinct_offsets(h):
    actor = h.new_actor()
    offsets: list[int] = []

    def write(tag: str) -> None:
        try:
            for n in range(25):
                offsets.append(h.store.stream_write(actor, "s", f"{tag}{n}", attempt=1, step_key=tag).offset)
        finally:
            h.store.close_thread_connection()

    threads = [threading.Thread(target=write, args=(tag,)) for tag in "ab"]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(offsets) == list(range(50))
    items = h.store.stream_read(actor, "s", 0, 100).items
    assert [i.offset for i in items] == list(range(50))
    assert [i.value for i in items if i.value.startswith("a")] == [f"a{n}" for n in range(25)]
