"""Warm queue waits: a worker's run that reaches a queue wait with no message keeps its lease for
``warm_wait`` seconds and listens (PostgreSQL LISTEN/NOTIFY); a message sent in that window is received
once by the same run, one sent after it is received through the normal wake-up. (The store member itself,
``wait_for_messages``, is checked on every store by tests/port/test_store_conformance.py.)"""

from __future__ import annotations

import threading
import time
from datetime import UTC, datetime, timedelta

import pytest
from django.db import connection, connections

from rivet_workflows import models
from rivet_workflows.engine.model import ports
from rivet_workflows.engine.model.definitions import actor, queue, setup, workflow
from rivet_workflows.engine.runtime import executor

pytestmark = pytest.mark.django_db(transaction=True)

needs_pg = pytest.mark.skipif(
    connection.vendor != "postgresql", reason="warm waits listen with PostgreSQL LISTEN/NOTIFY"
)


async def two_messages(ctx):
    first = await ctx.queue.next("first", names=["inbox"])
    await ctx.step("got-first", lambda step: step.state["got"].append(first.body))
    second = await ctx.queue.next("second", names=["inbox"])
    await ctx.step("got-second", lambda step: step.state["got"].append(second.body))
    return "done"


REGISTRY = setup(
    use={"pair": actor(state={"got": []}, queues={"inbox": queue()}, run=workflow(two_messages))}
)


def _run_in_thread(runtime, actor_id, warm_wait):
    """Start ``executor.run_actor(..., warm_wait=)`` on a thread (as a Celery task would run it); returns
    (thread, box) where ``box["summary"]`` is the RunSummary once the thread is done."""
    box = {}

    def target():
        try:
            live_until = datetime.now(UTC) + timedelta(seconds=60)
            box["summary"] = executor.run_actor(runtime, actor_id, live_until=live_until, warm_wait=warm_wait)
        finally:
            connections.close_all()

    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    return thread, box


def _history_keys(actor_id):
    return sorted(models.HistoryEntry.objects.filter(actor_id=actor_id).values_list("key", flat=True))


@needs_pg
def test_messages_sent_during_the_warm_window_are_received_once_by_the_same_run(make_django_runtime):
    runtime = make_django_runtime(REGISTRY)
    handle = runtime.client().pair.create("k")
    runtime.dispatcher.woken.clear()  # the creation's wake-up
    thread, box = _run_in_thread(runtime, handle.actor_id, warm_wait=30.0)
    time.sleep(0.5)  # the run is listening at "first" by now (if not, it finds the message on its look)
    handle.send("inbox", 1)
    time.sleep(0.5)
    handle.send("inbox", 2)
    thread.join(60)
    assert not thread.is_alive()
    summary = box["summary"]
    assert summary.runs == 1  # both messages taken without releasing the actor
    assert summary.workflow_state == ports.COMPLETED
    assert handle.state() == {"got": [1, 2]}  # each step ran once, each message received once
    statuses = list(
        models.QueueMessage.objects.filter(actor_id=handle.actor_id).values_list("status", flat=True)
    )
    assert statuses == [ports.MESSAGE_RECEIVED, ports.MESSAGE_RECEIVED]
    assert runtime.dispatcher.woken == []  # no broker hint while a run held the lease


@needs_pg
def test_a_message_sent_after_the_window_is_received_through_the_normal_wake(make_django_runtime):
    runtime = make_django_runtime(REGISTRY)
    handle = runtime.client().pair.create("k")
    runtime.dispatcher.woken.clear()  # the creation's wake-up
    thread, box = _run_in_thread(runtime, handle.actor_id, warm_wait=0.2)
    thread.join(60)
    assert box["summary"].workflow_state == ports.SLEEPING  # the window passed: released, waiting
    record = runtime.store.get_actor(handle.actor_id)
    assert record.lease_owner is None and record.waiting_for == ["inbox"]

    handle.send("inbox", 1)
    assert runtime.dispatcher.woken == [handle.actor_id]  # the ordinary hint
    thread, box = _run_in_thread(runtime, handle.actor_id, warm_wait=0.2)
    thread.join(60)
    assert handle.state() == {"got": [1]}
    assert box["summary"].workflow_state == ports.SLEEPING  # at "second" now
    assert "first:0" in _history_keys(handle.actor_id)
