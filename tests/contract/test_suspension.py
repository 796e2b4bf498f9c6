"""DESIGN.md section 16: a code error in workflow code suspends the run instead of failing (and compensating) it;
failure types fail it as the spec says; a suspended run is retried by an operator or by a new code version."""

from __future__ import annotations

from rivet_workflows import WorkflowFailure
from rivet_workflows.engine.model import ports
from rivet_workflows.engine.model.definitions import workflow
from rivet_workflows.engine.runtime import executor
from rivet_workflows.engine.runtime.runtime import Settings

#: the default failure types (``WORKFLOW_FAILURE_TYPES``): only WorkflowFailure fails, code errors suspend
DEFAULT = Settings().workflow_failure_types


def _order_workflow(ran, undone, fixed):
    """An order workflow with compensations whose code after two steps has a typo until ``fixed["on"]``."""

    async def run(ctx):
        await ctx.rollback_checkpoint("cp")
        await ctx.step(
            "reserve", lambda s: ran.append("reserve") or "r1", rollback=lambda s, o: undone.append(o)
        )
        await ctx.step(
            "charge", lambda s: ran.append("charge") or "c1", rollback=lambda s, o: undone.append(o)
        )
        if not fixed["on"]:
            ctx.input.get("sku")  # the typo: no input, so ctx.input is None -> AttributeError
        await ctx.step("ship", lambda s: ran.append("ship") or "s1")
        return "done"

    return run


def test_a_code_error_suspends_the_run_without_running_compensations(h):
    ran, undone, events, fixed = [], [], [], {"on": False}
    h.setup(
        failure_types=DEFAULT,
        wf=workflow(run=_order_workflow(ran, undone, fixed), on_error=lambda c, e: events.append(e)),
    )
    aid = h.start()
    h.drain()
    record = h.actor(aid)
    assert record.workflow_state == ports.SUSPENDED
    assert undone == [] and ran == ["reserve", "charge"]
    assert record.error["name"] == "AttributeError" and "NoneType" in record.error["message"]
    assert record.error["location"].endswith(" in run") and "test_suspension.py" in record.error["location"]
    assert "Traceback" in record.error["stack"]
    history = h.history(aid)
    assert {"reserve", "charge"} <= set(history) and all(
        e.rollback_completed_at is None for e in history.values()
    )
    assert len(events) == 1 and events[0]["workflow"]["suspended"] is True
    assert events[0]["workflow"]["workflow_id"] == aid
    assert events[0]["workflow"]["error"]["name"] == "AttributeError"
    assert record.wake_at is None and record.lease_owner is None  # not due, no lease
    h.drain()  # nothing runs it again: no second event, no compensation
    assert len(events) == 1 and undone == [] and h.actor(aid).workflow_state == ports.SUSPENDED


def test_retry_after_the_fix_goes_on_without_rerunning_completed_steps(h):
    ran, undone, fixed = [], [], {"on": False}
    h.setup(failure_types=DEFAULT, wf=workflow(run=_order_workflow(ran, undone, fixed)))
    aid = h.start()
    h.drain()
    handle = h.runtime.client()["wf"].get_for_id(aid)
    assert handle.workflow_state() == "suspended"
    fixed["on"] = True
    assert handle.retry(reason="typo fixed") is True
    h.drain()
    assert handle.workflow_state() == ports.COMPLETED
    assert ran == ["reserve", "charge", "ship"] and undone == []
    assert handle.retry() is False  # not suspended: nothing to do
    actions = h.runtime.store.operator_actions(aid)
    assert [(a.action, a.who, a.reason) for a in actions] == [("retry", "python", "typo fixed")]


def test_a_suspended_run_keeps_receiving_messages(h):
    async def run(ctx):
        if ctx.input is None:
            ctx.input.get("x")
        message = await ctx.queue.next("wait", names=["go"])
        return message.body

    h.setup(failure_types=DEFAULT, wf=workflow(run=run, queues={"go": None}))
    aid = h.start()
    h.drain()
    assert h.actor(aid).workflow_state == ports.SUSPENDED
    h.runtime.client()["wf"].get_for_id(aid).send("go", {"n": 1})  # not refused
    summary = h.drain(timeout=0.5)
    assert h.actor(aid).workflow_state == ports.SUSPENDED and aid not in summary.still_waiting
    assert h.actor(aid).wake_at is None


def test_a_code_error_in_a_join_branch_suspends_the_whole_run(h):
    ran = []

    async def broken(ctx):
        await ctx.step("a", lambda s: ran.append("a") or 1)
        return ctx.missing_attribute

    async def run(ctx):
        return await ctx.join(
            "both", {"ok": lambda c: c.step("b", lambda s: ran.append("b") or 2), "bad": broken}
        )

    h.setup(failure_types=DEFAULT, wf=workflow(run=run))
    aid = h.start()
    h.drain()
    record = h.actor(aid)
    assert record.workflow_state == ports.SUSPENDED and record.error["name"] == "AttributeError"
    assert sorted(ran) == ["a", "b"]


def test_a_code_error_in_a_race_branch_suspends_the_whole_run(h):
    async def broken(ctx):
        raise KeyError("sku")

    async def slow(ctx):
        await ctx.sleep("nap", 60)
        return "slow"

    async def run(ctx):
        return await ctx.race("first", [("bad", broken), ("slow", slow)])

    h.setup(failure_types=DEFAULT, wf=workflow(run=run))
    aid = h.start()
    h.drain(timeout=0.5)
    record = h.actor(aid)
    assert record.workflow_state == ports.SUSPENDED and record.error["name"] == "KeyError"


def test_workflow_failure_fails_and_rolls_back_as_before(h):
    undone, events = [], []

    async def run(ctx):
        await ctx.rollback_checkpoint("cp")
        await ctx.step("reserve", lambda s: "r1", rollback=lambda s, o: undone.append(o))
        raise WorkflowFailure("out of stock", details={"sku": "A-1"})

    h.setup(failure_types=DEFAULT, wf=workflow(run=run, on_error=lambda c, e: events.append(e)))
    aid = h.start()
    h.drain()
    record = h.actor(aid)
    assert record.workflow_state == ports.FAILED and undone == ["r1"]
    assert record.error["name"] == "WorkflowFailure" and record.error["metadata"]["details"] == {"sku": "A-1"}
    assert len(events) == 1 and "suspended" not in events[0]["workflow"]


def test_step_failures_and_engine_errors_still_fail(h):
    async def run(ctx):
        await ctx.step("charge", lambda s: 1 / 0, max_retries=0)

    h.setup(failure_types=DEFAULT, wf=workflow(run=run))
    aid = h.start()
    h.drain()
    assert h.actor(aid).workflow_state == ports.FAILED


def test_exception_as_the_failure_type_restores_the_spec_rule(h):
    undone = []

    async def run(ctx):
        await ctx.rollback_checkpoint("cp")
        await ctx.step("reserve", lambda s: "r1", rollback=lambda s, o: undone.append(o))
        ctx.input.get("sku")

    h.setup(failure_types=(Exception,), wf=workflow(run=run))
    aid = h.start()
    h.drain()
    assert h.actor(aid).workflow_state == ports.FAILED and undone == ["r1"]


def test_a_new_code_version_retries_a_suspended_run_once(h):
    ran, undone, fixed = [], [], {"on": False}
    runtime = h.setup(failure_types=DEFAULT, wf=workflow(run=_order_workflow(ran, undone, fixed)))
    runtime.settings.code_version = "v1"
    aid = h.start()
    h.drain()
    assert h.actor(aid).workflow_state == ports.SUSPENDED and h.actor(aid).code_version == "v1"
    h.drain()  # the same version never retries it by itself
    assert h.actor(aid).workflow_state == ports.SUSPENDED
    runtime.settings.code_version = "v2"  # a deploy, still broken: retried once, suspended again on v2
    h.drain()
    record = h.actor(aid)
    assert record.workflow_state == ports.SUSPENDED and record.code_version == "v2"
    h.drain()
    assert [a.who for a in runtime.store.operator_actions(aid)] == ["deploy"]
    fixed["on"] = True
    runtime.settings.code_version = "v3"  # the deploy with the fix
    executor.drain(runtime, timeout=2)
    assert h.actor(aid).workflow_state == ports.COMPLETED
    assert ran == ["reserve", "charge", "ship"] and undone == []
    assert [a.who for a in runtime.store.operator_actions(aid)] == ["deploy", "deploy"]


def test_a_suspended_run_is_not_paused_and_cancel_still_ends_it(h):
    async def run(ctx):
        ctx.input.get("x")

    h.setup(failure_types=DEFAULT, wf=workflow(run=run))
    aid = h.start()
    h.drain()
    handle = h.runtime.client()["wf"].get_for_id(aid)
    assert handle.pause() is False and handle.workflow_state() == ports.SUSPENDED
    assert handle.cancel() is True and handle.workflow_state() == ports.CANCELLED
    assert handle.retry() is False
