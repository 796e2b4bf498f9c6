"""Actors of the sharded tests (tests/shards): a workflow with steps, a queue wait and a stream."""

from __future__ import annotations

from rivet_workflows.engine.model import definitions as d


async def job_run(ctx):
    """A step, a wait for ``go``, a stream write, a step: every kind of row an actor has."""
    first = await ctx.step("first", lambda step: {"key": list(ctx.key)})
    message = await ctx.queue.next("wait-go", names=["go"])
    await ctx.stream("log").write({"got": message.body})
    return {"first": first, "go": message.body, "done": await ctx.step("last", lambda step: "done")}


def _bump(c, by=1):
    c.state["n"] = c.state.get("n", 0) + by
    return c.state["n"]


registry = d.setup(
    use={
        "job": d.workflow(run=job_run, queues=["go"]),
        "counter": d.actor(state={"n": 0}, actions={"bump": _bump}),
    }
)
