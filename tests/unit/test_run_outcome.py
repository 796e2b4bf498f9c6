"""One run's single entry point (``engine.run.execute``) hands back a typed outcome: what its final commit
recorded, with untouched columns left UNSET."""

from __future__ import annotations

import asyncio
from datetime import timedelta

from rivet_workflows.engine.model import errors, ports
from rivet_workflows.engine.model.definitions import setup, workflow
from rivet_workflows.engine.run import run
from rivet_workflows.testing import ManualClock, make_runtime


async def _completes(ctx):
    return await ctx.step("add", lambda step: 1 + 1)


async def _sleeps(ctx):
    await ctx.step("first", lambda step: "done")
    await ctx.queue.next("wait", "jobs", timeout=timedelta(hours=1))


async def _fails(ctx):
    await ctx.step("boom", _boom, max_retries=0)


def _boom(step):
    raise errors.CriticalError("no")


def _run_once(definition):
    clock = ManualClock()
    runtime = make_runtime(setup(use={"w": definition}), clock=clock)
    actor_id = runtime.client().w.get_or_create("a").actor_id
    token, actor, entries, now = runtime.store.claim_and_load(actor_id, "test", 30.0)
    report = asyncio.run(run.execute(runtime, actor, token, loaded=(entries, now)))
    return runtime, actor_id, clock, report


def test_a_completed_run_reports_its_output_and_clears_the_wake_up():
    runtime, actor_id, _, report = _run_once(workflow(run=_completes))
    assert report.outcome == run.RunOutcome(
        ports.COMPLETED, output=2, error=None, wake_at=None, waiting_for=[]
    )
    assert report.steps_executed == 1 and report.released.ok
    assert runtime.store.get_actor(actor_id).output == 2


def test_a_waiting_run_reports_its_deadline_and_queues_and_leaves_output_and_error_alone():
    runtime, actor_id, clock, report = _run_once(workflow(run=_sleeps, queues=["jobs"]))
    outcome = report.outcome
    assert outcome.workflow_state == ports.SLEEPING and outcome.waiting_for == ["jobs"]
    assert outcome.wake_at == clock() + timedelta(hours=1)
    assert outcome.output is ports.UNSET and outcome.error is ports.UNSET
    assert set(outcome.commit_fields()) == {"workflow_state", "wake_at", "waiting_for"}
    assert runtime.store.get_actor(actor_id).waiting_for == ["jobs"]


def test_a_failed_run_reports_the_error():
    _, _, _, report = _run_once(workflow(run=_fails))
    assert report.outcome.workflow_state == ports.FAILED
    assert report.outcome.error["name"] == "CriticalError" and report.outcome.output is ports.UNSET
