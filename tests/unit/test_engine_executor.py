"""Unit tests of the executor: leases, fencing, heartbeat, drain (on MemoryStore)."""

from __future__ import annotations

import time

from rivet_workflows.engine.model import ports
from rivet_workflows.engine.model.definitions import setup, workflow
from rivet_workflows.engine.runtime import executor
from rivet_workflows.testing import ManualClock, make_runtime


def _start(runtime, name="wf", key="k"):
    return runtime.client()[name].get_or_create(key).actor_id


def test_a_fenced_executor_stops_without_writing():
    clock = ManualClock()
    holder = {}

    def body(step):
        # another executor takes over after the lease expired (this one looked dead)
        clock.advance(runtime.settings.lease_seconds + 1)
        holder["token"] = runtime.store.claim(holder["aid"], "other", runtime.settings.lease_seconds)
        return "late"

    async def run(ctx):
        value = await ctx.step("s", body)
        await ctx.step("after", lambda s: "never")
        return value

    runtime = make_runtime(setup(use={"wf": workflow(run=run)}), clock=clock)
    holder["aid"] = aid = _start(runtime)
    summary = executor.run_actor(runtime, aid)
    assert holder["token"] is not None
    assert summary.workflow_state is None
    history = {e.key: e for e in runtime.store.load_history(aid)}
    assert set(history) == {"s"}
    assert history["s"].status == ports.ENTRY_RUNNING and "output" not in history["s"].data
    assert runtime.store.get_actor(aid).workflow_state == ports.RUNNING


def test_held_lease_is_not_run_twice():
    async def run(ctx):
        return 1

    runtime = make_runtime(setup(use={"wf": workflow(run=run)}))
    aid = _start(runtime)
    assert runtime.store.claim(aid, "someone", 30) is not None
    assert executor.run_actor(runtime, aid).ran is False
    assert runtime.store.get_actor(aid).workflow_state == ports.PENDING


def test_heartbeat_keeps_the_lease_during_a_long_step():
    claims = []

    def body(step):
        deadline = time.monotonic() + 0.6
        while time.monotonic() < deadline:
            claims.append(runtime.store.claim(holder[0], "thief", 0.3))
            time.sleep(0.05)
        return "done"

    async def run(ctx):
        return await ctx.step("long", body)

    runtime = make_runtime(setup(use={"wf": workflow(run=run)}), lease_seconds=0.3)
    holder = [_start(runtime)]
    executor.run_actor(runtime, holder[0])
    assert runtime.store.get_actor(holder[0]).output == "done"
    assert claims and all(c is None for c in claims)


def test_drain_returns_by_its_timeout_and_reports_waiting_actors():
    async def run(ctx):
        await ctx.step("a", lambda s: 1)
        await ctx.sleep("long", 60)

    runtime = make_runtime(setup(use={"wf": workflow(run=run)}))
    aid = _start(runtime)
    started = time.monotonic()
    summary = executor.drain(runtime, timeout=0.3)
    assert time.monotonic() - started < 5
    assert summary.actors_run == 1 and summary.steps_executed == 1
    assert summary.still_waiting == [aid]


def test_drain_follows_short_deadlines_to_completion():
    async def run(ctx):
        await ctx.sleep("a", 1.5)  # above the live threshold: a durable sleep drain waits out
        return "done"

    runtime = make_runtime(setup(use={"wf": workflow(run=run)}))
    aid = _start(runtime)
    summary = executor.drain(runtime, timeout=5)
    assert runtime.store.get_actor(aid).output == "done"
    assert summary.still_waiting == []


def test_finished_actor_is_not_rerun():
    calls = []

    async def run(ctx):
        calls.append(1)
        return 1

    runtime = make_runtime(setup(use={"wf": workflow(run=run)}))
    aid = _start(runtime)
    executor.drain(runtime)
    executor.run_actor(runtime, aid)
    assert calls == [1]


def test_sequential_steps_cost_one_commit_each():
    async def run(ctx):
        total = 0
        for i in range(10):
            total += await ctx.step(f"s{i}", lambda s, i=i: i)
        return total

    runtime = make_runtime(setup(use={"wf": workflow(run=run)}))
    aid = _start(runtime)
    commits = []
    original = runtime.store.commit

    def counting(actor_id, token, commit):
        commits.append(commit)
        return original(actor_id, token, commit)

    runtime.store.commit = counting
    executor.drain(runtime)
    assert runtime.store.get_actor(aid).output == 45
    assert len(commits) <= 11  # one per step plus the final commit


def test_step_that_kills_its_worker_every_time_ends_exhausted():
    clock = ManualClock()
    calls = []
    events = []

    def body(step):
        calls.append(step.attempt)
        raise KeyboardInterrupt  # stands in for the worker process dying mid-step

    async def run(ctx):
        return await ctx.step("deadly", body, max_retries=2)

    runtime = make_runtime(
        setup(use={"wf": workflow(run=run, on_error=lambda c, e: events.append(e))}), clock=clock
    )
    aid = _start(runtime)
    for _ in range(5):
        try:
            executor.run_actor(runtime, aid)
        except KeyboardInterrupt:
            pass
        clock.advance(runtime.settings.lease_seconds + 1)
    actor = runtime.store.get_actor(aid)
    assert actor.workflow_state == ports.FAILED and actor.error["name"] == "StepExhaustedError"
    assert calls == [1, 2, 3]
    assert len(events) == 1 and events[0]["step"]["error"]["name"] == "WorkerLostError"
