"""Fixtures of the port conformance suite: ``h``, a ``StoreHarness`` per store (see ``support``)."""

from __future__ import annotations

import pytest

from rivet_workflows.testing import MemoryStore

from .support import SHARDED_DIFFERENCES, STORES, StoreHarness


@pytest.fixture(params=STORES)
def h(request: pytest.FixtureRequest) -> StoreHarness:
    """The harness of one store implementation (Django stores on a transactional test database)."""
    kind = request.param
    if kind == "memory":
        return StoreHarness(kind, MemoryStore(poll_interval=0.005))
    from rivet_workflows.storage import DjangoStore, PostgresStore

    if kind.startswith("sharded-"):
        from rivet_workflows.storage.sharded import ShardedStore

        why = SHARDED_DIFFERENCES.get(request.node.originalname)
        if why is not None:
            pytest.skip(f"sharded: {why}")
        return StoreHarness(kind, ShardedStore.build(["default", "shard1"], poll_interval=0.005))

    cls = PostgresStore if kind == "postgres" else DjangoStore
    return StoreHarness(kind, cls(poll_interval=0.005))
