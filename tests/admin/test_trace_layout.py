"""The admin's trace layout (``rivet_workflows.admin.trace.build_trace``) on a MemoryStore history."""

from __future__ import annotations

from rivet_workflows.admin import trace
from rivet_workflows.engine.model import definitions as d
from rivet_workflows.testing import drain, make_runtime


def build(**definitions):
    registry = d.setup(use=definitions)
    runtime = make_runtime(registry, poll_interval=0.005, lease_seconds=5)
    return runtime, runtime.client()


def test_build_trace_nests_loop_iterations_and_places_timing_bars():
    async def run(ctx):
        await ctx.step("first", lambda s: 1)

        async def body(lctx, state):
            await lctx.step("work", lambda s: state)
            return d.Loop.break_(state) if state >= 1 else d.Loop.continue_(state + 1)

        await ctx.loop(name="items", state=0, run=body)
        await ctx.join(
            "both", {"a": lambda b: b.step("x", lambda s: 1), "b": lambda b: b.step("y", lambda s: 2)}
        )

    runtime, client = build(flow=d.actor(run=d.workflow(run)))
    handle = client.flow.get_or_create("a")
    drain(runtime, timeout=5)
    assert handle.workflow_state() == "completed", handle.record().error
    roots = trace.build_trace(runtime.store.load_history(handle.actor_id))
    assert [n.key for n in roots] == ["first", "items", "both"]
    items = roots[1]
    assert [c.label for c in items.children] == ["~0", "~1"]
    assert items.children[0].kind == "iteration"
    assert items.children[1].children[0].key == "items/~1/work"
    assert items.children[1].children[0].replayable and not items.replayable
    both = roots[2]
    assert sorted(c.label for c in both.children) == ["a", "b"]
    for node in roots:
        assert 0 <= node.offset <= 100 and node.width > 0
