"""Production controls in the engine (DESIGN.md section 12) on MemoryStore: concurrency, priority, workflow
timeouts, pause and resume. The claim rules themselves are in tests/port/test_flow_conformance.py; real
worker processes in tests/system/test_flow_cluster.py."""

from __future__ import annotations

import threading

import pytest

import rivet_workflows as rw
from rivet_workflows.engine.model import ports
from rivet_workflows.engine.runtime import executor
from rivet_workflows.testing import ManualClock, make_runtime


def test_the_controls_are_exported_and_validated():
    assert rw.Concurrency(2).limit == 2 and rw.RateLimit(3, 1.5).per == 1.5
    with pytest.raises(ValueError):
        rw.Concurrency(0)
    with pytest.raises(ValueError):
        rw.RateLimit(1, 0)
    with pytest.raises(ValueError):
        rw.workflow(run=lambda ctx: None, timeout=-1)
    definition = rw.workflow(run=lambda ctx: None, concurrency=3, priority=2, timeout=5)
    assert definition.concurrency == rw.Concurrency(3) and (definition.priority, definition.timeout) == (
        2,
        5.0,
    )
    assert issubclass(rw.WorkflowTimeoutError, rw.RivetWorkflowsError)


def test_the_concurrency_key_is_evaluated_once_at_creation_and_stored():
    calls = []

    def tenant(c):
        calls.append((c.key, c.state))
        return c.state["tenant"]

    async def run(ctx):
        return None

    job = rw.workflow(
        run=run, create_state=lambda input: {"tenant": input}, concurrency=rw.Concurrency(1, key=tenant)
    )
    runtime = make_runtime(rw.setup(use={"job": job}))
    handle = runtime.client().job.get_or_create("j1", "acme")
    runtime.client().job.get_or_create("j1", "ignored")  # exists: not evaluated again
    assert calls == [(["j1"], {"tenant": "acme"})]
    assert handle.record().concurrency_key == "acme"


def test_at_most_n_actors_of_a_type_run_at_once_and_a_freed_slot_runs_the_next():
    running, peak, lock = [0], [0], threading.Lock()
    gate = threading.Event()

    def body(step):
        with lock:
            running[0] += 1
            peak[0] = max(peak[0], running[0])
        gate.wait(2)
        with lock:
            running[0] -= 1
        return 1

    async def run(ctx):
        return await ctx.step("work", body)

    runtime = make_runtime(rw.setup(use={"job": rw.workflow(run=run, concurrency=2)}))
    ids = [runtime.client().job.get_or_create(f"j{i}").actor_id for i in range(5)]
    threads = [threading.Thread(target=executor.run_actor, args=(runtime, a)) for a in ids]
    for t in threads:
        t.start()
    gate.set()
    for t in threads:
        t.join(5)
    assert peak[0] <= 2
    dispatched = runtime.dispatcher.woken
    executor.drain(runtime, timeout=5)
    assert peak[0] <= 2
    assert all(runtime.store.get_actor(a).workflow_state == ports.COMPLETED for a in ids)
    assert len(dispatched) > len(ids)  # the releases dispatched the held-back actors (beyond the creates)


def test_priority_orders_the_claims_of_due_actors():
    order = []

    async def run(ctx):
        await ctx.step("s", lambda step: order.append(step.key if hasattr(step, "key") else None))

    def make(priority):
        async def run(ctx):
            await ctx.step("s", lambda step: order.append(priority))

        return rw.workflow(run=run, priority=priority)

    runtime = make_runtime(rw.setup(use={"low": make(0), "high": make(5)}))
    runtime.client().low.get_or_create("a")
    runtime.client().high.get_or_create("b")
    executor.drain(runtime, timeout=5, limit=1)
    assert order == [5, 0]


def test_a_callable_priority_is_evaluated_per_actor_at_creation():
    order = []

    async def run(ctx):
        await ctx.step("s", lambda step: order.append(ctx.input))

    wf = rw.workflow(
        run=run, create_state=lambda input: {"urgency": input}, priority=lambda c: c.state["urgency"]
    )
    runtime = make_runtime(rw.setup(use={"job": wf}))
    for urgency in (1, 9, -3, 4):
        runtime.client().job.create(f"job-{urgency}", input=urgency)
    assert sorted(r.priority for r in runtime.store.list_actors("job")) == [-3, 1, 4, 9]
    executor.drain(runtime, timeout=5, limit=1)
    assert order == [9, 4, 1, -3]
    with pytest.raises(TypeError, match="priority"):
        rw.workflow(run=run, priority="high")
    bad = rw.workflow(run=run, priority=lambda c: "high")
    with pytest.raises(TypeError, match="must return an int"):
        make_runtime(rw.setup(use={"bad": bad})).client().bad.create("x")


def test_a_workflow_timeout_fires_while_it_sleeps_runs_rollbacks_and_reports_on_error():
    clock = ManualClock()
    events, undone = [], []

    async def run(ctx):
        await ctx.rollback_checkpoint("cp")
        await ctx.step(
            name="charge", run=lambda step: "charged", rollback=lambda step, out: undone.append(out)
        )
        await ctx.sleep("nap", 3600)
        return "late"

    wf = rw.workflow(run=run, timeout=60, on_error=lambda c, event: events.append(event))
    runtime = make_runtime(rw.setup(use={"wf": wf}), clock=clock)
    handle = runtime.client().wf.get_or_create("k")
    executor.drain(runtime, timeout=0.5)
    record = handle.record()
    assert record.workflow_state == ports.SLEEPING
    assert record.wake_at == record.deadline_at  # woken by the deadline, not the sleep's end
    clock.advance(61)
    executor.drain(runtime, timeout=2)
    record = handle.record()
    assert record.workflow_state == ports.FAILED and record.error["name"] == "WorkflowTimeoutError"
    assert undone == ["charged"]
    assert [list(e) for e in events] == [["workflow"]]
    assert events[0]["workflow"]["error"]["name"] == "WorkflowTimeoutError"


def test_a_workflow_timeout_fires_while_it_waits_on_a_queue():
    clock = ManualClock()

    async def run(ctx):
        message = await ctx.queue.next("wait", names=["go"])
        return message.body

    runtime = make_runtime(rw.setup(use={"wf": rw.workflow(run=run, timeout=30)}), clock=clock)
    handle = runtime.client().wf.get_or_create("k")
    executor.drain(runtime, timeout=0.5)
    assert handle.record().wake_at == handle.record().deadline_at  # no queue timeout: the deadline wakes it
    clock.advance(31)
    executor.drain(runtime, timeout=2)
    assert handle.workflow_state() == ports.FAILED
    assert handle.record().error["name"] == "WorkflowTimeoutError"


def test_a_workflow_within_its_timeout_is_not_affected():
    async def run(ctx):
        await ctx.step("a", lambda step: 1)
        return "done"

    runtime = make_runtime(rw.setup(use={"wf": rw.workflow(run=run, timeout=60)}))
    handle = runtime.client().wf.get_or_create("k")
    executor.drain(runtime, timeout=2)
    assert handle.workflow_state() == ports.COMPLETED and handle.record().output == "done"


def test_pause_lets_the_running_step_finish_and_starts_no_new_step_until_resume():
    started, release = threading.Event(), threading.Event()
    ran = []

    def first(step):
        started.set()
        release.wait(5)
        ran.append("first")
        return 1

    async def run(ctx):
        await ctx.step("first", first)
        await ctx.step("second", lambda step: ran.append("second"))
        return "done"

    runtime = make_runtime(rw.setup(use={"wf": rw.workflow(run=run, queues=["q"])}))
    handle = runtime.client().wf.get_or_create("k")
    worker = threading.Thread(target=executor.run_actor, args=(runtime, handle.actor_id))
    worker.start()
    assert started.wait(5)
    assert handle.pause("deploy") is True and handle.pause() is False
    release.set()
    worker.join(5)
    assert ran == ["first"]  # the running step finished, the next did not start
    assert handle.workflow_state() == "paused" and handle.record().pause_reason == "deploy"
    handle.send("q", "kept while paused")
    assert executor.drain(runtime, timeout=0.3).actors_run == 0  # never claimed while paused
    assert runtime.store.pending_messages(handle.actor_id, None, 10)[0].body == "kept while paused"
    assert handle.resume() is True and handle.resume() is False
    executor.drain(runtime, timeout=2)
    assert ran == ["first", "second"] and handle.workflow_state() == ports.COMPLETED


def test_a_deadline_passing_while_paused_fires_once_after_resume():
    clock = ManualClock()
    events = []

    async def run(ctx):
        await ctx.sleep("nap", 10)
        return "woke"

    wf = rw.workflow(run=run, timeout=100, on_error=lambda c, e: events.append(e))
    runtime = make_runtime(rw.setup(use={"wf": wf}), clock=clock)
    handle = runtime.client().wf.get_or_create("k")
    executor.drain(runtime, timeout=0.3)
    assert handle.pause() is True
    clock.advance(200)  # the sleep's end and the timeout both pass while paused
    assert executor.drain(runtime, timeout=0.3).actors_run == 0
    assert handle.resume() is True
    executor.drain(runtime, timeout=2)
    assert handle.workflow_state() == ports.FAILED and len(events) == 1


def test_pause_of_a_finished_workflow_and_async_twins():
    async def run(ctx):
        return 1

    runtime = make_runtime(rw.setup(use={"wf": rw.workflow(run=run)}))
    handle = runtime.client().wf.get_or_create("k")
    executor.drain(runtime, timeout=2)
    assert handle.pause() is False and handle.resume() is False

    import asyncio

    assert asyncio.run(handle.apause()) is False and asyncio.run(handle.aresume()) is False
