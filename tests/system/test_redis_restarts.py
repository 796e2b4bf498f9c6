"""Prefork Celery workers survive repeated Redis (broker) restarts under load (field case C60, issue 10).

A private ``redis-server`` (no persistence) is SIGKILLed and started again on the same port four times
while three prefork workers run workflows: steps with sleeps (acks-late tasks in flight) and short durable
sleeps (countdown tasks the workers hold unacknowledged). Every worker process must still be alive
afterwards, every workflow must finish, and no step may run twice. REDIS_URL only.
"""

from __future__ import annotations

import time

import pytest

from rivet_workflows.engine.model import ports

from .conftest import uses_redis

pytestmark = [pytest.mark.system, pytest.mark.redis]

RESTARTS = 4
WORKERS = 3


def _finished(ids: list[str]) -> int:
    from rivet_workflows import models

    return models.Actor.objects.filter(pk__in=ids, workflow_state__in=ports.FINISHED_STATES).count()


def _unexpected_exits(cluster) -> str:
    dead = [w for w in cluster.workers if not w.alive()]
    return ", ".join(f"{w.name} exited with {w.proc.returncode}" for w in dead)


def test_prefork_workers_survive_redis_restarts_under_load(cluster, rt) -> None:
    if not uses_redis():
        pytest.skip("needs REDIS_URL (the broker is a folder otherwise)")
    assert cluster.redis is not None
    # 15 s leases: this test is about the broker, a run held up by a loaded machine must not lose its lease
    workers = [cluster.start_worker(2, pool="prefork", RIVET_LEASE_SECONDS="15") for _ in range(WORKERS)]
    client = rt.client()
    steps: list[str] = []
    sleepers: list[str] = []

    def add_load(batch: int) -> None:
        for i in range(6):  # first step sleeps 0.4-1.9 s: acks-late tasks running when Redis dies
            steps.append(client.steps.create(f"b{batch}-{i}", input={"sleep": 0.4 + 0.3 * i}).actor_id)
        at = time.time() + 2.0
        for i in range(6):  # wake-ups within 5 s are countdown tasks, held unacked by idle workers too
            sleepers.append(client.sleeper.create(f"b{batch}-{i}", input={"at": at + 0.5 * i}).actor_id)

    add_load(0)
    cluster.wait_for(lambda: cluster.count("done-one") >= 2, 90, what="the workers running steps")
    for restart in range(RESTARTS):
        add_load(restart + 1)
        # the new work reaches the workers (tasks running, countdowns reserved); each restart hits another
        # mix of busy and idle workers
        time.sleep(1.0 + 0.5 * restart)
        cluster.redis.kill()  # SIGKILL: connections reset, every queued and unacked task is gone
        time.sleep(1.0)
        cluster.start_redis()  # same port, empty
        # the workers reconnect and finish everything (lost hints: the sweep, after the lease of a claim
        # whose task was lost); a worker that exits ends the wait at once
        ids = steps + sleepers
        cluster.wait_for(
            lambda ids=ids: _finished(ids) == len(ids) or _unexpected_exits(cluster),
            90,
            what=f"every workflow after restart {restart + 1}",
        )
    exits = _unexpected_exits(cluster)
    assert not exits, f"{exits}\n{cluster.logs()}"
    assert all(w.alive() for w in workers)
    losses = [w.log_path.read_text(errors="replace").count("Connection to broker lost") for w in workers]
    late_acks = sum(w.log_path.read_text(errors="replace").count("Couldn't ack") for w in workers)
    print(f"\nconnection losses per worker {losses}; acks refused on a lost connection: {late_acks}")
    assert all(n >= RESTARTS for n in losses), losses  # each restart really cut every worker off
    assert cluster.beat is not None and cluster.beat.alive(), cluster.logs()

    from rivet_workflows import models

    states = dict(models.Actor.objects.filter(pk__in=ids).values_list("actor_id", "workflow_state"))
    assert all(states[a] == ports.COMPLETED for a in ids), states
    c = cluster.counts()
    for aid in steps:
        for step in ("one", "two", "three"):
            once = (c[(aid, f"start-{step}")], c[(aid, f"done-{step}")]) == (1, 1)
            assert once, (aid, step, cluster.logs())
        assert rt.store.get_actor(aid).state["done"] == ["one", "two", "three"]
    for aid in sleepers:
        assert c[(aid, "woke")] == 1, (aid, cluster.logs())
