"""ENGINE-SCENARIOS.md "Loops": stateful and stateless loops, resume, pruning."""

from __future__ import annotations

import pytest

from rivet_workflows.engine.model import ports
from rivet_workflows.engine.model.definitions import Loop, workflow


def _iterations(history, loop="loop"):
    out = set()
    for key in history:
        parts = key.split("/")
        if len(parts) > 1 and parts[0] == loop and parts[1].startswith("~"):
            out.add(int(parts[1][1:]))
    return out


def test_stateful_count_loop(h):
    async def body(ctx, count):
        await ctx.step(f"step-{count}", lambda s: count)
        if count + 1 >= 3:
            return Loop.break_(count + 1)
        return Loop.continue_(count + 1)

    async def run(ctx):
        return await ctx.loop(name="loop", state=0, run=body)

    h.setup(wf=workflow(run=run))
    aid = h.start()
    h.drain()
    assert h.actor(aid).output == 3


def test_stateless_loop_continue_and_none(h):
    seen = []

    async def body(ctx):
        seen.append(len(seen))
        if len(seen) == 1:
            return Loop.continue_()
        if len(seen) == 2:
            return None
        return Loop.break_("done")

    async def run(ctx):
        return await ctx.loop("loop", body)

    h.setup(wf=workflow(run=run))
    aid = h.start()
    h.drain()
    assert h.actor(aid).output == "done"
    assert seen == [0, 1, 2]


def test_break_none_is_recorded_and_not_rerun(h):
    calls = []

    async def body(ctx):
        calls.append(1)
        return Loop.break_(None)

    async def run(ctx):
        value = await ctx.loop("loop", body)
        await ctx.sleep("pause", 60)
        return value

    h.setup(wf=workflow(run=run))
    aid = h.start()
    h.run(aid)
    h.run(aid)
    assert calls == [1]
    assert h.history(aid)["loop"].data["output"] is None


def _counting_loop(interval, stop_at, crash_at=None, crashed=None, size=None):
    async def body(ctx, count):
        await ctx.step("tick", lambda s: count)
        if crash_at is not None and count == crash_at and not crashed:
            crashed.append(1)
            raise RuntimeError("crash")
        if count >= stop_at:
            return Loop.break_(count)
        return Loop.continue_(count + 1)

    async def run(ctx):
        return await ctx.loop(
            name="loop", state=0, run=body, history_prune_interval=interval, history_size=size
        )

    return run


@pytest.mark.parametrize("crash_at", [2, 3])
def test_loop_resumes_from_stored_iteration_after_crash(h, crash_at):
    crashed = []
    ticks = []

    async def body(ctx, count):
        await ctx.step("tick", lambda s: ticks.append(count) or count)
        if count == crash_at and not crashed:
            crashed.append(1)
            raise KeyboardInterrupt  # simulated crash: aborts the run without any further write
        if count >= 5:
            return Loop.break_(count)
        return Loop.continue_(count + 1)

    async def run(ctx):
        return await ctx.loop(name="loop", state=0, run=body, history_prune_interval=2)

    h.setup(wf=workflow(run=run))
    aid = h.start()
    with pytest.raises(KeyboardInterrupt):
        h.run(aid)
    assert h.run(aid).ran is False  # the crashed executor's lease is still live
    h.restart(aid)  # a new executor takes the dead lease over and resumes
    h.drain()  # (the tick whose outcome the crash lost counts as a failed attempt and is retried)
    assert h.actor(aid).output == 5
    assert ticks.count(0) == 1 and ticks.count(1) == 1  # earlier iterations never replayed


@pytest.mark.parametrize(
    ("interval", "stop_at", "smallest"),
    [(2, 4, 2), (3, 5, 3), (1, 3, 2)],
)
def test_loop_history_is_pruned(h, interval, stop_at, smallest):
    h.setup(wf=workflow(run=_counting_loop(interval, stop_at)))
    aid = h.start()
    h.drain()
    assert h.actor(aid).output == stop_at
    assert min(_iterations(h.history(aid))) >= smallest


def test_small_loop_keeps_all_iterations(h):
    h.setup(wf=workflow(run=_counting_loop(10, 2)))
    aid = h.start()
    h.drain()
    assert _iterations(h.history(aid)) == {0, 1, 2}


def test_prune_interval_three_over_nine_iterations_deletes_twice(h):
    h.setup(wf=workflow(run=_counting_loop(3, 8)))
    store = h.runtime.store
    deletions = []
    original = store.commit

    def counting(actor_id, token, commit):
        if commit.deletes:
            deletions.append(sorted(commit.deletes))
        return original(actor_id, token, commit)

    store.commit = counting
    aid = h.start()
    h.drain()
    assert h.actor(aid).output == 8
    assert len(deletions) == 2


def test_long_loop_history_stays_bounded(h):
    sizes = []

    async def body(ctx, count):
        await ctx.step("tick", lambda s: count)
        if count >= 199:
            return Loop.break_(count)
        return Loop.continue_(count + 1)

    async def run(ctx):
        return await ctx.loop(name="loop", state=0, run=body, history_prune_interval=10)

    h.setup(wf=workflow(run=run))
    store = h.runtime.store
    original = store.commit

    def measuring(actor_id, token, commit):
        result = original(actor_id, token, commit)
        sizes.append(len(store.load_history(actor_id)))
        return result

    store.commit = measuring
    aid = h.start()
    h.drain(timeout=120)  # 200 iterations, each re-reading the history: slow on a loaded machine
    assert h.actor(aid).output == 199
    assert max(sizes) <= 1 + 2 * 10 + 1
    assert len(h.history(aid)) <= 1 + 10


def test_failing_iteration_fails_the_workflow(h):
    async def body(ctx, count):
        if count == 1:
            raise RuntimeError("loop failure")
        return Loop.continue_(count + 1)

    async def run(ctx):
        return await ctx.loop(name="loop", state=0, run=body)

    h.setup(wf=workflow(run=run))
    aid = h.start()
    h.drain()
    actor = h.actor(aid)
    assert actor.workflow_state == ports.FAILED
    assert actor.error["message"] == "loop failure"


def test_stateful_loop_returning_none_is_an_error(h):
    async def run(ctx):
        return await ctx.loop(name="loop", state=0, run=lambda c, s: None)

    h.setup(wf=workflow(run=run))
    aid = h.start()
    h.drain()
    assert "returned None" in h.actor(aid).error["message"]
