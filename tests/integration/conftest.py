"""Fixtures of the integration tests."""

from __future__ import annotations

import pytest

from project.celery import app
from rivet_workflows import django_runtime


@pytest.fixture
def celery_runtime(settings):
    """The settings-bound runtime on the test registry (tests.integration.workflows), with Celery tasks
    executed eagerly: a wake-up sent is a run done at once, in this process."""
    settings.RIVET_WORKFLOWS = {
        "REGISTRY": "tests.integration.workflows.registry",
        "LIVE_WAIT_THRESHOLD": 0.0,
        "POLL_INTERVAL": 0.01,
    }
    django_runtime.reset_runtime()
    app.conf.task_always_eager = True
    try:
        yield django_runtime.get_runtime()
    finally:
        app.conf.task_always_eager = False
        django_runtime.reset_runtime()
