"""Actor definitions used by the integration tests (importable as a REGISTRY dotted path)."""

from __future__ import annotations

from rivet_workflows.engine.model.definitions import setup, workflow


async def approval_run(ctx):
    """One step, a wait for an approval message, then the result."""
    amount = await ctx.step("price", lambda step: 42)
    message = await ctx.queue.next("wait-approval", names=["approval"])
    return {"amount": amount, "approved": message.body["ok"]}


async def nap_run(ctx):
    """A step, a sleep of ``input`` seconds (default 60), a step."""
    await ctx.step("before", lambda step: 1)
    await ctx.sleep("nap", ctx.input or 60)
    return await ctx.step("after", lambda step: "done")


registry = setup(use={"approval": workflow(run=approval_run), "napper": workflow(run=nap_run)})

#: an actor declaring a default step timeout of 60 s (for the W003 system check)
slow_registry = setup(use={"slow": workflow(run=nap_run, options={"step_timeout": 60})})
