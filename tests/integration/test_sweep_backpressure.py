"""The sweep's backpressure (tasks.queued_runs): run messages already waiting in the broker are the hints
of due actors the workers have not reached, so the sweep claims at most SWEEP_BATCH minus that backlog
of new work instead of queueing a second task for each of them; an actor whose lease expired is taken over
every sweep whatever the backlog (docs/howto/production.md). Real broker queue (the filesystem broker, or
Redis with REDIS_URL), no worker consuming it."""

from __future__ import annotations

import logging
import time

import pytest

from project.celery import app
from rivet_workflows import django_runtime, models
from rivet_workflows.driver import tasks

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def queued(settings):
    """The test registry with a small SWEEP_BATCH; Celery tasks go to the broker (nothing consumes them)."""
    settings.RIVET_WORKFLOWS = {"REGISTRY": "tests.integration.workflows.registry", "SWEEP_BATCH": 3}
    app.conf.task_always_eager = False
    app.control.purge()
    try:
        yield django_runtime.get_runtime()
    finally:
        app.control.purge()
        django_runtime.reset_runtime()


def _claimed() -> int:
    return models.Actor.objects.exclude(lease_owner=None).count()


def test_the_broker_queue_counts_the_hints_of_new_actors(queued):
    assert tasks.queued_runs() == 0
    for i in range(4):
        django_runtime.client().napper.create(f"b{i}")
    assert tasks.queued_runs() == 4


def test_behind_a_backlog_of_hints_the_sweep_claims_nothing(queued):
    for i in range(5):  # five due actors, their five hints waiting (SWEEP_BATCH is 3)
        django_runtime.client().napper.create(f"c{i}")
    assert tasks.sweep() == 0
    assert _claimed() == 0
    assert tasks.queued_runs() == 5  # nothing added behind them


def test_the_sweep_tops_the_queue_up_to_its_batch(queued):
    for i in range(2):
        django_runtime.client().napper.create(f"d{i}")
    app.control.purge()  # the two hints are lost: only the sweep can find these actors now
    django_runtime.client().napper.create("d-new")  # one hint waits
    assert tasks.sweep() == 2  # SWEEP_BATCH 3 minus the one waiting message
    assert tasks.queued_runs() == 3
    assert _claimed() == 2


def test_behind_a_backlog_of_1000_hints_an_expired_lease_is_taken_over_within_the_bound(queued, caplog):
    """A worker died holding an actor while 1,000 run messages wait in the broker: sweeping every interval
    as beat does, the sweep takes the actor over within LEASE_SECONDS + a few sweep intervals."""
    lease, interval = 1.0, 0.2
    held = django_runtime.client().napper.create("held")
    app.control.purge()
    for i in range(1000):  # the backlog: new work's hints nobody has consumed yet
        tasks.run_actor.delay(f"queued-{i}")
    assert tasks.queued_runs() == 1000
    store = queued.store
    dead_token = store.claim(held.actor_id, "worker-that-died", lease)
    assert dead_token is not None
    claimed_at = time.monotonic()
    caplog.set_level(logging.INFO, logger="rivet_workflows")
    bound = lease + 3 * interval
    while store.get_actor(held.actor_id).lease_token == dead_token:
        assert time.monotonic() - claimed_at < bound + 5, "the expired lease was never taken over"
        tasks.sweep()
        time.sleep(interval)
    took = time.monotonic() - claimed_at
    assert took <= bound, f"taken over {took - lease:.2f} s after its lease expired"
    assert store.get_actor(held.actor_id).lease_owner == queued.owner
    assert tasks.queued_runs() == 1001  # its run queued (a worker runs it locally); no new work added
    assert any("took over 1 actor(s) whose lease expired" in r.getMessage() for r in caplog.records)


def test_takeovers_are_bounded_by_the_sweep_batch(queued):
    ids = [django_runtime.client().napper.create(f"t{i}").actor_id for i in range(5)]
    app.control.purge()
    for actor_id in ids:
        queued.store.claim(actor_id, "worker-that-died", 0.05)
    time.sleep(0.1)
    assert tasks.sweep() == 3  # SWEEP_BATCH takeovers at most
    assert tasks.sweep() == 2  # the other two next time, although 3 run messages now wait
    assert tasks.queued_runs() == 5 and _claimed() == 5
