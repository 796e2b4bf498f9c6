"""The engine side of warm queue waits, on the in-memory store with a scripted ``wait_for_messages``: a
message that arrives in the window is taken by the same run (once), an empty window releases the actor,
and runs without a warm-wait budget (drain) never ask the store to wait."""

from __future__ import annotations

import threading
from datetime import UTC, datetime, timedelta

from rivet_workflows.engine.model import ports
from rivet_workflows.engine.model.definitions import actor, queue, setup, workflow
from rivet_workflows.engine.runtime import executor
from rivet_workflows.testing import MemoryStore, drain, make_runtime


async def one_message(ctx):
    msg = await ctx.queue.next("wait", names=["inbox"])
    await ctx.step("got", lambda step: step.state["got"].append(msg.body))
    return "done"


REGISTRY = setup(use={"one": actor(state={"got": []}, queues={"inbox": queue()}, run=workflow(one_message))})


class ScriptedStore(MemoryStore):
    """A MemoryStore whose ``wait_for_messages`` records its calls and, when ``deliver`` is set, sends that
    body during the window (as a sender in another process would) and reports it."""

    def __init__(self, deliver=None):
        super().__init__()
        self.deliver = deliver
        self.waits: list[tuple[str, list[str], float]] = []

    def wait_for_messages(self, actor_id, names, timeout):
        self.waits.append((actor_id, list(names), timeout))
        if self.deliver is None:
            return False
        self.send(actor_id, "inbox", self.deliver)
        self.deliver = None
        return True


def _runtime(store):
    runtime = make_runtime(REGISTRY, store=store)
    handle = runtime.client().one.create("k")
    runtime.dispatcher.woken.clear()
    return runtime, handle


def _run(runtime, actor_id, warm_wait):
    live_until = datetime.now(UTC) + timedelta(seconds=30)
    return executor.run_actor(runtime, actor_id, live_until=live_until, warm_wait=warm_wait)


def test_a_message_arriving_in_the_warm_window_is_received_once_by_the_same_run():
    store = ScriptedStore(deliver="hello")
    runtime, handle = _runtime(store)
    summary = _run(runtime, handle.actor_id, warm_wait=0.25)
    assert summary.runs == 1 and summary.workflow_state == ports.COMPLETED
    assert handle.state() == {"got": ["hello"]}
    assert [(names, timeout) for _, names, timeout in store.waits] == [(["inbox"], 0.25)]
    assert store.pending_messages(handle.actor_id, None, 10) == []  # received, not left pending


def test_an_empty_window_releases_the_actor_and_a_later_send_wakes_it_as_usual():
    store = ScriptedStore()
    runtime, handle = _runtime(store)
    summary = _run(runtime, handle.actor_id, warm_wait=0.25)
    assert summary.workflow_state == ports.SLEEPING and len(store.waits) == 1
    assert store.get_actor(handle.actor_id).lease_owner is None
    handle.send("inbox", "later")
    assert runtime.dispatcher.woken == [handle.actor_id]
    drain(runtime, timeout=1)
    assert handle.state() == {"got": ["later"]}


def test_runs_without_a_warm_budget_never_wait_on_the_store():
    store = ScriptedStore(deliver="never")
    runtime, handle = _runtime(store)
    drain(runtime, timeout=1)
    assert store.waits == []
    assert store.get_actor(handle.actor_id).workflow_state == ports.SLEEPING


class ObservedStore(MemoryStore):
    """A MemoryStore that signals ``waiting`` when a run enters its (real) warm wait."""

    def __init__(self):
        super().__init__()
        self.waiting = threading.Event()

    def wait_for_messages(self, actor_id, names, timeout):
        self.waiting.set()
        return super().wait_for_messages(actor_id, names, timeout)


def test_a_warm_wait_on_the_memory_store_takes_a_message_sent_from_another_thread():
    """MemoryStore.wait_for_messages is a real wait on the store's condition variable: a run waiting warm
    takes a message another thread sends in the window, in the same run and without a dispatcher hint."""
    store = ObservedStore()
    runtime, handle = _runtime(store)
    box = {}
    runner = threading.Thread(
        target=lambda: box.update(summary=_run(runtime, handle.actor_id, warm_wait=30.0))
    )
    runner.start()
    assert store.waiting.wait(30)  # the run is in its warm wait, holding the lease
    handle.send("inbox", "hello")
    runner.join(30)
    assert not runner.is_alive()
    assert box["summary"].runs == 1 and box["summary"].workflow_state == ports.COMPLETED
    assert handle.state() == {"got": ["hello"]}
    assert runtime.dispatcher.woken == []  # the run held the lease: no hint


def test_a_warm_wait_on_the_memory_store_that_hears_nothing_releases_after_its_window():
    store = ObservedStore()
    runtime, handle = _runtime(store)
    summary = _run(runtime, handle.actor_id, warm_wait=0.05)
    assert store.waiting.is_set() and summary.workflow_state == ports.SLEEPING
    assert store.get_actor(handle.actor_id).lease_owner is None
