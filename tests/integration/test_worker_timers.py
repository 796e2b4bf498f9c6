"""A worker run that reaches a sleep releases the worker and queues its next run for the wake-up (benchmark P5).

Celery is not eager here: ``run_actor.apply_async`` is recorded instead of sent.
"""

from __future__ import annotations

import time

import pytest

from project.celery import app
from rivet_workflows import django_runtime, tasks
from rivet_workflows.dispatch import HINT_PRIORITY
from rivet_workflows.engine import ports

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def queued(settings, monkeypatch):
    """The settings-bound runtime with a recorder in place of the broker: list of (args, options)."""
    settings.RIVET_WORKFLOWS = {
        "REGISTRY": "tests.integration.workflows.registry",
        "LIVE_WAIT_THRESHOLD": 0.5,
    }
    app.conf.task_always_eager = False
    sent: list[tuple[tuple, dict]] = []
    monkeypatch.setattr(tasks.run_actor, "apply_async", lambda args, **options: sent.append((args, options)))
    yield sent
    django_runtime.reset_runtime()


def test_a_sleep_longer_than_the_live_threshold_releases_the_worker_and_queues_a_timed_run(queued):
    handle = django_runtime.client().napper.get_or_create("n1", input=2.0)
    assert queued == [((handle.actor_id,), {"priority": HINT_PRIORITY})]  # the creation hint
    queued.clear()

    started = time.monotonic()
    tasks.run_actor(handle.actor_id)
    assert time.monotonic() - started < 1.5  # the 2 s nap was not waited out in the worker
    record = django_runtime.get_runtime().store.get_actor(handle.actor_id)
    assert record.workflow_state == ports.SLEEPING and record.lease_owner is None
    [(args, options)] = queued
    assert args == (handle.actor_id,)
    assert 0.5 < options["countdown"] <= 2.0 and "priority" not in options


def test_a_long_sleep_is_left_to_the_sweep(queued):
    handle = django_runtime.client().napper.get_or_create("n2", input=60.0)
    queued.clear()
    tasks.run_actor(handle.actor_id)
    assert django_runtime.get_runtime().store.get_actor(handle.actor_id).workflow_state == ports.SLEEPING
    assert queued == []
