"""Cron and one-off schedules on the Django store: registration, compare-and-set firing, fire log cap,
the spec's cron example through drain(), the sweep task."""

from __future__ import annotations

from datetime import timedelta

import pytest

from project.examples.cron import cron_actor
from rivet_workflows import models
from rivet_workflows.engine.actor import firing
from rivet_workflows.engine.actor.actor_context import ActorContext
from rivet_workflows.engine.model.definitions import actor, setup
from rivet_workflows.engine.runtime import executor

pytestmark = pytest.mark.django_db(transaction=True)


def _tick(c, fire, *args):
    c.state["ticks"] += 1
    c.state["args"] = list(args)
    return fire.name


def _context(runtime, name: str, key: str) -> ActorContext:
    handle = runtime.client()[name].get_or_create(key)
    return ActorContext(runtime, runtime.registry.get(name), handle.actor_id, handle.key)


def _make_due(actor_id: str) -> None:
    past = models.CronEntry.objects.get(actor_id=actor_id).next_fire_at - timedelta(hours=1)
    models.CronEntry.objects.filter(actor_id=actor_id).update(next_fire_at=past)


def test_every_fires_once_per_slot_and_caps_the_log(make_django_runtime) -> None:
    runtime = make_django_runtime(setup(use={"ticker": actor(state={"ticks": 0}, actions={"tick": _tick})}))
    c = _context(runtime, "ticker", "a")
    c.cron.every(name="t", interval=10, action="tick", args=("x",), max_history=2)
    assert firing.fire_due(runtime) == 0  # not due yet
    for _ in range(4):
        _make_due(c.actor_id)
        assert firing.fire_due(runtime) == 1
        assert firing.fire_due(runtime) == 0  # the slot is claimed: no double fire
    state = runtime.store.get_actor(c.actor_id).state
    assert state == {"ticks": 4, "args": ["x"]}
    entry = models.CronEntry.objects.get(actor_id=c.actor_id)
    fires = list(entry.fires.all())
    assert len(fires) == 2 and all(f.status == "ok" for f in fires)
    assert entry.next_fire_at > runtime.store.now()


def test_one_catch_up_fire_after_downtime(make_django_runtime) -> None:
    runtime = make_django_runtime(setup(use={"ticker": actor(state={"ticks": 0}, actions={"tick": _tick})}))
    c = _context(runtime, "ticker", "a")
    c.cron.every(name="t", interval=5, action="tick")
    models.CronEntry.objects.filter(actor_id=c.actor_id).update(
        next_fire_at=runtime.store.now() - timedelta(days=1)
    )
    assert firing.fire_due(runtime) == 1
    assert firing.fire_due(runtime) == 0
    assert runtime.store.get_actor(c.actor_id).state["ticks"] == 1


def test_compare_and_set_has_one_winner(make_django_runtime) -> None:
    from tests.conftest import run_in_threads

    runtime = make_django_runtime(setup(use={"ticker": actor(state={"ticks": 0}, actions={"tick": _tick})}))
    c = _context(runtime, "ticker", "a")
    c.schedule.after(0, "tick")
    (due,) = runtime.store.cron_due(10)
    wins = run_in_threads(lambda i: runtime.store.cron_advance(due.id, due.next_fire_at, None), 8)
    assert wins.count(True) == 1


def test_schedule_error_is_logged_not_raised(make_django_runtime) -> None:
    def boom(c, fire):
        raise RuntimeError("nope")

    runtime = make_django_runtime(setup(use={"ticker": actor(state={}, actions={"boom": boom})}))
    c = _context(runtime, "ticker", "a")
    c.schedule.after(0, "boom")
    assert firing.fire_due(runtime) == 1
    fire = models.CronFire.objects.get()
    assert fire.status == "error" and "nope" in str(fire.error)


def test_spec_cron_example_through_drain(make_django_runtime) -> None:
    runtime = make_django_runtime(setup(use={"cron_actor": cron_actor}))
    handle = runtime.client().cron_actor.get_or_create("c", input={"interval": 5})
    executor.drain(runtime, timeout=1)
    _make_due(handle.actor_id)
    executor.drain(runtime, timeout=1)
    state = handle.state()
    assert state["runs"] == 1
    assert state["last_run_at"] is not None


def test_destroying_the_actor_removes_its_schedules(make_django_runtime) -> None:
    runtime = make_django_runtime(setup(use={"ticker": actor(state={"ticks": 0}, actions={"tick": _tick})}))
    c = _context(runtime, "ticker", "a")
    c.cron.set(name="daily", expression="0 9 * * *", timezone="Europe/Amsterdam", action="tick")
    runtime.client().ticker.get_for_id(c.actor_id).destroy()
    assert runtime.store.cron_list() == []


def test_the_celery_sweep_claims_fires_and_a_task_runs_them(settings) -> None:
    from project.celery import app
    from rivet_workflows import django_runtime
    from rivet_workflows.driver import tasks

    settings.RIVET_WORKFLOWS = {
        "REGISTRY": "tests.system.workflows.registry",
        "DISPATCHER": "rivet_workflows.driver.dispatch.LocalDispatcher",
    }
    django_runtime.reset_runtime()
    app.conf.task_always_eager = True
    try:
        runtime = django_runtime.get_runtime()
        handle = runtime.client().cron_actor.create("celery", input={"interval": 5})
        _make_due(handle.actor_id)
        tasks.sweep()  # claims the slot and runs fire_schedule (eagerly here)
        tasks.sweep()  # the slot is taken: no second fire
        fires = list(models.CronFire.objects.filter(cron__actor_id=handle.actor_id))
        assert [f.status for f in fires] == ["ok"]
        assert models.QueueMessage.objects.filter(actor_id=handle.actor_id, name="cron-tick").count() == 1
    finally:
        app.conf.task_always_eager = False
        django_runtime.reset_runtime()


def test_a_sweep_that_cannot_reach_the_broker_gives_its_claims_back(settings, monkeypatch) -> None:
    from rivet_workflows import django_runtime
    from rivet_workflows.driver import tasks

    settings.RIVET_WORKFLOWS = {
        "REGISTRY": "tests.system.workflows.registry",
        "DISPATCHER": "rivet_workflows.driver.dispatch.LocalDispatcher",
    }
    django_runtime.reset_runtime()
    try:
        runtime = django_runtime.get_runtime()
        handle = runtime.client().steps.create("broker-down")

        def down(*args, **kwargs):
            raise ConnectionError("broker unreachable")

        monkeypatch.setattr(tasks.run_actor, "delay", down)
        tasks.sweep()
        record = runtime.store.get_actor(handle.actor_id)
        assert record.lease_owner is None  # not held for a whole lease by a task that was never queued
        assert record.wake_at is not None and record.wake_at <= runtime.store.now()  # still due
    finally:
        django_runtime.reset_runtime()
