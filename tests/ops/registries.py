"""Three deploys of one workflow for the ``rivet check`` tests: v1, v2 (a step renamed: in-flight histories
diverge) and v3 (the old step marked ``removed``: they replay again). v1 also has ``saga``, whose run
fails and is rolled back (``reserve`` compensated), and ``ticker``, a cron-only actor with no workflow."""

from __future__ import annotations

from rivet_workflows.engine.model.definitions import actor, queue, setup, workflow


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


RELEASED: list = []


def _declined(step):
    raise RuntimeError("card declined")


async def run_saga(ctx):
    await ctx.rollback_checkpoint("saga")
    await ctx.step(name="reserve", run=lambda s: "r-1", rollback=lambda rctx, out: RELEASED.append(out))
    await ctx.step(name="charge", run=_declined, max_retries=0)


def _start_ticking(c):
    c.cron.every(name="tick", interval=60, action="tick")


#: a cron-only actor (case C58): no run function, so no workflow state to wait on
ticker = actor(state={"ticks": 0}, on_create=_start_ticking, actions={"tick": lambda c, info: None})

v1 = setup(
    use={"flow": _flow(run_v1), "gated": _flow(run_gated), "saga": workflow(run=run_saga), "ticker": ticker}
)
v2 = setup(use={"flow": _flow(run_v2), "gated": _flow(run_gated)})
v3 = setup(use={"flow": _flow(run_v3), "gated": _flow(run_gated)})
