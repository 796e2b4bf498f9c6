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


# a step body that creates an actor on another shard and sends to it (relayed creates: DESIGN.md section 21)
def _hooked(c, input=None):
    c.state["hooked"] = c.state.get("hooked", 0) + 1


async def inbox_run(ctx):
    """Two messages on ``q``, in the order received."""
    return [(await ctx.queue.next(f"m{i}", names=["q"])).body for i in range(2)]


async def spawner_run(ctx):
    """Step ``make``: ``get_or_create`` of the inbox ``ctx.input["target"]`` and two sends to it."""

    def make(step):
        inbox = step.client().inbox.get_or_create(ctx.input["target"], {"from": list(ctx.key)})
        inbox.send("q", 1)
        inbox.send("q", 2)
        return inbox.actor_id

    return await ctx.step("make", make)


registry = d.setup(
    use={
        "job": d.workflow(run=job_run, queues=["go"]),
        "counter": d.actor(state={"n": 0}, actions={"bump": _bump}),
        "inbox": d.workflow(run=inbox_run, queues=["q"], state={"hooked": 0}, on_create=_hooked),
        "spawner": d.workflow(run=spawner_run),
    }
)
