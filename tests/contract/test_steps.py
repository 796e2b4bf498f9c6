"""ENGINE-SCENARIOS.md "Steps": durable steps, replay, retries, timeouts, divergence."""

from __future__ import annotations

import pytest

from rivet_workflows.engine import ports
from rivet_workflows.engine.definitions import workflow


def test_step_output_becomes_workflow_output(h):
    async def run(ctx):
        return await ctx.step("greet", lambda step: "hello world")

    h.setup(wf=workflow(run=run))
    aid = h.start()
    h.drain()
    actor = h.actor(aid)
    assert actor.workflow_state == ports.COMPLETED
    assert actor.output == "hello world"


@pytest.mark.parametrize("value", ["x", None, 0, "", [], False, {}])
def test_completed_step_is_not_rerun_on_replay(h, value):
    calls = []

    def body(step):
        calls.append(1)
        return value

    async def run(ctx):
        out = await ctx.step("once", body)
        await ctx.sleep("pause", 30)
        return out

    h.setup(wf=workflow(run=run))
    aid = h.start()
    h.run(aid)
    assert h.actor(aid).workflow_state == ports.SLEEPING
    # force a second replay before the sleep ends: the step must not run again
    h.run(aid)
    h.run(aid)
    assert calls == [1]
    assert h.history(aid)["once"].data["output"] == value


def test_three_sequential_steps(h):
    async def run(ctx):
        a = await ctx.step("a", lambda s: 1)
        b = await ctx.step("b", lambda s: 2)
        c = await ctx.step("c", lambda s: 3)
        return a + b + c

    h.setup(wf=workflow(run=run))
    aid = h.start()
    h.drain()
    assert h.actor(aid).output == 6
