"""The client and actor context on the MemoryStore (DESIGN.md section 2, "Client" and "Actor context")."""

from __future__ import annotations

import asyncio
import threading
from datetime import UTC, datetime, timedelta

import pytest

from rivet_workflows.engine.actor.actor_context import ActorContext
from rivet_workflows.engine.client.client import ActorAlreadyExistsError, SendResult
from rivet_workflows.engine.model import definitions as d
from rivet_workflows.engine.model import errors, ports
from rivet_workflows.engine.run.history import History
from rivet_workflows.engine.run.session import RunSession
from rivet_workflows.testing import ManualClock, make_runtime

T0 = datetime(2030, 1, 1, tzinfo=UTC)


async def run_forever(ctx):  # never driven in these tests: no executor runs
    return None


def build(**definitions):
    registry = d.setup(use=definitions)
    events = []
    runtime = make_runtime(
        registry,
        clock=ManualClock(T0),
        poll_interval=0.005,
        action_timeout=2.0,
        broadcaster=lambda actor_id, name, args: events.append((actor_id, name, args)),
    )
    return runtime, runtime.client(), events


def counter_actor(**extra):
    def increment(c, amount=1):
        c.state["count"] += amount
        return c.state["count"]

    actions = {"increment": increment, "get_state": lambda c: c.state}
    actions.update(extra.pop("actions", {}))
    return d.actor(state={"count": 0}, actions=actions, **extra)


def test_str_key_becomes_a_list_and_get_or_create_is_idempotent():
    runtime, client, _ = build(counter=counter_actor())
    first = client.counter.get_or_create("a")
    again = client["counter"].get_or_create(["a"])
    assert first.key == ["a"] and first == again
    assert client.counter.get(("a",)).actor_id == first.actor_id
    assert client.counter.get_for_id(first.actor_id).key == ["a"]
    other = client.counter.get_or_create(["a", "b"])
    assert other.key == ["a", "b"] and other != first


def test_create_get_and_unknown_types():
    runtime, client, _ = build(counter=counter_actor(), other=d.actor())
    client.counter.create("x")
    with pytest.raises(ActorAlreadyExistsError):
        client.counter.create("x")
    with pytest.raises(errors.ActorNotFoundError):
        client.counter.get("missing")
    other = client.other.get_or_create("y")
    with pytest.raises(errors.ActorNotFoundError):
        client.counter.get_for_id(other.actor_id)
    with pytest.raises(errors.ActorNotFoundError):
        client["nope"]
    with pytest.raises(AttributeError):
        client.nope  # noqa: B018


def test_actions_by_call_and_attribute_sugar():
    runtime, client, _ = build(counter=counter_actor())
    handle = client.counter.get_or_create("a")
    assert handle.call("increment", 5) == 5
    assert handle.increment() == 6
    assert handle.get_state() == {"count": 6}
    assert handle.state() == {"count": 6}
    with pytest.raises(errors.ActionNotFoundError):
        handle.call("missing")
    with pytest.raises(AttributeError):
        handle.missing  # noqa: B018


def test_action_result_is_a_copy():
    runtime, client, _ = build(counter=counter_actor())
    handle = client.counter.get_or_create("a")
    snapshot = handle.get_state()
    snapshot["count"] = 1000
    assert handle.get_state() == {"count": 0}


def test_failing_action_saves_no_state_change():
    def broken(c):
        c.state["count"] = 99
        raise ValueError("nope")

    runtime, client, _ = build(counter=counter_actor(actions={"broken": broken}))
    handle = client.counter.get_or_create("a")
    with pytest.raises(ValueError):
        handle.broken()
    assert handle.state() == {"count": 0}


def test_async_actions_and_async_twins():
    async def add_later(c, amount):
        await asyncio.sleep(0)
        await c.queue.asend("log", {"added": amount})
        c.state["count"] += amount
        return c.state["count"]

    async def run(ctx):  # a workflow that would read the log (a run-less actor's queue is refused)
        await ctx.queue.next("read", names=["log"])

    runtime, client, _ = build(counter=counter_actor(actions={"add_later": add_later}, run=d.workflow(run)))
    handle = client.counter.get_or_create("a")
    assert handle.add_later(3) == 3

    async def main():
        h = await client.counter.aget_or_create("a")
        value = await h.acall("add_later", 4)
        return value, await h.astate()

    assert asyncio.run(main()) == (7, {"count": 7})
    logged = runtime.store.pending_messages(handle.actor_id, ["log"], 10)
    assert [m.body for m in logged] == [{"added": 3}, {"added": 4}]


def test_create_order_state_then_on_create_then_due():
    seen = []

    def on_create(c, input):
        seen.append(("on_create", dict(c.state), input))
        c.state["created_with"] = input["amount"]

    definition = d.workflow(
        run=run_forever, create_state=lambda input: {"amount": input["amount"]}, on_create=on_create
    )
    runtime, client, _ = build(pay=definition)
    handle = client.pay.get_or_create("o1", input={"amount": 5})
    assert seen == [("on_create", {"amount": 5}, {"amount": 5})]
    record = handle.record()
    assert record.state == {"amount": 5, "created_with": 5}
    assert record.input == {"amount": 5}
    assert record.wake_at == T0 and record.lease_owner is None  # due now, not leased
    assert runtime.dispatcher.woken == [handle.actor_id]
    client.pay.get_or_create("o1", input={"amount": 6})  # existing: no second on_create, no new wake
    assert len(seen) == 1 and runtime.dispatcher.woken == [handle.actor_id]


def test_plain_actor_is_not_made_due():
    runtime, client, _ = build(counter=counter_actor(on_create=lambda c: None))
    handle = client.counter.get_or_create("a")
    assert handle.record().wake_at is None
    assert runtime.dispatcher.woken == []


def test_declared_queues_reject_unknown_names():
    runtime, client, _ = build(
        w=d.workflow(run=run_forever, queues={"jobs": d.queue()}),
        free=d.workflow(run=run_forever),
        runless=d.actor(),
    )
    handle = client.w.get_or_create("a")
    with pytest.raises(errors.QueueNotFoundError):
        handle.send("other", 1)
    assert handle.send("jobs", {"n": 1}) is None
    client.free.get_or_create("b").send("anything", 1)  # nothing declared: any name
    with pytest.raises(errors.NoWorkflowError):  # no workflow would ever receive it
        client.runless.get_or_create("c").send("anything", 1)


def test_send_wakes_a_workflow_waiting_on_that_queue():
    runtime, client, _ = build(w=d.workflow(run=run_forever))
    handle = client.w.get_or_create("a")
    store = runtime.store
    token = store.claim(handle.actor_id, "executor", 30)
    store.commit(handle.actor_id, token, ports.Commit(waiting_for=["approval"], wake_at=None, release=True))
    runtime.dispatcher.woken.clear()
    handle.send("unrelated", 1)
    assert runtime.dispatcher.woken == []
    handle.send("approval", {"ok": True})
    assert runtime.dispatcher.woken == [handle.actor_id]


def test_send_wait_returns_the_response_or_times_out():
    runtime, client, _ = build(w=d.workflow(run=run_forever))
    handle = client.w.get_or_create("a")
    store = runtime.store

    def responder():
        for _ in range(400):
            pending = store.pending_messages(handle.actor_id, ["rpc"], 1)
            if pending:
                store.complete_message(pending[0].id, {"answer": pending[0].body["q"] * 2})
                return
            threading.Event().wait(0.005)

    thread = threading.Thread(target=responder)
    thread.start()
    result = handle.send("rpc", {"q": 21}, wait=True, timeout=5)
    thread.join()
    assert result == SendResult("completed", {"answer": 42})
    assert handle.send("rpc", {"q": 1}, wait=True, timeout=0.05) == SendResult("timed_out", None)
    assert (
        asyncio.run(handle.asend("rpc", {"q": 1}, wait=True, timeout=timedelta(seconds=0.02))).status
        == "timed_out"
    )


class FakeTime:
    """``time`` for the client module: ``sleep`` moves ``monotonic`` on, and is recorded."""

    def __init__(self):
        self.now = 1000.0
        self.sleeps = []

    def monotonic(self):
        return self.now

    def sleep(self, seconds):
        self.sleeps.append(round(seconds, 6))
        self.now += seconds


def fake_pauses(runtime, monkeypatch, fake, on_pause=None):
    """A store that cannot notify senders (its ``watch_sends`` hands out the polling ``SendWatch``), on
    ``fake`` time: each pause is recorded as a sleep; ``on_pause()`` runs during it (e.g. the workflow
    completing the message)."""
    from rivet_workflows.engine.model import watches

    class FakePolling(watches.SendWatch):
        def wait(self, timeout):
            fake.sleep(timeout)
            if on_pause is not None:
                on_pause()
            return False

        async def wait_async(self, timeout):
            return self.wait(timeout)

    monkeypatch.setattr(runtime.store, "watch_sends", lambda actor_id: FakePolling())


def counting_store(runtime, monkeypatch):
    reads = {"get_message": 0, "get_actor": 0}
    for name in reads:
        original = getattr(runtime.store, name)

        def counted(*args, _name=name, _original=original, **kwargs):
            reads[_name] += 1
            return _original(*args, **kwargs)

        monkeypatch.setattr(runtime.store, name, counted)
    return reads


def test_a_long_send_wait_backs_off_and_checks_once_more_at_the_deadline(monkeypatch):
    """C55: the waiting send polled every poll_interval for the whole timeout (~54 reads/s); now the
    pauses double from poll_interval to MAX_SEND_POLL_SECONDS and the last one ends at the deadline."""
    from rivet_workflows.engine.client import sending as client_module

    runtime, client, _ = build(w=d.workflow(run=run_forever))
    runtime.settings.poll_interval = 0.02
    handle = client.w.get_or_create("a")
    fake = FakeTime()
    monkeypatch.setattr(client_module, "time", fake)
    fake_pauses(runtime, monkeypatch, fake)
    reads = counting_store(runtime, monkeypatch)
    start = fake.now
    result = handle.send("rpc", 1, wait=True, timeout=30)
    assert result.status == "timed_out" and "not received" in result.detail
    assert fake.sleeps[:6] == [0.02, 0.04, 0.08, 0.16, 0.32, 0.5]
    assert set(fake.sleeps[6:-1]) == {0.5} and 0 < fake.sleeps[-1] <= 0.5
    assert fake.now == pytest.approx(start + 30)  # the last check is at the deadline, not before or after
    assert reads["get_message"] == len(fake.sleeps) <= 30 / 0.5 + 8  # was 30 / 0.02 = 1500
    assert reads["get_actor"] <= reads["get_message"] + 1  # the ended check: first, then every 0.25 s


def test_the_async_send_wait_backs_off_the_same_way(monkeypatch):
    from rivet_workflows.engine.client import sending as client_module

    runtime, client, _ = build(w=d.workflow(run=run_forever))
    runtime.settings.poll_interval = 0.02
    handle = client.w.get_or_create("a")
    fake = FakeTime()
    monkeypatch.setattr(client_module, "time", fake)
    fake_pauses(runtime, monkeypatch, fake)
    result = asyncio.run(handle.asend("rpc", 1, wait=True, timeout=10))
    assert result.status == "timed_out"
    assert fake.sleeps[:6] == [0.02, 0.04, 0.08, 0.16, 0.32, 0.5] and max(fake.sleeps) == 0.5
    assert len(fake.sleeps) <= 10 / 0.5 + 8


def test_a_send_wait_sees_a_quick_reply_after_a_short_pause(monkeypatch):
    """The backoff starts at poll_interval: a reply within a few polls is seen within those polls."""
    from rivet_workflows.engine.client import sending as client_module

    runtime, client, _ = build(w=d.workflow(run=run_forever))
    runtime.settings.poll_interval = 0.02
    handle = client.w.get_or_create("a")
    fake = FakeTime()

    def reply():
        if len(fake.sleeps) == 3:  # the workflow completes the message during the third pause
            (message,) = runtime.store.pending_messages(handle.actor_id, ["rpc"], 1)
            runtime.store.complete_message(message.id, "done")

    monkeypatch.setattr(client_module, "time", fake)
    fake_pauses(runtime, monkeypatch, fake, reply)
    assert handle.send("rpc", 1, wait=True, timeout=30) == SendResult("completed", "done")
    assert fake.sleeps == [0.02, 0.04, 0.08]


def test_oversized_or_unserializable_payloads_are_rejected():
    runtime, client, _ = build(w=d.workflow(run=run_forever))
    runtime.settings.max_payload_bytes = 100
    handle = client.w.get_or_create("a")
    with pytest.raises(errors.PayloadTooLargeError):
        handle.send("q", "x" * 200)
    with pytest.raises(errors.SerializationError):
        handle.send("q", object())
    assert runtime.store.pending_messages(handle.actor_id, None, 10) == []


def test_actor_context_broadcast_queue_and_vars():
    woke = []

    def on_wake(c):
        woke.append(c.actor_id)
        c.vars["conn"] = "open"

    def act(c):
        c.broadcast("changed", {"at": T0}, 2)
        c.queue.send("jobs", {"from": c.name, "key": c.key})
        return c.vars["conn"]

    definition = d.actor(
        state={}, vars={"conn": None}, on_wake=on_wake, actions={"act": act}, run=d.workflow(run_forever)
    )
    runtime, client, events = build(a=definition)
    handle = client.a.get_or_create("k")
    assert handle.act() == "open"
    assert handle.act() == "open"
    assert woke == [handle.actor_id]  # vars are built and on_wake runs once per process
    assert events[0][:2] == (handle.actor_id, "changed")
    assert events[0][2][1] == 2  # args arrive as JSON
    bodies = [m.body for m in runtime.store.pending_messages(handle.actor_id, ["jobs"], 10)]
    assert bodies == [{"from": "a", "key": ["k"]}] * 2


def test_destroy_runs_on_destroy_and_removes_the_actor():
    destroyed = []
    definition = counter_actor(on_destroy=lambda c: destroyed.append(c.state["count"]))
    runtime, client, _ = build(counter=definition)
    handle = client.counter.get_or_create("a")
    handle.increment()
    handle.destroy()
    assert destroyed == [1]
    with pytest.raises(errors.ActorNotFoundError):
        handle.get_state()
    assert client.counter.get_or_create("a").get_state() == {"count": 0}  # a new actor


def test_action_can_destroy_its_actor():
    runtime, client, _ = build(counter=counter_actor(actions={"bye": lambda c: c.destroy()}))
    handle = client.counter.get_or_create("a")
    handle.bye()
    with pytest.raises(errors.ActorNotFoundError):
        client.counter.get("a")


async def run_load_charge(ctx):  # the code the history below was recorded by (recover checks it)
    await ctx.step("load", lambda s: 1)
    await ctx.step("charge", lambda s: 2)


def test_recover_restarts_a_failed_workflow():
    runtime, client, _ = build(w=d.workflow(run=run_load_charge))
    handle = client.w.get_or_create("a")
    store = runtime.store
    assert handle.recover() is False  # not failed
    token = store.claim(handle.actor_id, "executor", 30)
    bad = ports.EntryRecord(
        key="charge",
        location=["charge"],
        kind="step",
        status=ports.ENTRY_EXHAUSTED,
        attempts=4,
        data={"error": {"message": "x"}},
        error={"name": "ValueError", "message": "x"},
    )
    ok = ports.EntryRecord(
        key="load", location=["load"], kind="step", status=ports.ENTRY_COMPLETED, data={"output": 1}
    )
    store.commit(
        handle.actor_id,
        token,
        ports.Commit(
            upserts=[ok, bad], workflow_state=ports.FAILED, error={"name": "StepExhaustedError"}, release=True
        ),
    )
    runtime.dispatcher.woken.clear()
    assert handle.recover() is True
    history = {e.key: e for e in store.load_history(handle.actor_id)}
    assert history["charge"].status == ports.ENTRY_PENDING and history["charge"].attempts == 0
    assert history["charge"].error is None and "error" not in history["charge"].data
    assert history["load"].status == ports.ENTRY_COMPLETED
    record = handle.record()
    assert record.workflow_state == ports.SLEEPING and record.error is None and record.wake_at == T0
    assert runtime.dispatcher.woken == [handle.actor_id]


def test_actor_context_for_run_uses_the_session():
    runtime, client, _ = build(w=d.workflow(run=run_forever, queues=["jobs"]))
    handle = client.w.get_or_create("a")
    record = handle.record()
    record.state = {"x": 1}
    session = RunSession(runtime, record, runtime.registry.get("w"), 0, History([]))
    session.vars = {"v": 1}
    c = ActorContext.for_run(session)
    c.state["x"] = 2
    c.state = {"y": 3}
    c.queue.send("jobs", {"n": 1})
    c.destroy()
    assert session.state == {"y": 3} and session.state_changed
    assert c.vars == {"v": 1} and c.key == ["a"] and c.name == "w"
    assert session.writes.take().outbox == [(handle.actor_id, "jobs", {"n": 1}, False)]
    assert session.destroy_requested
    assert runtime.store.pending_messages(handle.actor_id, None, 10) == []  # rides in the next commit


def test_two_threads_incrementing_lose_no_update():
    runtime, client, _ = build(counter=counter_actor())
    client.counter.get_or_create("shared")

    def hammer():
        handle = client.counter.get("shared")
        for _ in range(200):
            handle.increment()

    threads = [threading.Thread(target=hammer) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert client.counter.get("shared").get_state() == {"count": 400}


def test_action_waits_for_a_running_step_and_loses_no_update():
    runtime, client, _ = build(counter=counter_actor())
    handle = client.counter.get_or_create("a")
    store = runtime.store
    token = store.claim(handle.actor_id, "executor", 30)
    locked = store.commit(handle.actor_id, token, ports.Commit(step_lock_until=T0 + timedelta(seconds=30)))
    results = []
    caller = threading.Thread(target=lambda: results.append(handle.increment()))
    caller.start()
    caller.join(0.1)
    assert caller.is_alive()
    step_state = locked.state
    step_state["count"] += 10
    store.commit(handle.actor_id, token, ports.Commit(state=step_state, step_lock_until=None))
    caller.join(5)
    assert results == [11] and handle.state() == {"count": 11}


def test_handles_copy_and_compare_without_recursion():
    import copy

    runtime, client, _ = build(counter=counter_actor())
    handle = client.counter.get_or_create("a")
    assert copy.copy(handle) == handle
    assert not hasattr(client, "__wrapped__")


def test_a_send_wait_that_finds_the_workflow_finished_reads_the_message_again(monkeypatch):
    """The message is read before the workflow state: when the commit that completed the message also
    finished the workflow in between, the send reports the response, not "completed without completing"."""
    import dataclasses

    from rivet_workflows.engine.client import sending as client_module

    runtime, client, _ = build(w=d.workflow(run=run_forever))
    runtime.settings.poll_interval = 0.02
    handle = client.w.get_or_create("a")
    fake = FakeTime()
    monkeypatch.setattr(client_module, "time", fake)
    fake_pauses(runtime, monkeypatch, fake)
    get_actor = runtime.store.get_actor

    def finished_meanwhile(actor_id):
        record = get_actor(actor_id)
        (message,) = runtime.store.pending_messages(actor_id, ["rpc"], 1)
        runtime.store.complete_message(message.id, "done")  # the workflow's last commit lands now
        return dataclasses.replace(record, workflow_state=ports.COMPLETED)

    monkeypatch.setattr(runtime.store, "get_actor", finished_meanwhile)
    assert handle.send("rpc", 1, wait=True, timeout=30) == SendResult("completed", "done")
