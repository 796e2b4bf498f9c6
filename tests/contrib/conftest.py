"""Fixtures of the WorkflowBackend tests: TASKS on the backend, the tests' registry, work run in-process."""

from __future__ import annotations

import pytest

from rivet_workflows import django_runtime

REGISTRY = "tests.contrib.registry.registry"


def tasks_setting(**options):
    return {
        "default": {
            "BACKEND": "rivet_workflows.contrib.django_tasks.WorkflowBackend",
            "QUEUES": ["default", "emails", "reports"],
            "OPTIONS": {"RETRY_BACKOFF_BASE": 0.0, "RETRY_BACKOFF_MAX": 0.0, **options},
        }
    }


@pytest.fixture
def rivet_tasks(settings, transactional_db):
    """TASKS["default"] is a WorkflowBackend on the tests' registry; work runs with ``drain()`` (a
    LocalDispatcher records wake-ups and nothing runs until then)."""
    from tests.contrib import tasks

    settings.RIVET_WORKFLOWS = {
        "REGISTRY": REGISTRY,
        "DISPATCHER": "rivet_workflows.driver.dispatch.LocalDispatcher",
        "LIVE_WAIT_THRESHOLD": 0.0,
        "POLL_INTERVAL": 0.01,
    }
    settings.TASKS = tasks_setting()
    tasks.CALLS.clear()
    django_runtime.reset_runtime()
    yield django_runtime
    django_runtime.reset_runtime()


@pytest.fixture
def eager_celery_tasks(rivet_tasks, settings):
    """As ``rivet_tasks`` with the Celery dispatcher, its tasks run eagerly in this process when sent
    (a wake-up is sent when the enqueuing transaction commits)."""
    from project.celery import app

    settings.RIVET_WORKFLOWS = {
        **settings.RIVET_WORKFLOWS,
        "DISPATCHER": "rivet_workflows.driver.dispatch.CeleryDispatcher",
    }
    app.conf.task_always_eager = True
    try:
        yield django_runtime
    finally:
        app.conf.task_always_eager = False
