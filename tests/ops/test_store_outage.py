"""A store outage during a long step: the heartbeat keeps retrying instead of dying."""

from __future__ import annotations

import time

from rivet_workflows.engine.model import ports
from rivet_workflows.engine.model.definitions import setup, workflow
from rivet_workflows.engine.runtime import executor
from rivet_workflows.testing import make_runtime


def test_the_heartbeat_survives_a_failing_renew_and_keeps_the_lease() -> None:
    renews = {"calls": 0}
    thefts: list = []

    def body(step):
        deadline = time.monotonic() + 0.8
        while time.monotonic() < deadline:
            thefts.append(store.claim(step.actor_id, "thief", 0.3))  # another worker's sweep
            time.sleep(0.05)
        return "ok"

    async def run(ctx):
        return await ctx.step("long", body)

    runtime = make_runtime(setup(use={"wf": workflow(run=run)}), lease_seconds=0.3)
    store = runtime.store
    store.inline_calls = False  # go through Runtime.call like a database store
    real_renew = store.renew

    def flaky_renew(actor_id, token, lease_seconds):
        renews["calls"] += 1
        if renews["calls"] == 1:
            raise ConnectionError("database connection lost")
        return real_renew(actor_id, token, lease_seconds)

    store.renew = flaky_renew
    aid = runtime.client().wf.create("k").actor_id
    summary = executor.run_actor(runtime, aid)
    assert renews["calls"] >= 3  # it went on renewing after the failure
    assert not any(thefts)  # so no other worker could take the lease over
    assert summary.workflow_state == ports.COMPLETED
    assert store.get_actor(aid).output == "ok"
