"""Durable streams in the engine (DESIGN.md section 17): recorded writes of workflow code (exactly once),
step-body writes committed at once with discarded attempts, closing, and the readers."""

from __future__ import annotations

import asyncio
import threading
import time

import pytest

from rivet_workflows.engine.model import errors
from rivet_workflows.engine.model.definitions import actor, queue, workflow
from rivet_workflows.engine.operate.dry_run import check_actor


def _values(items):
    return [(i.offset, i.value) for i in items]


async def _two_writes_then_wait(ctx):
    await ctx.stream("out").write("hello")
    await ctx.stream("out").write({"n": 1})
    await ctx.queue.next("wait", "go")
    await ctx.stream("out").write("after")
    return "done"


WAITER = actor(queues={"go": queue()}, run=workflow(_two_writes_then_wait))


def test_workflow_writes_are_recorded_and_a_replay_writes_none_again(h):
    h.setup(wf=WAITER)
    actor_id = h.start()
    h.run(actor_id)  # writes two items, then waits (the run unwinds)
    handle = h.runtime.client().wf.get_for_id(actor_id)
    assert _values(handle.read_stream("out", timeout=0)) == [(0, "hello"), (1, {"n": 1})]
    stream_entries = [e for e in h.history(actor_id).values() if e.kind == "stream"]
    assert [(e.key, e.data["offset"]) for e in stream_entries] == [("out~w0", 0), ("out~w1", 1)]
    h.send(actor_id, "go", None)
    h.run(actor_id)  # replays the two writes from history, then writes the third
    h.run(actor_id)  # nothing to do; replaying again writes nothing
    items = list(handle.read_stream("out"))  # the workflow completed: the stream is closed, the read ends
    assert _values(items) == [(0, "hello"), (1, {"n": 1}), (2, "after")]
    assert all(i.attempt is None and not i.discarded for i in items)
    assert handle.workflow_state() == "completed"


def test_a_dry_run_check_of_a_history_with_stream_writes_writes_nothing(h):
    h.setup(wf=WAITER)
    actor_id = h.start()
    h.run(actor_id)
    report = check_actor(h.runtime, h.actor(actor_id))
    assert report.outcome == "ok", report
    assert len(h.runtime.store.stream_read(actor_id, "out", 0, 10).items) == 2


def test_close_ends_readers_and_refuses_later_writes(h):
    async def run(ctx):
        await ctx.stream("out").write(1)
        await ctx.stream("out").close()
        await ctx.stream("out").close()  # closing again does nothing
        try:
            await ctx.stream("out").write(2)
        except errors.StreamClosedError:
            return "refused"
        return "written"

    h.setup(wf=actor(run=workflow(run)))
    actor_id = h.start()
    h.drain()
    handle = h.runtime.client().wf.get_for_id(actor_id)
    assert handle.record().output == "refused"
    assert _values(handle.read_stream("out")) == [(0, 1)]


def test_step_items_are_committed_with_their_attempt_and_a_failed_attempts_items_are_discarded(h):
    def think(step):
        for token in ("a", "b"):
            step.stream("tokens").write(f"{token}{step.attempt}")
        if step.attempt == 1:
            raise RuntimeError("the model call failed")
        return "ok"

    async def run(ctx):
        return await ctx.step("think", think, retry_backoff_base=0)

    h.setup(wf=actor(run=workflow(run)))
    actor_id = h.start()
    h.drain()
    handle = h.runtime.client().wf.get_for_id(actor_id)
    assert handle.workflow_state() == "completed"
    kept = list(handle.read_stream("tokens"))
    assert [(i.offset, i.value, i.attempt) for i in kept] == [(2, "a2", 2), (3, "b2", 2)]
    every = list(handle.read_stream("tokens", include_discarded=True))
    assert [(i.value, i.attempt, i.discarded) for i in every] == [
        ("a1", 1, True),
        ("b1", 1, True),
        ("a2", 2, False),
        ("b2", 2, False),
    ]
    assert h.history(actor_id)["think"].data["streams"] == ["tokens"]


def test_an_async_step_body_writes_with_awrite_and_write(h):
    async def think(step):
        await step.stream("tokens").awrite("x")
        step.stream("tokens").write("y")
        return "ok"

    async def run(ctx):
        return await ctx.step("think", think)

    h.setup(wf=actor(run=workflow(run)))
    actor_id = h.start()
    h.drain()
    handle = h.runtime.client().wf.get_for_id(actor_id)
    assert [i.value for i in handle.read_stream("tokens")] == ["x", "y"]


def test_a_reader_waits_for_items_written_while_it_reads_and_ends_when_the_workflow_finishes(h):
    h.setup(wf=WAITER)
    actor_id = h.start()
    h.run(actor_id)
    handle = h.runtime.client().wf.get_for_id(actor_id)
    seen: list = []

    def read():
        seen.extend(handle.read_stream("out", offset=1, timeout=20))

    reader = threading.Thread(target=read)
    reader.start()
    time.sleep(0.2)
    assert [i.value for i in seen] == [{"n": 1}]  # offset 1 on, then it waits
    h.send(actor_id, "go", None)
    started = time.monotonic()
    h.run(actor_id)
    reader.join(10)
    assert not reader.is_alive() and time.monotonic() - started < 5
    assert [i.offset for i in seen] == [1, 2]


def test_a_reader_with_a_timeout_ends_when_nothing_new_comes(h):
    h.setup(wf=WAITER)
    actor_id = h.start()
    h.run(actor_id)
    handle = h.runtime.client().wf.get_for_id(actor_id)
    started = time.monotonic()
    assert len(list(handle.read_stream("out", timeout=0.3))) == 2
    assert 0.25 <= time.monotonic() - started < 3


def test_the_async_reader_yields_the_same_items(h):
    h.setup(wf=WAITER)
    actor_id = h.start()
    h.send(actor_id, "go", None)
    h.drain()
    handle = h.runtime.client().wf.get_for_id(actor_id)

    async def read():
        return [i.value async for i in handle.aread_stream("out")]

    assert asyncio.run(read()) == ["hello", {"n": 1}, "after"]


def test_bad_names_offsets_and_values_are_refused(h):
    async def run(ctx):
        await ctx.stream("out").write(object())

    h.setup(wf=actor(run=workflow(run)))
    actor_id = h.start()
    handle = h.runtime.client().wf.get_for_id(actor_id)
    with pytest.raises(ValueError):
        list(handle.read_stream("a/b"))
    with pytest.raises(ValueError):
        list(handle.read_stream("out", offset=-1))
    with pytest.raises(ValueError, match="at most 200"):  # every store keeps 200 characters
        list(handle.read_stream("y" * 201))
    h.drain()
    assert handle.workflow_state() in ("failed", "suspended")
    assert list(handle.read_stream("out")) == []


def test_a_run_that_died_after_writing_an_item_but_before_recording_it_does_not_write_it_again(h):
    h.setup(wf=WAITER)
    actor_id = h.start()
    # what a run killed between the item's write and the commit of its history entry leaves behind
    h.runtime.store.stream_write(actor_id, "out", "hello", write_key="out~w0")
    h.run(actor_id)
    assert _values(h.runtime.store.stream_read(actor_id, "out", 0, 10).items) == [(0, "hello"), (1, {"n": 1})]
    assert h.history(actor_id)["out~w0"].data["offset"] == 0
