"""The Celery side (tasks.run_actor, tasks.sweep, CeleryDispatcher) drives workflows on the Django store.

Tasks run eagerly in-process here; tests/system starts real worker processes.
"""

from __future__ import annotations

import time
from datetime import timedelta

import pytest

from rivet_workflows import django_runtime, models
from rivet_workflows.driver import tasks
from rivet_workflows.engine.model import ports

pytestmark = pytest.mark.django_db(transaction=True)


def actor_row(actor_id):
    return models.Actor.objects.get(pk=actor_id)


def wait_until_due(store, actor_id):
    """Block until the actor's wake_at has passed on the store clock (waits, asserts nothing about time)."""
    wake_at = store.get_actor(actor_id).wake_at
    while store.now() < wake_at:
        time.sleep(0.02)


def test_runtime_is_rebuilt_when_settings_change(celery_runtime, settings):
    assert type(celery_runtime.store).__name__ in ("DjangoStore", "PostgresStore")
    assert type(celery_runtime.dispatcher).__name__ == "CeleryDispatcher"
    settings.RIVET_WORKFLOWS = {**settings.RIVET_WORKFLOWS, "LEASE_SECONDS": 7}
    assert django_runtime.get_runtime() is not celery_runtime
    assert django_runtime.get_runtime().settings.lease_seconds == 7.0


def test_create_and_send_wake_the_actor_through_celery(celery_runtime):
    handle = django_runtime.client().approval.get_or_create("order-1")
    row = actor_row(handle.actor_id)
    assert row.workflow_state == ports.SLEEPING and row.waiting_for == ["approval"]

    handle.send("approval", {"ok": True})
    row = actor_row(handle.actor_id)
    assert row.workflow_state == ports.COMPLETED
    assert django_runtime.get_runtime().store.get_actor(handle.actor_id).output == {
        "amount": 42,
        "approved": True,
    }


def test_sweep_runs_actors_whose_deadline_passed(celery_runtime):
    handle = django_runtime.client().napper.get_or_create("n1", input=0.3)
    assert actor_row(handle.actor_id).workflow_state == ports.SLEEPING
    assert tasks.sweep() == 0  # not due yet

    store = celery_runtime.store
    wait_until_due(store, handle.actor_id)
    assert tasks.sweep() == 1
    assert store.get_actor(handle.actor_id).output == "done"


def test_sweep_recovers_an_actor_whose_executor_died(celery_runtime):
    handle = django_runtime.client().napper.get_or_create("n2", input=0.3)
    store = celery_runtime.store
    wait_until_due(store, handle.actor_id)
    dead = store.claim(handle.actor_id, "dead-worker", 30)
    assert tasks.sweep() == 0  # the lease is live

    models.Actor.objects.filter(pk=handle.actor_id).update(
        lease_expires_at=store.now() - timedelta(seconds=1)
    )
    assert tasks.sweep() == 1
    assert store.get_actor(handle.actor_id).workflow_state == ports.COMPLETED
    assert store.commit(handle.actor_id, dead, ports.Commit(output="stale")).ok is False
    assert [e.key for e in store.load_history(handle.actor_id)] == ["before", "nap", "after"]


def test_duplicate_run_hints_are_harmless(celery_runtime):
    handle = django_runtime.client().napper.get_or_create("n3")
    before = list(models.HistoryEntry.objects.filter(actor_id=handle.actor_id).values_list("key", "attempts"))
    for _ in range(3):
        tasks.run_actor(handle.actor_id)
    after = list(models.HistoryEntry.objects.filter(actor_id=handle.actor_id).values_list("key", "attempts"))
    assert after == before
    assert actor_row(handle.actor_id).workflow_state == ports.SLEEPING


def test_drain_command_runs_due_work(celery_runtime, settings):
    from io import StringIO

    from django.core.management import call_command

    settings.RIVET_WORKFLOWS = {
        **settings.RIVET_WORKFLOWS,
        "DISPATCHER": "rivet_workflows.driver.dispatch.LocalDispatcher",
    }
    handle = django_runtime.client().approval.get_or_create("order-2")
    assert actor_row(handle.actor_id).workflow_state == ports.PENDING  # no worker ran it
    out = StringIO()
    call_command("rivet", "drain", "--timeout", "2", stdout=out)
    assert "actors run: 1" in out.getvalue()
    assert actor_row(handle.actor_id).waiting_for == ["approval"]


def test_the_celery_sweep_fires_a_due_schedule_and_its_run_goes_through_celery(celery_runtime):
    schedules = django_runtime.client().schedules
    schedules.create("naps", actor="napper", every=3600, input=0.2)
    tick = celery_runtime.store.schedule_get("naps").next_fire_at - timedelta(hours=1)
    models.Schedule.objects.filter(pk="naps").update(next_fire_at=tick)  # the tick an hour ago is due
    tasks.sweep()
    (fire,) = schedules.fires("naps")
    assert (fire.tick, fire.how, fire.status) == (tick, "sweep", "ok")
    assert actor_row(fire.actor_id).key == ["naps", tick.isoformat()]  # started: its run is a Celery task
    wait_until_due(celery_runtime.store, fire.actor_id)  # its nap (0.2 s) ends: the next sweep runs it
    tasks.sweep()
    assert celery_runtime.store.get_actor(fire.actor_id).output == "done"
    assert len(schedules.fires("naps")) == 1  # the next tick is an hour away
