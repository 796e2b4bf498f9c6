"""The sweep's backpressure (tasks.queued_runs): run messages already waiting in the broker are the hints
of due actors the workers have not reached, so the sweep claims at most SWEEP_BATCH minus that backlog
instead of queueing a second task for each of them. Real broker queue (the filesystem broker, or Redis
with REDIS_URL), no worker consuming it."""

from __future__ import annotations

import pytest

from project.celery import app
from rivet_workflows import django_runtime, models, tasks

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
