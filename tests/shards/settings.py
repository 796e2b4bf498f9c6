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

then ``manage.py migrate --database default`` and ``manage.py migrate --database shard1``.
"""

from __future__ import annotations

import os

import dj_database_url

from project.settings import *  # noqa: F403
from project.settings import RIVET_WORKFLOWS

_URLS = [url for url in os.environ.get("RIVET_SHARD_URLS", "").split(",") if url]
if not _URLS:
    raise RuntimeError("tests.shards.settings needs RIVET_SHARD_URLS (the shards' URLs, comma-separated)")

#: the database aliases of the shards, in the order of RIVET_SHARD_URLS
SHARD_ALIASES = ["default", *(f"shard{i}" for i in range(1, len(_URLS)))]

DATABASES = {
    alias: dj_database_url.parse(url, conn_max_age=0) for alias, url in zip(SHARD_ALIASES, _URLS, strict=True)
}
RIVET_WORKFLOWS = {
    **RIVET_WORKFLOWS,
    "REGISTRY": os.environ.get("RIVET_REGISTRY") or "tests.shards.workflows.registry",
    "SHARDS": SHARD_ALIASES,
    "SHARD_BUCKETS": int(os.environ.get("RIVET_SHARD_BUCKETS", "256")),
    "LIVE_WAIT_THRESHOLD": float(os.environ.get("RIVET_LIVE_WAIT_THRESHOLD", "1.0")),
}
DATABASE_ROUTERS = ["rivet_workflows.routers.ShardRouter"]
