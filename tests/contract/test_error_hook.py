"""ENGINE-SEMANTICS.md section 8: the ``on_error`` hook's event shapes, and that no event repeats.

Step events fire once per failed attempt (the last one is the exhaustion), rollback events once per failed
handler attempt, and a workflow event for every failure not already reported: errors of the run function,
join and race errors, divergence. Wake-ups and worker restarts never repeat an event.
"""

from __future__ import annotations

import pytest

from rivet_workflows.engine.model import ports
from rivet_workflows.engine.model.definitions import workflow
from rivet_workflows.engine.model.errors import CriticalError

STEP_KEYS = {"workflow_id", "step_name", "attempt", "max_retries", "remaining_retries", "will_retry", "error"}
ERROR_KEYS = {"name", "message", "stack", "metadata"}


def _raise(exc):
    def body(step):
        raise exc

    return body


def _kinds(events):
    return [next(iter(e)) for e in events]


def _check_error(error):
    assert {"name", "message"} <= set(error) <= ERROR_KEYS
    assert all(v is not None for v in error.values())


def test_join_failure_reports_the_step_then_one_workflow_event(h):
    events = []

    async def run(ctx):
        await ctx.join(
            "fan",
            {
                "good": lambda c: c.step("ok", lambda s: 1),
                "bad": lambda c: c.step("charge", _raise(CriticalError("declined"))),
            },
        )

    h.setup(wf=workflow(run=run, on_error=lambda c, e: events.append(e)))
    aid = h.start()
    h.drain()
    h.drain()
    assert h.actor(aid).workflow_state == ports.FAILED
    assert _kinds(events) == ["step", "workflow"]
    step = events[0]["step"]
    assert set(step) == STEP_KEYS  # no retry_delay/retry_at when it will not retry
    assert step["step_name"] == "charge" and step["will_retry"] is False and step["workflow_id"] == aid
    workflow_event = events[1]["workflow"]
    assert set(workflow_event) == {"workflow_id", "error"} and workflow_event["workflow_id"] == aid
    _check_error(workflow_event["error"])
    assert workflow_event["error"]["name"] == "JoinError" and "bad" in workflow_event["error"]["message"]


def test_race_failure_reports_each_step_then_one_workflow_event(h):
    events = []

    async def run(ctx):
        await ctx.race(
            "r",
            [
                ("a", lambda c: c.step("a", _raise(CriticalError("a failed")))),
                ("b", lambda c: c.step("b", _raise(CriticalError("b failed")))),
            ],
        )

    h.setup(wf=workflow(run=run, on_error=lambda c, e: events.append(e)))
    aid = h.start()
    h.drain()
    assert _kinds(events) == ["step", "step", "workflow"]
    assert sorted(e["step"]["step_name"] for e in events[:2]) == ["a", "b"]
    assert events[2]["workflow"]["error"]["name"] == "RaceError"
    assert h.actor(aid).error["name"] == "RaceError"


def test_divergence_fires_a_workflow_event_and_runs_no_rollback(h):
    events = []
    undone = []

    async def v1(ctx):
        await ctx.rollback_checkpoint("cp")
        await ctx.step("reserve", lambda s: "r1", rollback=lambda s, out: undone.append(out))
        await ctx.step("validate-v1", lambda s: True)
        await ctx.queue.next("wait", "go")

    async def v2(ctx):
        await ctx.rollback_checkpoint("cp")
        await ctx.step("reserve", lambda s: "r1", rollback=lambda s, out: undone.append(out))
        await ctx.step("validate-v2", lambda s: True)  # renamed without ctx.removed("validate-v1", ...)
        await ctx.queue.next("wait", "go")

    h.setup(wf=workflow(run=v1, on_error=lambda c, e: events.append(e)))
    aid = h.start()
    h.run(aid)
    h.runtime.registry.get("wf").run = workflow(v2, on_error=lambda c, e: events.append(e))
    h.send(aid, "go", None)
    h.drain()
    actor = h.actor(aid)
    assert actor.workflow_state == ports.FAILED
    assert actor.error["name"] == "HistoryDivergedError"
    assert (
        "validate-v1" in actor.error["message"]
        and "ctx.removed('validate-v1', 'step')" in actor.error["message"]
    )
    assert _kinds(events) == ["workflow"] and events[0]["workflow"]["error"]["name"] == "HistoryDivergedError"
    assert undone == []  # divergence fails the workflow without rollback
    assert "validate-v2" not in h.history(aid)  # the new step never ran


def test_no_event_repeats_across_sleeps_and_wake_ups(h):
    events = []
    calls = []

    def flaky(step):
        calls.append(step.attempt)
        if step.attempt == 1:
            raise RuntimeError("Transient failure")
        return "ok"

    async def run(ctx):
        await ctx.step("flaky", flaky, retry_backoff_base=0.01)
        caught = await ctx.try_step("card", _raise(CriticalError("declined")))
        await ctx.queue.next("wait", "go")
        await ctx.sleep("nap", 0.05)
        raise ValueError(f"workflow failed after {caught.failure['kind']}")

    h.setup(wf=workflow(run=run, on_error=lambda c, e: events.append(e)))
    aid = h.start()
    h.run(aid)  # attempt 1 fails: sleeps for the backoff
    assert h.actor(aid).workflow_state == ports.SLEEPING
    h.drain()  # retried, the try_step fails (caught), then waits for "go"
    assert h.actor(aid).workflow_state == ports.SLEEPING
    for _ in range(3):  # wake-ups that find nothing new
        h.run(aid)
    h.send(aid, "go", None)
    h.drain()
    assert h.actor(aid).workflow_state == ports.FAILED
    assert calls == [1, 2]
    assert _kinds(events) == ["step", "step", "workflow"]
    assert events[0]["step"]["will_retry"] is True and events[0]["step"]["step_name"] == "flaky"
    assert events[1]["step"]["step_name"] == "card" and events[1]["step"]["will_retry"] is False
    assert events[2]["workflow"]["error"]["message"] == "workflow failed after critical"


def test_no_event_repeats_after_a_worker_restart(h):
    events = []
    crash = [True]

    def flaky(step):
        if step.attempt == 1:
            raise RuntimeError("Transient failure")
        return "ok"

    def dies_once(step):
        if crash[0]:
            crash[0] = False
            raise KeyboardInterrupt  # the worker process dies mid-step
        return "done"

    async def run(ctx):
        await ctx.step("flaky", flaky, retry_backoff_base=0.01)
        return await ctx.step("fragile", dies_once, retry_backoff_base=0.01)

    h.setup(wf=workflow(run=run, on_error=lambda c, e: events.append(e)))
    aid = h.start()
    with pytest.raises(KeyboardInterrupt):
        h.drain()
    h.restart(aid)
    h.drain()
    assert h.actor(aid).output == "done"
    # the interrupted attempt had no one to report it; the flaky step's event is not repeated by replays
    assert _kinds(events) == ["step"] and events[0]["step"]["step_name"] == "flaky"


def test_rollback_event_shape_and_a_handler_that_always_fails_ends_the_workflow(h):
    events = []
    calls = []

    def broken(step, out):
        calls.append("c2")
        raise RuntimeError("cannot release")

    async def run(ctx):
        await ctx.rollback_checkpoint("cp")
        await ctx.step("s1", lambda s: 1, rollback=lambda s, out: calls.append("c1"))
        await ctx.step("s2", lambda s: 2, rollback=broken, max_retries=1, retry_backoff_base=0.001)
        await ctx.step("s3", _raise(CriticalError("boom")))

    h.setup(wf=workflow(run=run, on_error=lambda c, e: events.append(e)))
    aid = h.start()
    h.drain()
    h.drain()
    actor = h.actor(aid)
    assert actor.workflow_state == ports.FAILED and actor.error["message"] == "boom"
    assert calls == ["c2", "c2", "c1"]  # bounded: max_retries + 1 attempts, then the next handler runs
    # the step's event reported the failure already: no workflow event repeats it
    assert _kinds(events) == ["step", "rollback", "rollback"]
    rollback = events[1]["rollback"]
    assert set(rollback) == {"workflow_id", "step_name", "error"}
    assert rollback["workflow_id"] == aid and rollback["step_name"] == "s2"
    _check_error(rollback["error"])
    assert rollback["error"]["name"] == "RuntimeError" and rollback["error"]["message"] == "cannot release"
    history = h.history(aid)
    assert history["s2"].rollback_error["message"] == "cannot release"
    assert history["s2"].rollback_completed_at is None
    assert history["s1"].rollback_completed_at is not None


def test_hook_may_enqueue_broadcast_and_change_state(h):
    sent = []

    async def hook(c, event):
        kind = next(iter(event))
        c.state["seen"] = [*c.state.get("seen", []), kind]
        c.broadcast("failure", kind)
        if kind == "step":
            c.queue.send("errors", event["step"]["step_name"])

    async def run(ctx):
        await ctx.try_step("card", _raise(CriticalError("declined")))
        message = await ctx.queue.next("read-error", "errors")
        raise ValueError(f"failed at {message.body}")

    h.setup(wf=workflow(run=run, on_error=hook, state={}))
    h.runtime.broadcaster = lambda actor_id, name, args: sent.append((name, list(args)))
    aid = h.start()
    h.drain()
    actor = h.actor(aid)
    assert actor.workflow_state == ports.FAILED and actor.error["message"] == "failed at card"
    assert actor.state == {"seen": ["step", "workflow"]}
    assert sent == [("failure", ["step"]), ("failure", ["workflow"])]


def test_hook_of_the_actor_form_fires_too(h):
    from rivet_workflows.engine.model.definitions import actor

    events = []

    async def run(ctx):
        raise RuntimeError("workflow failed")

    h.setup(wf=actor(state={}, run=workflow(run, on_error=lambda c, e: events.append(e))))
    aid = h.start()
    h.drain()
    assert events == [{"workflow": {"workflow_id": aid, "error": events[0]["workflow"]["error"]}}]
    assert events[0]["workflow"]["error"]["message"] == "workflow failed"


def test_destroyed_workflow_never_runs_again(h):
    ran = []

    async def run(ctx):
        await ctx.queue.next("wait", "go")
        await ctx.step("after", lambda s: ran.append(1))

    h.setup(wf=workflow(run=run))
    handle = h.runtime.client().wf.get_or_create("k")
    h.drain()
    handle.destroy()
    assert h.runtime.store.find_actor("wf", ["k"]) is None
    assert h.run(handle.actor_id).ran is False
    h.drain()
    assert ran == []
