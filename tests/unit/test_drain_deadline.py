"""drain(timeout) starts no step and no actor after its timeout: it returns within the timeout plus the
step running at the deadline, and the workflow stays due for the next drain (DESIGN.md section 9)."""

from __future__ import annotations

import time

from rivet_workflows.engine.model import ports
from rivet_workflows.engine.model.definitions import setup, workflow
from rivet_workflows.engine.runtime import executor
from rivet_workflows.testing import make_runtime

STEP_SECONDS = 0.3
STEPS = 8


def _slow(step):
    time.sleep(STEP_SECONDS)
    return 1


async def _run(ctx):
    for i in range(STEPS):
        await ctx.step(f"s{i}", _slow)
    return "done"


def test_drain_starts_no_step_after_its_timeout_and_a_later_drain_finishes():
    runtime = make_runtime(setup(use={"wf": workflow(run=_run)}))
    handle = runtime.client().wf.get_or_create("k")
    started = time.monotonic()
    summary = executor.drain(runtime, timeout=0.5)
    elapsed = time.monotonic() - started
    # the whole workflow takes STEPS * 0.3 = 2.4 s; the drain stops after the step running at 0.5 s
    assert summary.steps_executed <= 3
    assert elapsed < 0.5 + STEP_SECONDS + 0.5
    record = runtime.store.get_actor(handle.actor_id)
    assert record.workflow_state not in ports.FINISHED_STATES
    assert record.lease_owner is None
    assert record.wake_at is not None and record.wake_at <= runtime.store.now()  # still due
    done = 0
    for _ in range(STEPS * 2):
        executor.drain(runtime, timeout=0.5)
        if runtime.store.get_actor(handle.actor_id).workflow_state == ports.COMPLETED:
            done = 1
            break
    assert done
    assert [e.data["output"] for e in runtime.store.load_history(handle.actor_id)].count(1) == STEPS


def test_drain_starts_no_further_actor_after_its_timeout():
    runtime = make_runtime(setup(use={"wf": workflow(run=_run)}))
    handles = [runtime.client().wf.get_or_create(f"k{i}") for i in range(3)]
    summary = executor.drain(runtime, timeout=0.2)
    assert summary.steps_executed == 1  # the first actor's first step; nothing else started
    records = [runtime.store.get_actor(h.actor_id) for h in handles]
    assert all(r.lease_owner is None for r in records)  # unstarted claims were handed back
    assert sum(1 for r in records if r.workflow_state == ports.PENDING) == 2
