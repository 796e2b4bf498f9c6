"""ENGINE-SCENARIOS.md "Queue messages" and "Sleep"."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from rivet_workflows.engine.model import ports
from rivet_workflows.engine.model.definitions import Loop, queue, workflow
from rivet_workflows.engine.model.errors import MessageAlreadyCompletedError, QueueWaitTimeoutError


def test_wait_sleeps_until_a_message_arrives(h):
    async def run(ctx):
        msg = await ctx.queue.next("wait", names=["my-message"])
        return msg.body

    h.setup(wf=workflow(run=run))
    aid = h.start()
    h.drain()
    actor = h.actor(aid)
    assert actor.workflow_state == ports.SLEEPING
    assert actor.waiting_for == ["my-message"]
    assert actor.wake_at is None
    h.send(aid, "my-message", "payload")
    h.drain()
    assert h.actor(aid).output == "payload"


def test_wait_on_several_names_and_any_queue(h):
    async def run(ctx):
        msg = await ctx.queue.next("wait", names=["first", "second"])
        other = await ctx.queue.next("wait-any")
        return [{"name": msg.name, "body": msg.body}, other.name]

    h.setup(wf=workflow(run=run))
    aid = h.start()
    h.drain()
    assert sorted(h.actor(aid).waiting_for) == ["first", "second"]
    h.send(aid, "second", "payload")
    h.drain()
    assert h.actor(aid).waiting_for == ["*"]
    h.send(aid, "approval", {})
    h.drain()
    assert h.actor(aid).output == [{"name": "second", "body": "payload"}, "approval"]


def test_message_sent_before_the_wait_is_consumed(h):
    async def run(ctx):
        await ctx.sleep("later", 0.3)
        return (await ctx.queue.next("wait", "greeting")).body

    h.setup(wf=workflow(run=run))
    aid = h.start()
    h.run(aid)  # sleeps: the wait has not begun yet
    assert h.history(aid).keys() == {"later"}
    h.send(aid, "greeting", "hello")
    h.drain()
    assert h.actor(aid).output == "hello"


def test_completed_message_is_recorded_with_its_response(h):
    async def run(ctx):
        msg = await ctx.queue.next("req", completable=True)
        await msg.complete({"ok": True})
        with pytest.raises(MessageAlreadyCompletedError):
            msg.complete({"ok": False})
        return msg.body

    h.setup(wf=workflow(run=run))
    aid = h.start()
    sent = h.send(aid, "req", "question", completable=True)
    h.drain()
    assert h.actor(aid).output == "question"
    stored = h.runtime.store.get_message(sent.id)
    assert stored.status == ports.MESSAGE_COMPLETED
    assert stored.response == {"ok": True}


def test_complete_inside_step_then_take_the_next(h):
    async def run(ctx):
        first = await ctx.queue.next("one", completable=True)
        await ctx.step("answer", lambda s: first.complete("done") and None)
        await ctx.sleep("pause", 0.12)
        second = await ctx.queue.next("two", completable=True)
        second.complete("done")
        return [first.body, second.body]

    h.setup(wf=workflow(run=run))
    aid = h.start()
    h.send(aid, "q", "one", completable=True)
    h.send(aid, "q", "two", completable=True)
    h.drain()
    assert h.actor(aid).output == ["one", "two"]


def test_next_completable_while_one_is_open_raises(h):
    async def run(ctx):
        await ctx.queue.next("one", completable=True)
        await ctx.queue.next("two", completable=True)

    h.setup(wf=workflow(run=run))
    aid = h.start()
    h.send(aid, "q", "one")
    h.send(aid, "q", "two")
    h.drain()
    assert "not completed" in h.actor(aid).error["message"]


def test_next_batch_is_fifo_and_takes_what_is_there(h):
    async def run(ctx):
        batch = await ctx.queue.next_batch("batch", count=2)
        rest = await ctx.queue.next_batch("rest", count=5)
        return [[m.body for m in batch], [m.body for m in rest]]

    h.setup(wf=workflow(run=run))
    aid = h.start()
    for body in ("first", "second", "third"):
        h.send(aid, "q", body)
    h.drain()
    assert h.actor(aid).output == [["first", "second"], ["third"]]


def test_next_batch_timeout_returns_empty_after_durable_deadline(h):
    async def run(ctx):
        got = await ctx.queue.next_batch("wait", count=2, timeout=5)
        return [m.body for m in got]

    h.setup(wf=workflow(run=run), manual_clock=True)
    aid = h.start()
    h.run(aid)
    actor = h.actor(aid)
    deadline = h.history(aid)["wait:deadline"].data["deadline"]
    assert actor.workflow_state == ports.SLEEPING and actor.wake_at == deadline
    h.clock.advance(2)
    h.run(aid)  # a restart before the deadline keeps the recorded deadline
    assert h.actor(aid).wake_at == deadline
    h.clock.advance(4)
    h.run(aid)
    assert h.actor(aid).output == []
    assert h.history(aid)["wait:count"].data["count"] == 0


def test_next_raises_on_timeout(h):
    async def run(ctx):
        try:
            await ctx.queue.next("wait", timeout=0.05)
        except QueueWaitTimeoutError:
            return "timed out"

    h.setup(wf=workflow(run=run))
    aid = h.start()
    h.drain()
    assert h.actor(aid).output == "timed out"


def test_timeout_with_messages_present(h):
    async def run(ctx):
        one = await ctx.queue.next("one", timeout=1)
        batch = await ctx.queue.next_batch("batch", count=2, timeout=5)
        return [one.body, [m.body for m in batch]]

    h.setup(wf=workflow(run=run))
    aid = h.start()
    h.send(aid, "q", "data")
    h.send(aid, "q", "first")
    h.drain()
    assert h.actor(aid).output == ["data", ["first"]]


def test_message_sent_while_a_step_runs_is_consumed_afterwards(h):
    aid_box = []

    def body(step):
        h.send(aid_box[0], "late", "value")
        return 1

    async def run(ctx):
        await ctx.step("work", body)
        return (await ctx.queue.next("wait", "late")).body

    h.setup(wf=workflow(run=run))
    aid_box.append(h.start())
    h.drain()
    assert h.actor(aid_box[0]).output == "value"


def test_drain_loop_does_not_replay_consumed_messages(h):
    async def body(ctx, seen):
        batch = await ctx.queue.next_batch("drain", count=10, timeout=0.05)
        if not batch:
            return Loop.break_(seen)
        return Loop.continue_(seen + [m.body for m in batch])

    async def run(ctx):
        return await ctx.loop(name="loop", state=[], run=body)

    h.setup(wf=workflow(run=run))
    aid = h.start()
    h.send(aid, "q", "first")
    h.drain()
    assert h.actor(aid).output == ["first"]


def test_next_then_batch_with_timeout(h):
    async def run(ctx):
        first = await ctx.queue.next("first", "first")
        second = await ctx.queue.next_batch("second", "second", timeout=0.05)
        return {"first": first.body, "second": [m.body for m in second]}

    h.setup(wf=workflow(run=run))
    aid = h.start()
    h.send(aid, "first", "first")
    h.drain()
    assert h.actor(aid).output == {"first": "first", "second": []}


def test_step_queue_send_delivers_with_the_step(h):
    async def run(ctx):
        await ctx.step("enqueue", lambda s: s.queue.send("self", {"n": 1}))
        return (await ctx.queue.next("wait", "self")).body

    h.setup(wf=workflow(run=run))
    aid = h.start()
    h.drain()
    assert h.actor(aid).output == {"n": 1}


# --- sleep ---------------------------------------------------------------------------------------------


def test_long_sleep_is_durable_and_short_sleep_completes(h):
    async def run(ctx):
        await ctx.sleep("short", 0.15)
        await ctx.sleep("long", 10)
        return "done"

    h.setup(wf=workflow(run=run), manual_clock=True)
    aid = h.start()
    h.run(aid)
    actor = h.actor(aid)
    assert actor.workflow_state == ports.SLEEPING
    assert actor.wake_at == h.history(aid)["short"].data["deadline"]
    h.clock.advance(0.2)
    h.run(aid)
    actor = h.actor(aid)
    assert actor.wake_at == h.history(aid)["long"].data["deadline"]
    assert actor.wake_at > h.runtime.store.now()
    h.clock.advance(10)
    h.run(aid)
    actor = h.actor(aid)
    assert actor.output == "done" and actor.wake_at is None


def test_short_sleep_in_live_mode_stores_no_wakeup(h):
    async def run(ctx):
        await ctx.sleep("nap", timedelta(seconds=0.02))
        return "done"

    h.setup(wf=workflow(run=run))
    store = h.runtime.store
    wakeups = []
    original = store.commit

    def watching(actor_id, token, commit):
        if commit.wake_at not in (ports.UNSET, None):
            wakeups.append(commit.wake_at)
        return original(actor_id, token, commit)

    store.commit = watching
    aid = h.start()
    wakeups.clear()
    h.drain()
    assert h.actor(aid).output == "done"
    assert wakeups == []


def test_sleep_until_past_completes_at_once(h):
    async def run(ctx):
        await ctx.sleep_until("past", datetime(2000, 1, 1, tzinfo=UTC))
        return "done"

    h.setup(wf=workflow(run=run))
    aid = h.start()
    h.run(aid)
    assert h.actor(aid).output == "done"
    assert h.history(aid)["past"].data["state"] == "completed"


def test_loop_records_first_once_then_sleeps(h):
    recorded = []

    async def body(ctx, n):
        if n == 0:
            await ctx.step("record", lambda s: recorded.append("first"))
            return Loop.continue_(1)
        await ctx.sleep("nap", 0.05)
        return Loop.break_(recorded and ["first"])

    async def run(ctx):
        return await ctx.loop(name="loop", state=0, run=body)

    h.setup(wf=workflow(run=run))
    aid = h.start()
    h.run(aid)
    h.drain()
    assert h.actor(aid).output == ["first"]
    assert recorded == ["first"]


def test_a_queue_wait_on_an_undeclared_queue_fails_the_workflow(h):
    """An actor that declares its queues: waiting on another name (a typo) would wait forever."""

    async def run(ctx):
        return await ctx.queue.next("wait", names=["aproval"])

    h.setup(wf=workflow(run=run, queues={"approval": queue()}))
    aid = h.start()
    h.drain()
    actor = h.actor(aid)
    assert actor.workflow_state == ports.FAILED
    assert actor.error["name"] == "QueueNotFoundError"
    assert "aproval" in actor.error["message"]


@pytest.mark.parametrize("duration", [-5, 0, timedelta(seconds=-30), -0.001])
def test_a_negative_or_zero_sleep_is_a_deadline_already_passed(h, duration):
    """``sleep(name, s)`` is ``sleep_until(name, now + s)``: a computed wait that came out negative or zero
    is recorded with its past deadline, completes at once, and the steps after it run."""
    ran = []

    async def run(ctx):
        await ctx.step("before", lambda s: ran.append("before"))
        await ctx.sleep("wait-a-bit", duration)
        return await ctx.step("after", lambda s: ran.append("after") or "done")

    h.setup(wf=workflow(run=run))
    aid = h.start()
    started = h.runtime.store.now()
    h.run(aid)  # one run: nothing to wait for
    actor = h.actor(aid)
    assert actor.workflow_state == ports.COMPLETED and actor.output == "done"
    assert ran == ["before", "after"]
    sleep = h.history(aid)["wait-a-bit"]
    assert sleep.kind == "sleep" and sleep.status == ports.ENTRY_COMPLETED
    assert sleep.data["state"] == "completed"
    seconds = duration.total_seconds() if isinstance(duration, timedelta) else duration
    assert sleep.data["deadline"] <= started + timedelta(seconds=max(seconds, 0) + 5)
    if seconds < 0:
        assert sleep.data["deadline"] < h.runtime.store.now()


def test_a_negative_sleep_replays_as_recorded(h):
    """Replaying the whole run again (history kept up to a later step) re-reads the recorded past deadline:
    the history of the sleep is identical, and the dry replay of ``rivet check`` passes."""
    from rivet_workflows.engine.operate import dry_run, repairs

    async def run(ctx):
        await ctx.sleep("wait-a-bit", -5)
        await ctx.step("charge", lambda s: "charged")
        return await ctx.step("ship", lambda s: "shipped")

    h.setup(wf=workflow(run=run))
    aid = h.start()
    h.drain()
    before = h.history(aid)["wait-a-bit"]
    assert h.actor(aid).output == "shipped"
    check = dry_run.check_actor(h.runtime, h.actor(aid), as_state=ports.SLEEPING)
    assert check.outcome == dry_run.OK
    repairs.replay(h.runtime, aid, "ship")  # the sleep is replayed, not run again
    h.drain()
    after = h.history(aid)["wait-a-bit"]
    assert h.actor(aid).output == "shipped"
    assert (after.data, after.status, after.created_at, after.completed_at) == (
        before.data,
        before.status,
        before.created_at,
        before.completed_at,
    )


@pytest.mark.parametrize("duration", [float("nan"), float("inf"), float("-inf"), 1e300])
def test_a_sleep_of_nan_or_infinity_fails_the_workflow_naming_the_sleep(h, duration):
    async def run(ctx):
        await ctx.sleep("wait-a-bit", duration)
        return "never"

    h.setup(wf=workflow(run=run))
    aid = h.start()
    h.drain()
    actor = h.actor(aid)
    assert actor.workflow_state == ports.FAILED
    assert actor.error["name"].endswith("CriticalError")
    assert "wait-a-bit" in actor.error["message"]
    assert "wait-a-bit" not in h.history(aid)  # refused at the call: nothing recorded


def test_a_queue_wait_with_a_negative_timeout_takes_what_is_there_or_times_out_at_once(h):
    async def run(ctx):
        first = await ctx.queue.next_batch("poll", names=["jobs"], timeout=-1)
        second = await ctx.queue.next_batch("poll-again", names=["jobs"], timeout=timedelta(seconds=-1))
        return [m.body for m in first], [m.body for m in second]

    h.setup(wf=workflow(run=run, queues={"jobs": queue()}))
    aid = h.start()
    h.send(aid, "jobs", "j1")
    h.run(aid)
    actor = h.actor(aid)
    assert actor.workflow_state == ports.COMPLETED
    assert actor.output == (["j1"], [])
    assert h.history(aid)["poll-again:deadline"].data["state"] == "completed"
