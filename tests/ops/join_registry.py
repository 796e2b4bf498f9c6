"""A workflow whose next entry is a join still in flight: each branch waits on its own queue, then runs a
step (``rivet check`` replays both branches up to that step)."""

from __future__ import annotations

from rivet_workflows.engine.model.definitions import queue, setup, workflow


async def _branch(ctx, queue_name: str):
    body = (await ctx.queue.next(f"wait-{queue_name}", names=[queue_name])).body
    return await ctx.step(f"use-{queue_name}", lambda step: body)


async def run_fanout(ctx):
    both = await ctx.join(
        "both", {"a": lambda branch: _branch(branch, "qa"), "b": lambda branch: _branch(branch, "qb")}
    )
    await ctx.step("after", lambda step: both)


registry = setup(use={"fanout": workflow(run=run_fanout, queues={"qa": queue(), "qb": queue()})})
