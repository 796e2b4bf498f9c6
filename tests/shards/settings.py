"""Django settings of the processes on several PostgreSQL clusters (the shard tests and benchmark P10):
the example project's settings with one database alias per shard (DESIGN.md section 21).

``RIVET_SHARD_URLS``: the shards' ``postgres://`` URLs, comma-separated, in alias order; the first is
``default``, the next ``shard1``, ``shard2``... (``tests/shards/clusters.py``'s ``Clusters.env()`` sets it and
``DJANGO_SETTINGS_MODULE``). ``RIVET_SHARD_BUCKETS``: ``SHARD_BUCKETS`` (default 256). ``RIVET_REGISTRY``:
the registry (default ``tests.shards.workflows.registry``). The rest (broker, lease, sweep interval, log
level) comes from the project's settings and their environment variables.

What a deployment writes in its own settings, with two shards::

    DATABASES = {"default": {...}, "shard1": {...}}
    RIVET_WORKFLOWS = {..., "SHARDS": ["default", "shard1"], "SHARD_BUCKETS": 256}
    DATABASE_ROUTERS = ["rivet_workflows.routers.ShardRouter"]
# The registry has no "django_task" workflow, so Django's tasks stay on the framework's immediate backend
# (the example project routes them through WorkflowBackend; its check E101 would stop ``migrate``).
_TASKS_PACKAGE = "django.tasks" if django.VERSION >= (6, 0) else "django_tasks"
TASKS = {"default": {"BACKEND": f"{_TASKS_PACKAGE}.backends.immediate.ImmediateBackend"}}

then ``manage.py migrate --database default`` and ``manage.py migrate --database shard1``.
"""

from __future__ import annotations

import os

import dj_database_url
import django

from project.settings import *  # noqa: F403
from project.settings import RIVET_WORKFLOWS

_URLS = [url for url in os.environ.get("RIVET_SHARD_URLS", "").split(",") if url]
if not _URLS:
    raise RuntimeError("tests.shards.settings needs RIVET_SHARD_URLS (the shards' URLs, comma-separated)")

#: the database aliases of the shards, in the order of RIVET_SHARD_URLS
SHARD_ALIASES = ["default", *(f"shard{i}" for i in range(1, len(_URLS)))]

#: RIVET_CONN_MAX_AGE: Django's CONN_MAX_AGE of every shard ("none": persistent connections, as benchmark P10
#: and a deployment use; default 0)
_MAX_AGE = os.environ.get("RIVET_CONN_MAX_AGE", "0")
DATABASES = {
    alias: dj_database_url.parse(url, conn_max_age=None if _MAX_AGE == "none" else int(_MAX_AGE))
    for alias, url in zip(SHARD_ALIASES, _URLS, strict=True)
}
RIVET_WORKFLOWS = {
    **RIVET_WORKFLOWS,
    "REGISTRY": os.environ.get("RIVET_REGISTRY") or "tests.shards.workflows.registry",
    "LIVE_WAIT_THRESHOLD": float(os.environ.get("RIVET_LIVE_WAIT_THRESHOLD", "1.0")),
}
if len(SHARD_ALIASES) > 1:
    RIVET_WORKFLOWS["SHARDS"] = SHARD_ALIASES
    RIVET_WORKFLOWS["SHARD_BUCKETS"] = int(os.environ.get("RIVET_SHARD_BUCKETS", "256"))
    DATABASE_ROUTERS = ["rivet_workflows.routers.ShardRouter"]
# else one database, no shard settings at all: today's behaviour (benchmark P10's baseline round)
# The registry has no "django_task" workflow, so Django's tasks stay on the framework's immediate backend
# (the example project routes them through WorkflowBackend; its check E101 would stop ``migrate``).
_TASKS_PACKAGE = "django.tasks" if django.VERSION >= (6, 0) else "django_tasks"
TASKS = {"default": {"BACKEND": f"{_TASKS_PACKAGE}.backends.immediate.ImmediateBackend"}}
