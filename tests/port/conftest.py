"""Fixtures of the port conformance suite: ``h``, a ``StoreHarness`` per store (see ``support``)."""

from __future__ import annotations

import pytest

from rivet_workflows.testing import MemoryStore

from .support import STORES, StoreHarness


@pytest.fixture(params=STORES)
def h(request: pytest.FixtureRequest) -> StoreHarness:
    """The harness of one store implementation (Django stores on a transactional test database)."""
    kind = request.param
    if kind == "memory":
        return StoreHarness(kind, MemoryStore(poll_interval=0.005))
    from rivet_workflows.storage import DjangoStore, PostgresStore

    cls = PostgresStore if kind == "postgres" else DjangoStore
    return StoreHarness(kind, cls(poll_interval=0.005))
