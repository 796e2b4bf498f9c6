"""Fixtures of the sharded tests: two database aliases, ``default`` and ``shard1`` (project/settings.py), and
``RIVET_WORKFLOWS["SHARDS"]`` naming both (DESIGN.md section 21)."""

from __future__ import annotations

import itertools
from typing import Any

import pytest
from django.test import override_settings

SHARDS = ["default", "shard1"]
BASE = {
    "REGISTRY": "tests.shards.registry.registry",
    "DISPATCHER": "rivet_workflows.driver.dispatch.LocalDispatcher",
    "POLL_INTERVAL": 0.01,
    "LEASE_SECONDS": 5,
    "DEV_MODE": True,
    "API_TOKEN": "shard-token",
}
#: what a sharded test marks itself with: both databases, real transactions (steps run on other threads)
both_databases = pytest.mark.django_db(databases=SHARDS, transaction=True)


def keys_on(alias: str, name: str, count: int, prefix: str = "k") -> list[list[str]]:
    """``count`` keys of the actor type ``name`` whose actors live on ``alias`` under ``SHARDS``."""
    from rivet_workflows.engine.model.shards import ShardMap

    shard_map = ShardMap(SHARDS)
    found = (
        [f"{prefix}-{i}"]
        for i in itertools.count()
        if shard_map.alias_for_key(name, [f"{prefix}-{i}"]) == alias
    )
    return list(itertools.islice(found, count))


@pytest.fixture
def sharded() -> Any:
    """The runtime of ``RIVET_WORKFLOWS`` with ``SHARDS = ["default", "shard1"]`` (a ``ShardedStore``)."""
    from rivet_workflows.django_runtime import get_runtime

    with override_settings(RIVET_WORKFLOWS={**BASE, "SHARDS": SHARDS}):
        yield get_runtime()


@pytest.fixture
def unsharded() -> Any:
    """The runtime of ``RIVET_WORKFLOWS`` without ``SHARDS`` (today's one-database store)."""
    from rivet_workflows.django_runtime import get_runtime

    with override_settings(RIVET_WORKFLOWS=BASE):
        yield get_runtime()


@pytest.fixture
def empty_broker(monkeypatch) -> list[str]:
    """The sweep sees an empty broker (no backlog left by earlier tests in a shared Redis database holds its
    claims back) and its run messages are recorded here (actor ids) instead of queued for later tests."""
    from rivet_workflows.driver import tasks

    queued: list[str] = []
    monkeypatch.setattr(tasks, "queued_runs", lambda: 0)
    monkeypatch.setattr(tasks, "_queue_run", lambda runtime, actor_id, token: queued.append(actor_id))
    return queued
