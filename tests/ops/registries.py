"""Three deploys of one workflow for the ``rivet check`` tests: v1, v2 (a step renamed: in-flight histories
diverge) and v3 (the old step marked ``removed``: they replay again)."""

from __future__ import annotations

from rivet_workflows.engine.definitions import queue, setup, workflow


def _validate(step):
    step.state["validated"] = True


def _finish(step):
    step.state["finished"] = True


async def run_v1(ctx):
    await ctx.step("validate", _validate)
    await ctx.queue.next("wait-go")
    await ctx.step("finish", _finish)


async def run_v2(ctx):
    await ctx.step("check", _validate)  # renamed: diverges for instances that ran "validate"
    await ctx.queue.next("wait-go")
    await ctx.step("finish", _finish)


async def run_v3(ctx):
    await ctx.removed("validate", "step")  # in-flight histories keep replaying
    await ctx.queue.next("wait-go")
    await ctx.step("check", _validate)
    await ctx.step("finish", _finish)


async def run_gated(ctx):
    version = await ctx.get_version("shipping", 2)
    await ctx.queue.next("wait-go")
    return version


def _flow(run):
    return workflow(run=run, state={}, queues={"go": queue()}, actions={"get_state": lambda c: c.state})


v1 = setup(use={"flow": _flow(run_v1), "gated": _flow(run_gated)})
v2 = setup(use={"flow": _flow(run_v2), "gated": _flow(run_gated)})
v3 = setup(use={"flow": _flow(run_v3), "gated": _flow(run_gated)})
