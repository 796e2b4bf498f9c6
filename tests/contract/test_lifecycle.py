"""ENGINE-SCENARIOS.md "Lifecycle" 2-3, actors around the workflow, and step/action serialisation."""

from __future__ import annotations

import threading
import time

import pytest

from rivet_workflows.engine.model import errors, ports
from rivet_workflows.engine.model.definitions import actor, workflow


def test_state_output_and_metadata_persist(h):
    async def run(ctx):
        await ctx.step("inc", lambda s: s.state.update(n=s.state["n"] + 1))
        return "out"

    h.setup(wf=workflow(run=run, state={"n": 1}))
    aid = h.start()
    h.drain()
    actor_row = h.actor(aid)
    assert actor_row.state == {"n": 2} and actor_row.output == "out"
    entry = h.history(aid)["inc"]
    assert entry.kind == "step" and entry.status == ports.ENTRY_COMPLETED and entry.attempts == 1
    assert entry.location == ["inc"] and entry.completed_at is not None and entry.last_attempt_at is not None


def test_errors_persist(h):
    async def run(ctx):
        raise RuntimeError("boom")

    h.setup(wf=workflow(run=run))
    aid = h.start()
    h.drain()
    row = h.actor(aid)
    assert row.workflow_state == ports.FAILED and row.error["message"] == "boom" and row.wake_at is None


def test_hooks_and_vars_around_the_run(h):
    calls = []

    def on_wake(c):
        calls.append("wake")
        c.vars["woken"] = True

    async def run(ctx):
        seen = await ctx.step("read", lambda s: s.vars["woken"])
        await ctx.sleep("nap", 60)
        return seen

    h.setup(
        wf=actor(vars={"woken": False}, on_wake=on_wake, on_sleep=lambda c: calls.append("sleep"), run=run)
    )
    aid = h.start()
    h.run(aid)
    assert calls == ["wake", "sleep"]
    assert h.history(aid)["read"].data["output"] is True


def test_action_during_a_step_is_serialised_with_it(h):
    step_started = threading.Event()

    def body(step):
        step_started.set()
        time.sleep(0.2)
        step.state["by_step"] = step.state.get("by_step", 0) + 1
        return None

    def bump(c):
        c.state["by_action"] = c.state.get("by_action", 0) + 1
        return c.state["by_action"]

    async def run(ctx):
        await ctx.step("slow", body)
        return "done"

    h.setup(wf=actor(state={}, actions={"bump": bump}, run=run))
    handle = h.runtime.client().wf.get_or_create("k")
    results = []
    t = threading.Thread(target=lambda: (step_started.wait(5), results.append(handle.bump())))
    t.start()
    h.drain()
    t.join(5)
    assert results == [1]
    assert h.actor(handle.actor_id).state == {"by_step": 1, "by_action": 1}


def test_step_broadcast_and_destroy(h):
    sent = []

    async def run(ctx):
        await ctx.step("tell", lambda s: s.broadcast("progress", 1, "x"))
        await ctx.step("bye", lambda s: s.destroy())

    h.setup(wf=workflow(run=run))
    h.runtime.broadcaster = lambda actor_id, name, args: sent.append((name, list(args)))
    aid = h.start()
    h.drain()
    assert sent == [("progress", [1, "x"])]
    assert h.runtime.store.find_actor("wf", ["k"]) is None
    assert aid


def test_on_error_hook_may_change_state_and_its_exceptions_are_swallowed(h):
    def hook(c, event):
        c.state["errors"] = c.state.get("errors", 0) + 1
        raise RuntimeError("hook is broken")

    async def run(ctx):
        await ctx.step("s", lambda s: (_ for _ in ()).throw(RuntimeError("x")), max_retries=0)

    h.setup(wf=workflow(run=run, on_error=hook, state={}))
    aid = h.start()
    h.drain()
    row = h.actor(aid)
    assert row.workflow_state == ports.FAILED and row.error["name"] == "StepExhaustedError"
    assert row.state == {"errors": 1}


def test_cancel_stops_a_sleeping_workflow_for_good(h):
    ran = []

    async def run(ctx):
        await ctx.queue.next("wait", "go")
        await ctx.step("after", lambda s: ran.append(1))

    h.setup(wf=workflow(run=run, actions={"ping": lambda c: "pong"}))
    handle = h.runtime.client().wf.get_or_create("k")
    h.drain()
    assert handle.cancel() is True
    actor = h.actor(handle.actor_id)
    assert actor.workflow_state == ports.CANCELLED and actor.wake_at is None and actor.lease_owner is None
    with pytest.raises(errors.WorkflowFinishedError):  # nothing would take it: refused, not stored
        handle.send("go", None)
    assert h.run(handle.actor_id).ran is False  # later runs refuse
    h.drain()
    assert ran == [] and h.actor(handle.actor_id).workflow_state == ports.CANCELLED
    assert handle.ping() == "pong"  # the actor lives on
    assert handle.cancel() is False  # already finished


def test_cancel_fences_out_a_run_in_progress(h):
    started, release, ran = threading.Event(), threading.Event(), []

    def slow(step):
        started.set()
        release.wait(5)
        return "slow"

    async def run(ctx):
        await ctx.step("slow", slow)
        await ctx.step("after", lambda s: ran.append("after"))

    h.setup(wf=workflow(run=run))
    handle = h.runtime.client().wf.get_or_create("k")
    worker = threading.Thread(target=h.run, args=(handle.actor_id,))
    worker.start()
    assert started.wait(5)
    assert handle.cancel() is True
    release.set()
    worker.join(10)
    actor = h.actor(handle.actor_id)
    assert actor.workflow_state == ports.CANCELLED and actor.wake_at is None
    assert ran == []  # the fenced run wrote nothing more and started no further step
    assert h.history(handle.actor_id)["slow"].status != ports.ENTRY_COMPLETED  # its outcome was refused


def test_a_paused_workflow_can_be_cancelled_and_never_runs_again(h):
    ran = []

    async def run(ctx):
        await ctx.sleep("nap", 3600)
        await ctx.step("after", lambda s: ran.append(1))

    h.setup(wf=workflow(run=run))
    handle = h.runtime.client().wf.get_or_create("k")
    h.drain()
    assert handle.pause("maintenance") is True
    assert handle.workflow_state() == ports.PAUSED
    assert handle.cancel("not needed any more") is True
    actor = h.actor(handle.actor_id)
    assert actor.workflow_state == ports.CANCELLED and actor.wake_at is None and actor.lease_owner is None
    assert [a.action for a in h.runtime.store.operator_actions(handle.actor_id)][:2] == ["cancel", "pause"]
    before = h.snapshot(handle.actor_id)
    assert handle.resume() is False  # the pause ended with the workflow: nothing to resume, nothing written
    assert handle.cancel() is False  # finished: nothing to do, nothing written
    assert h.snapshot(handle.actor_id) == before
    h.drain()
    assert ran == [] and handle.workflow_state() == ports.CANCELLED


def test_a_workflow_held_back_by_its_concurrency_limit_can_be_cancelled(h):
    from rivet_workflows.engine.model.definitions import Concurrency

    async def run(ctx):
        await ctx.sleep("nap", 3600)

    h.setup(wf=workflow(run=run, concurrency=Concurrency(limit=1)))
    client = h.runtime.client()
    first, second = client.wf.get_or_create("a"), client.wf.get_or_create("b")
    assert h.runtime.store.claim(first.actor_id, "a-running-worker", 60) is not None  # holds the one slot
    assert h.runtime.store.claim(second.actor_id, "w", 60) is None  # due, but over the limit
    assert second.cancel() is True
    assert second.workflow_state() == ports.CANCELLED


def test_a_paused_workflow_can_be_replayed_and_runs_once_resumed(h):
    ran = []

    async def run(ctx):
        await ctx.step("first", lambda s: ran.append("first"))
        await ctx.queue.next("wait", "go")

    h.setup(wf=workflow(run=run))
    handle = h.runtime.client().wf.get_or_create("k")
    h.drain()
    assert handle.pause() is True
    handle.replay("first")  # an operator's repair of what they paused
    h.drain()
    assert ran == ["first"] and handle.workflow_state() == ports.PAUSED  # still paused: nothing ran
    assert handle.resume() is True
    h.drain()
    assert ran == ["first", "first"] and handle.workflow_state() == ports.SLEEPING
