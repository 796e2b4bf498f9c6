"""Step timeouts cancel the body (async: its task; sync: ``step.cancelled``), a retry starts only after the
timed-out body returned (or was abandoned), and a lost lease cancels the body it guards (DESIGN.md
section 12, case C62)."""

from __future__ import annotations

import asyncio
import logging
import threading
import time

from rivet_workflows.engine.model import ports
from rivet_workflows.engine.model.definitions import setup, workflow
from rivet_workflows.engine.runtime import executor
from rivet_workflows.testing import make_runtime


def _runtime(run, **settings):
    return make_runtime(setup(use={"wf": workflow(run=run)}), **settings)


def test_async_body_is_cancelled_at_its_timeout():
    seen = []

    async def slow(step):
        try:
            await asyncio.sleep(5)
            seen.append("finished")
        except asyncio.CancelledError:
            seen.append("cancelled")
            raise

    async def run(ctx):
        return await ctx.step("slow", slow, timeout=0.05)

    runtime = _runtime(run)
    handle = runtime.client().wf.get_or_create("k")
    started = time.monotonic()
    executor.drain(runtime)
    assert time.monotonic() - started < 2
    assert seen == ["cancelled"]
    record = runtime.store.get_actor(handle.actor_id)
    assert record.workflow_state == ports.FAILED
    assert record.error["name"] == "CriticalError"


def test_sync_body_finds_step_cancelled_set_at_its_timeout():
    seen = []

    def slow(step):
        assert not step.cancelled.is_set()
        if step.cancelled.wait(5):
            seen.append("cancelled")
            return "late"
        seen.append("finished")

    async def run(ctx):
        return await ctx.step("slow", slow, timeout=0.05)

    runtime = _runtime(run)
    handle = runtime.client().wf.get_or_create("k")
    started = time.monotonic()
    executor.drain(runtime)
    assert time.monotonic() - started < 2
    assert seen == ["cancelled"]
    # the late return value is not the step's output: the attempt timed out
    assert runtime.store.get_actor(handle.actor_id).workflow_state == ports.FAILED


def _timed_attempts(ignore_for: float):
    """A sync body that ignores its cancellation for ``ignore_for`` seconds, recording when each attempt ran."""
    spans: list[tuple[int, float, float]] = []
    lock = threading.Lock()

    def body(step):
        began = time.monotonic()
        if step.attempt == 1:
            time.sleep(ignore_for)  # does not look at step.cancelled
        with lock:
            spans.append((step.attempt, began, time.monotonic()))
        return step.attempt

    async def run(ctx):
        return await ctx.step(
            "s", body, timeout=0.05, retry_on_timeout=True, max_retries=1, retry_backoff_base=0
        )

    return run, spans


def test_retry_of_a_timed_out_step_starts_only_after_its_body_returned():
    run, spans = _timed_attempts(ignore_for=0.6)
    runtime = _runtime(run)
    handle = runtime.client().wf.get_or_create("k")
    executor.drain(runtime)
    record = runtime.store.get_actor(handle.actor_id)
    assert record.workflow_state == ports.COMPLETED and record.output == 2
    by_attempt = {attempt: (began, ended) for attempt, began, ended in spans}
    assert sorted(by_attempt) == [1, 2]
    assert by_attempt[2][0] >= by_attempt[1][1]  # the attempts never overlapped


def test_a_body_that_does_not_return_is_abandoned_after_step_abandon_seconds(caplog):
    run, spans = _timed_attempts(ignore_for=1.0)
    runtime = _runtime(run, step_abandon_seconds=0.1)
    handle = runtime.client().wf.get_or_create("k")
    with caplog.at_level(logging.WARNING, logger="rivet_workflows"):
        executor.drain(runtime)
        time.sleep(1.1)  # let the abandoned thread end
    assert runtime.store.get_actor(handle.actor_id).output == 2
    by_attempt = {attempt: (began, ended) for attempt, began, ended in spans}
    assert by_attempt[2][0] < by_attempt[1][1]  # abandoned: the retry ran beside it, as documented
    assert any("abandoned" in r.getMessage() for r in caplog.records)


def test_a_lost_lease_sets_step_cancelled_on_the_running_sync_body():
    seen = []
    running = threading.Event()

    def body(step):
        running.set()
        started = time.monotonic()
        if step.cancelled.wait(5):
            seen.append(("cancelled", time.monotonic() - started))
            return None
        seen.append(("finished", time.monotonic() - started))

    async def run(ctx):
        return await ctx.step("s", body, timeout=10)

    runtime = _runtime(run, lease_seconds=0.3)
    store = runtime.store
    handle = runtime.client().wf.get_or_create("k")

    def steal():
        running.wait(5)
        record = store.get_actor(handle.actor_id)
        assert store.handoff(handle.actor_id, record.lease_token, "other-worker", 30) is not None

    thief = threading.Thread(target=steal)
    thief.start()
    executor.run_actor(runtime, handle.actor_id)
    thief.join()
    assert [what for what, _ in seen] == ["cancelled"]
    assert seen[0][1] < 2  # found at the next beat (lease/3), not after the body's 5 s
    record = store.get_actor(handle.actor_id)
    assert record.lease_owner == "other-worker"
    entry = {e.key: e for e in store.load_history(handle.actor_id)}["s"]
    assert entry.status == ports.ENTRY_RUNNING  # the evicted run wrote nothing more


def test_a_body_that_raises_while_cancelled_at_its_timeout_leaves_no_unretrieved_task_error(caplog):
    import gc

    async def stubborn(step):
        try:
            await asyncio.sleep(5)
        except asyncio.CancelledError:
            raise RuntimeError("cleanup failed") from None

    async def run(ctx):
        return await ctx.step("stubborn", stubborn, timeout=0.05, max_retries=0)

    runtime = _runtime(run)
    handle = runtime.client().wf.get_or_create("k")
    with caplog.at_level(logging.ERROR, logger="asyncio"):
        executor.drain(runtime)
        gc.collect()  # asyncio reports an unretrieved task exception when the task is collected
    assert runtime.store.get_actor(handle.actor_id).workflow_state == ports.FAILED
    assert not [r for r in caplog.records if "never retrieved" in r.getMessage()]
