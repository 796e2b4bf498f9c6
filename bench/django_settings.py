"""Django settings for the "ours" side of the benchmarks: the example project pointed at the bench registry.

Set ``DATABASE_URL`` (the bench uses ``rivet_bench_ours`` on the local PostgreSQL) and ``REDIS_URL`` (a
dedicated Redis database) in the environment before Django loads this module.
"""

from __future__ import annotations

import os

import django

from project.settings import *  # noqa: F403
from project.settings import DATABASES, RIVET_WORKFLOWS

DEBUG = False  # DEBUG keeps every SQL query in memory; no production worker runs with it.
RIVET_WORKFLOWS = {
    **RIVET_WORKFLOWS,
    "REGISTRY": "bench.ours_registry.registry",
    "DEV_MODE": False,
    "SWEEP_INTERVAL": float(os.environ.get("RIVET_SWEEP_INTERVAL", "1.0")),
}
# Persistent connections, as a deployment would configure them: a worker keeps its connection between
# tasks instead of reconnecting (BENCH_CONN_MAX_AGE=0 measures the reconnecting default).
DATABASES["default"]["CONN_MAX_AGE"] = None if os.environ.get("BENCH_CONN_MAX_AGE") != "0" else 0
# The bench registry has no "django_task" workflow, so Django's tasks stay on the framework's own
# immediate backend (the example project routes them through WorkflowBackend; check E101 refuses that here).
_TASKS_PACKAGE = "django.tasks" if django.VERSION >= (6, 0) else "django_tasks"
TASKS = {"default": {"BACKEND": f"{_TASKS_PACKAGE}.backends.immediate.ImmediateBackend"}}
LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "handlers": {"console": {"class": "logging.StreamHandler"}},
    "loggers": {"rivet_workflows": {"handlers": ["console"], "level": "WARNING"}},
}
