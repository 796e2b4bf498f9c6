"""The lease heartbeat runs in its own thread: an async step body that blocks its event loop (time.sleep
inside ``async def``) still keeps its lease, so no other executor takes the step over meanwhile."""

from __future__ import annotations

import threading
import time

import pytest

from rivet_workflows.engine.model import ports
from rivet_workflows.engine.model.definitions import setup, workflow
from rivet_workflows.engine.runtime import executor
from rivet_workflows.testing import make_runtime

LEASE = 0.3


@pytest.mark.parametrize(
    "on_django", [False, pytest.param(True, marks=pytest.mark.django_db(transaction=True))]
)
def test_a_blocking_async_step_keeps_its_lease(on_django, request):
    claims: list = []
    runs: list = []

    async def body(step):
        runs.append(1)
        deadline = time.monotonic() + LEASE * 3
        while time.monotonic() < deadline:
            time.sleep(0.05)  # blocks the event loop: no asyncio task can run meanwhile
            claims.append(thief(step.actor_id))
        return "done"

    async def run(ctx):
        return await ctx.step("blocking", body)

    registry = setup(use={"wf": workflow(run=run)})
    if on_django:
        runtime = request.getfixturevalue("make_django_runtime")(registry, lease_seconds=LEASE)
    else:
        runtime = make_runtime(registry, lease_seconds=LEASE)

    def thief(actor_id):
        # another executor trying to take the actor over, from another thread (its own DB connection)
        out: list = []

        def attempt():
            out.append(runtime.store.claim(actor_id, "thief", LEASE))
            close = getattr(runtime.store, "close_thread_connection", None)
            if close is not None:
                close()

        t = threading.Thread(target=attempt)
        t.start()
        t.join()
        return out[0]

    handle = runtime.client().wf.get_or_create("k")
    executor.drain(runtime, timeout=10)
    record = runtime.store.get_actor(handle.actor_id)
    assert record.workflow_state == ports.COMPLETED and record.output == "done"
    assert len(runs) == 1
    assert claims and all(c is None for c in claims)
