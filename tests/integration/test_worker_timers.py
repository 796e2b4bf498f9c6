"""A worker run that reaches a sleep releases the worker; the worker process keeps the near wake-up and
runs the actor itself when it is due (``tasks.LocalRuns``, benchmark P5); a far one is the sweep's.

Celery is not eager here: ``run_actor.apply_async`` is recorded instead of sent.
"""

from __future__ import annotations

import threading
import time

import pytest

from project.celery import app
from rivet_workflows import django_runtime
from rivet_workflows.driver import tasks
from rivet_workflows.driver.dispatch import HINT_PRIORITY
from rivet_workflows.engine.model import ports
from tests.conftest import requires_postgres

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


def test_a_sleep_longer_than_the_live_threshold_releases_the_worker_and_the_process_fires_it(queued):
    handle = django_runtime.client().napper.get_or_create("n1", input=1.0)
    assert queued == [((handle.actor_id,), {"priority": HINT_PRIORITY})]  # the creation hint
    queued.clear()

    started = time.monotonic()
    tasks.run_actor(handle.actor_id)
    assert time.monotonic() - started < 0.9  # the 1 s nap was not waited out in the worker
    store = django_runtime.get_runtime().store
    record = store.get_actor(handle.actor_id)
    assert record.workflow_state == ports.SLEEPING and record.lease_owner is None
    assert tasks.local_runs().pending() >= 1

    # No sweep and no broker message: the process's own timer runs the actor when the nap ends.
    deadline = time.monotonic() + 10
    while store.get_actor(handle.actor_id).workflow_state != ports.COMPLETED and time.monotonic() < deadline:
        time.sleep(0.05)
    assert store.get_actor(handle.actor_id).workflow_state == ports.COMPLETED
    assert time.monotonic() - started >= 1.0  # not before the deadline
    assert queued == []


def test_a_long_sleep_is_left_to_the_sweep(queued):
    handle = django_runtime.client().napper.get_or_create("n2", input=60.0)
    queued.clear()
    tasks.run_actor(handle.actor_id)
    assert django_runtime.get_runtime().store.get_actor(handle.actor_id).workflow_state == ports.SLEEPING
    assert queued == []


class _StartingWorker:
    """What Celery's ``worker_init`` hands over: the WorkController, before its pool is built."""

    pool_cls = "solo"
    concurrency = 1


def test_worker_concurrency_gives_a_starting_worker_a_thread_pool(settings):
    settings.RIVET_WORKFLOWS = {"REGISTRY": "tests.integration.workflows.registry", "WORKER_CONCURRENCY": 6}
    worker = _StartingWorker()
    tasks.apply_worker_concurrency(sender=worker)
    assert (worker.pool_cls, worker.concurrency) == ("threads", 6)


def test_worker_concurrency_1_leaves_the_pool_as_the_command_line_chose(settings):
    settings.RIVET_WORKFLOWS = {"REGISTRY": "tests.integration.workflows.registry"}
    worker = _StartingWorker()
    tasks.apply_worker_concurrency(sender=worker)
    assert (worker.pool_cls, worker.concurrency) == ("solo", 1)


@requires_postgres
def test_an_idle_worker_hears_a_send_to_a_released_actor_and_runs_it_without_the_broker(queued):
    handle = django_runtime.client().approval.get_or_create("a1")
    queued.clear()
    tasks.run_actor(handle.actor_id)  # runs to the queue wait, listens WARM_WAIT, releases
    store = django_runtime.get_runtime().store
    assert store.get_actor(handle.actor_id).lease_owner is None
    stop = threading.Event()
    listener = threading.Thread(target=tasks.listen_for_wakes, args=(stop,), daemon=True)
    listener.start()
    try:
        time.sleep(0.5)  # the listener is listening
        handle.send("approval", {"ok": True})
        assert queued == [((handle.actor_id,), {"priority": HINT_PRIORITY})]  # the hint, never delivered
        deadline = time.monotonic() + 10
        while (
            store.get_actor(handle.actor_id).workflow_state != ports.COMPLETED and time.monotonic() < deadline
        ):
            time.sleep(0.05)
        assert store.get_actor(handle.actor_id).workflow_state == ports.COMPLETED
    finally:
        stop.set()
        listener.join(timeout=10)


def test_the_brokers_hint_leaves_an_actor_to_the_run_this_process_started_for_the_same_send(
    queued, monkeypatch
):
    handle = django_runtime.client().approval.get_or_create("a2")
    tasks.run_actor(handle.actor_id)  # to the queue wait; released
    store = django_runtime.get_runtime().store
    handle.send("approval", {"ok": True})  # the actor is due; its hint is recorded, not delivered
    go = threading.Event()
    real_run = tasks._run

    def held_run(*args, **kwargs):  # the listener's run, held before its claim
        go.wait(10)
        return real_run(*args, **kwargs)

    monkeypatch.setattr(tasks, "_run", held_run)
    runs = tasks.LocalRuns(threads=1)
    monkeypatch.setattr(tasks, "_local_runs", runs)
    assert runs.run_now(handle.actor_id)
    tasks.run_actor(handle.actor_id)  # the hint arrives while that run is on its way: it does nothing
    actor = store.get_actor(handle.actor_id)
    assert actor.workflow_state != ports.COMPLETED and actor.lease_owner is None  # not claimed by the hint
    go.set()
    deadline = time.monotonic() + 10
    while store.get_actor(handle.actor_id).workflow_state != ports.COMPLETED and time.monotonic() < deadline:
        time.sleep(0.05)
    assert (
        store.get_actor(handle.actor_id).workflow_state == ports.COMPLETED
    )  # the local run took the message
    assert not runs.covers(handle.actor_id)
