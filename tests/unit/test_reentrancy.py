"""A step body that calls back into its own actor through the client (an action, a waiting send, destroy)
fails at once with ReentrantCallError instead of waiting for its own step lock until the timeout."""

from __future__ import annotations

import time

import pytest

from rivet_workflows.engine.model import ports
from rivet_workflows.engine.model.definitions import actor, queue, setup, workflow
from rivet_workflows.engine.model.errors import ReentrantCallError
from rivet_workflows.testing import drain, make_runtime


def _bump(c):
    c.state["n"] += 1
    return c.state["n"]


def _self(step):
    return step.client().wf.get_for_id(step.actor_id)


CALLS = {
    "sync action": lambda step: _self(step).call("bump"),
    "attribute action": lambda step: _self(step).bump(),
    "send and wait": lambda step: _self(step).send("inbox", 1, wait=True, timeout=20),
    "destroy": lambda step: _self(step).destroy(),
}


async def _async_body(step):
    return await _self(step).acall("bump")


@pytest.mark.parametrize("how", [*CALLS, "async action"])
def test_a_step_calling_its_own_actor_fails_at_once(how):
    body = _async_body if how == "async action" else CALLS[how]
    attempts = []

    def counted(step):
        attempts.append(1)
        return body(step)

    async def counted_async(step):
        attempts.append(1)
        return await body(step)

    async def run(ctx):
        return await ctx.step("reenter", counted_async if how == "async action" else counted, max_retries=2)

    wf = actor(state={"n": 0}, actions={"bump": _bump}, queues={"inbox": queue()}, run=workflow(run))
    runtime = make_runtime(setup(use={"wf": wf}), action_timeout=20)
    handle = runtime.client().wf.get_or_create("k")
    started = time.monotonic()
    drain(runtime, timeout=10)
    assert time.monotonic() - started < 5  # no wait for the 20 s action timeout
    record = runtime.store.get_actor(handle.actor_id)
    assert record.workflow_state == ports.FAILED
    assert "own actor" in record.error["message"]
    assert len(attempts) == 1  # a programming error: not retried
    assert record.state == {"n": 0} and not record.destroyed


def test_a_step_may_still_call_another_actor():
    async def run(ctx):
        return await ctx.step("call", lambda s: s.client().counter.get_or_create("c").call("bump"))

    wf = actor(state={}, run=workflow(run))
    counter = actor(state={"n": 0}, actions={"bump": _bump})
    runtime = make_runtime(setup(use={"wf": wf, "counter": counter}))
    handle = runtime.client().wf.get_or_create("k")
    drain(runtime, timeout=10)
    assert runtime.store.get_actor(handle.actor_id).output == 1


def test_outside_a_step_the_check_does_not_apply():
    wf = actor(state={"n": 0}, actions={"bump": _bump})
    runtime = make_runtime(setup(use={"wf": wf}))
    handle = runtime.client().wf.get_or_create("k")
    assert handle.call("bump") == 1
    assert ReentrantCallError.code == "reentrant_call"


def test_an_on_error_hook_calling_its_own_actor_fails_at_once(caplog):
    def on_error(c, event):
        c.client().wf.get_for_id(c.actor_id).call("bump")

    async def run(ctx):
        await ctx.step("boom", lambda s: 1 / 0, max_retries=0)

    wf = actor(state={"n": 0}, actions={"bump": _bump}, run=workflow(run, on_error=on_error))
    runtime = make_runtime(setup(use={"wf": wf}), action_timeout=20)
    handle = runtime.client().wf.get_or_create("k")
    started = time.monotonic()
    drain(runtime, timeout=10)
    assert time.monotonic() - started < 5
    assert runtime.store.get_actor(handle.actor_id).workflow_state == ports.FAILED
    assert any("on_error hook" in r.getMessage() for r in caplog.records)
    assert any("own actor" in str(r.exc_info[1]) for r in caplog.records if r.exc_info)
