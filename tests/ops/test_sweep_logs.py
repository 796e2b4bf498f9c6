"""The sweep logs at DEBUG unless it did something (case C64): with ``celery worker -B -l info`` an idle
deployment wrote two or three lines a second about the sweep (beat sending it, the worker receiving it and
its success)."""

from __future__ import annotations

import logging

import pytest
from celery.app import trace

from rivet_workflows.driver import tasks
from tests.api.support import Rivet

SWEEP = {"id": "t-1", "name": "rivet_workflows.sweep", "args": "()", "kwargs": "{}", "eta": None}


def celery_lines_of_one_sweep(return_value: str = "0", task: str = "rivet_workflows.sweep") -> None:
    """Log what Celery logs for one run of ``task``, exactly as beat and the worker do."""
    logging.getLogger("celery.beat").info("Scheduler: Sending due task %s (%s)", "rivet sweep", task)
    received = {**SWEEP, "name": task}
    logging.getLogger("celery.worker.strategy").info(trace.LOG_RECEIVED, received, extra={"data": received})
    done = {**received, "return_value": return_value, "runtime": 0.01}
    logging.getLogger("celery.app.trace").info(trace.LOG_SUCCESS, done, extra={"data": done})


def lines(caplog, level: int) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.levelno == level]


def test_celery_lines_about_the_sweep_are_dropped_at_info(caplog):
    tasks.install_quiet_sweep_logs()
    caplog.set_level(logging.INFO)
    celery_lines_of_one_sweep("0")
    celery_lines_of_one_sweep("3")
    assert lines(caplog, logging.INFO) == []
    celery_lines_of_one_sweep(task="rivet_workflows.run_actor")  # other tasks keep their lines
    assert len(lines(caplog, logging.INFO)) == 3


def test_at_debug_they_are_kept_as_debug_lines(caplog):
    tasks.install_quiet_sweep_logs()
    caplog.set_level(logging.DEBUG)
    celery_lines_of_one_sweep("0")
    assert lines(caplog, logging.INFO) == []
    assert len(lines(caplog, logging.DEBUG)) == 3


def test_the_filter_is_installed_once_when_django_starts():
    for name in ("celery.beat", "celery.worker.strategy", "celery.app.trace"):
        filters = [f for f in logging.getLogger(name).filters if isinstance(f, tasks.QuietSweepFilter)]
        assert len(filters) == 1, name


@pytest.fixture
def rivet(transactional_db):
    helper = Rivet()
    yield helper
    helper.close()


def test_the_sweep_says_what_it_did_at_info_and_nothing_when_idle(rivet, caplog, monkeypatch):
    queued: list[tuple] = []
    monkeypatch.setattr(tasks.run_actor, "delay", lambda *args: queued.append(args))
    handle = rivet.client.order.get_or_create("o")  # a new workflow is due at once
    caplog.set_level(logging.INFO, logger="rivet_workflows")
    assert tasks.sweep() == 1 and queued[0][0] == handle.actor_id
    assert lines(caplog, logging.INFO) == [
        f"sweep queued 1 due actor(s) ({handle.actor_id}) and 0 schedule fire(s)"
    ]
    caplog.clear()
    assert tasks.sweep() == 0  # its lease is held now: nothing due
    assert lines(caplog, logging.INFO) == []
