"""``rivet check`` raises no false alarm: every example stopped at several points of its run replays clean
against unchanged code, and a replay writes nothing (engine.dry_run on the in-memory store)."""

from __future__ import annotations

import pytest

from project.examples import scenarios
from rivet_workflows.engine.model import ports
from rivet_workflows.engine.operate import dry_run
from rivet_workflows.engine.runtime import executor
from tests.examples.conftest import fast_examples, memory_runtime, service  # noqa: F401 - fixtures

NAMES = [n for n, s in scenarios.SCENARIOS.items() if s.deploy_point is None]


@pytest.mark.usefixtures("fast_examples")
@pytest.mark.parametrize("name", NAMES)
def test_in_flight_examples_replay_clean(name, service) -> None:  # noqa: F811
    runtime = memory_runtime(live_wait_threshold=0.0)
    scenario = scenarios.SCENARIOS[name]
    run = scenarios.ScenarioRun(scenario, runtime.client(), runtime.store, service, "t")
    scenario.start(run)
    checked = 0
    for _ in range(6):
        actors = [a for a in runtime.store.list_actors() if a.workflow_state not in ports.FINISHED_STATES]
        before = {
            a.actor_id: ([e.key for e in runtime.store.load_history(a.actor_id)], a.state) for a in actors
        }
        results = dry_run.check_all(runtime, actors)
        assert [r for r in results if r.outcome != dry_run.OK] == []
        for a in actors:  # nothing written by the replay
            after = runtime.store.get_actor(a.actor_id)
            keys = [e.key for e in runtime.store.load_history(a.actor_id)]
            assert (keys, after.state) == before[a.actor_id]
        checked += len(results)
        executor.drain(runtime, timeout=0.2)
    for thread in run.threads:
        thread.join(timeout=5)
    assert checked >= 1


def _loop_flow(step_name: str):
    from rivet_workflows.engine.model.definitions import queue, workflow

    async def iteration(loop_ctx):
        await loop_ctx.step(step_name, lambda step: 1)
        await loop_ctx.queue.next("wait")

    async def run(ctx):
        await ctx.loop("work", iteration)

    return workflow(run=run, queues={"go": queue()})


def test_a_renamed_step_inside_a_loop_is_reported_with_its_location() -> None:
    from rivet_workflows.engine.model.definitions import setup
    from rivet_workflows.testing import make_runtime

    old = make_runtime(setup(use={"flow": _loop_flow("fetch")}))
    handle = old.client().flow.create("k")
    for _ in range(3):
        executor.drain(old, timeout=0.5)
        handle.send("go", 1)
    executor.drain(old, timeout=0.5)
    new = make_runtime(setup(use={"flow": _loop_flow("download")}), store=old.store)
    (result,) = dry_run.check_all(new, [old.store.get_actor(handle.actor_id)])
    assert result.outcome == dry_run.DIVERGED
    assert result.location is not None and result.location.startswith("work/~") and "fetch" in result.location
    same = make_runtime(setup(use={"flow": _loop_flow("fetch")}), store=old.store)
    assert dry_run.check_all(same, [old.store.get_actor(handle.actor_id)])[0].outcome == dry_run.OK
