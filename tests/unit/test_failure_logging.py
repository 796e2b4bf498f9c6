"""Workflow failures and step exhaustion are logged (logger ``rivet_workflows``) with the actor id, the
actor type and the error, so a worker log shows why a workflow stopped."""

from __future__ import annotations

import logging

from rivet_workflows.engine.model import ports
from rivet_workflows.engine.model.definitions import setup, workflow
from rivet_workflows.testing import drain, make_runtime


def _fail(step):
    raise RuntimeError("card declined")


def test_an_exhausted_step_and_the_failed_workflow_are_logged(caplog):
    async def run(ctx):
        await ctx.step("charge", _fail, max_retries=1, retry_backoff_base=0)

    runtime = make_runtime(setup(use={"orders": workflow(run=run)}))
    handle = runtime.client().orders.get_or_create("o1")
    with caplog.at_level(logging.WARNING, logger="rivet_workflows"):
        drain(runtime, timeout=5)
    assert handle.workflow_state() == ports.FAILED
    messages = [r.getMessage() for r in caplog.records if r.name == "rivet_workflows"]
    step_lines = [m for m in messages if m.startswith("step 'charge'") and handle.actor_id in m]
    assert len(step_lines) == 1 and "card declined" in step_lines[0] and "2 attempt" in step_lines[0]
    failed = [
        r for r in caplog.records if "failed" in r.getMessage() and "workflow of actor" in r.getMessage()
    ]
    assert len(failed) == 1 and failed[0].levelno == logging.ERROR
    line = failed[0].getMessage()
    assert handle.actor_id in line and "orders" in line and "card declined" in line


def test_a_serialization_failure_of_the_output_is_logged(caplog):
    async def run(ctx):
        return object()

    runtime = make_runtime(setup(use={"wf": workflow(run=run)}))
    handle = runtime.client().wf.get_or_create("k")
    with caplog.at_level(logging.WARNING, logger="rivet_workflows"):
        drain(runtime, timeout=5)
    assert handle.workflow_state() == ports.FAILED
    assert any(
        handle.actor_id in r.getMessage() and "SerializationError" in r.getMessage() for r in caplog.records
    )


def test_a_completed_workflow_logs_no_failure(caplog):
    async def run(ctx):
        return await ctx.step("ok", lambda s: 1)

    runtime = make_runtime(setup(use={"wf": workflow(run=run)}))
    runtime.client().wf.get_or_create("k")
    with caplog.at_level(logging.WARNING, logger="rivet_workflows"):
        drain(runtime, timeout=5)
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING]
