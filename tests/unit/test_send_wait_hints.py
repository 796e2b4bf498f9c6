"""send(wait=True) says why it gave up: a workflow that ended without completing the message ends the wait
early; a timeout says whether the message was received (but not completed) or never received."""

from __future__ import annotations

import threading
import time

from rivet_workflows.engine.model.definitions import actor, queue, setup, workflow
from rivet_workflows.testing import drain, make_runtime


def _fail(step):
    raise ValueError("no")


async def failing(ctx):
    await ctx.queue.next("wait", names=["inbox"], completable=True)
    await ctx.step("boom", _fail, max_retries=0)


async def not_completable(ctx):
    await ctx.queue.next("wait", names=["inbox"])
    await ctx.sleep("long", 3600)


def _runtime(run):
    wf = actor(state={}, queues={"inbox": queue()}, run=workflow(run))
    return make_runtime(setup(use={"wf": wf}))


def _drain_in_background(runtime, seconds):
    stop = time.monotonic() + seconds

    def loop():
        while time.monotonic() < stop:
            drain(runtime, timeout=0.2)
            time.sleep(0.02)

    thread = threading.Thread(target=loop, daemon=True)
    thread.start()
    return thread


def test_a_workflow_that_fails_ends_the_wait_early_with_a_reason():
    runtime = _runtime(failing)
    handle = runtime.client().wf.get_or_create("k")
    drain(runtime, timeout=1)
    worker = _drain_in_background(runtime, 3)
    started = time.monotonic()
    result = handle.send("inbox", {"x": 1}, wait=True, timeout=30)
    assert time.monotonic() - started < 10  # not the 30 s timeout
    worker.join()
    assert result.status == "timed_out" and result.response is None
    assert "failed" in result.detail and "without completing" in result.detail


def test_a_timeout_says_the_message_was_received_but_not_completed():
    runtime = _runtime(not_completable)
    handle = runtime.client().wf.get_or_create("k")
    drain(runtime, timeout=1)
    worker = _drain_in_background(runtime, 1.5)
    result = handle.send("inbox", 1, wait=True, timeout=1.0)
    worker.join()
    assert result.status == "timed_out"
    assert "received the message but has not completed it" in result.detail
    assert "completable=True" in result.detail


def test_a_timeout_says_the_message_was_never_received():
    runtime = _runtime(not_completable)
    handle = runtime.client().wf.get_or_create("k")
    result = handle.send("inbox", 1, wait=True, timeout=0)  # nothing drains: never received
    assert result.status == "timed_out" and "not received the message" in result.detail
