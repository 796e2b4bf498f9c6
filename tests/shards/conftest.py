"""Fixtures of the shard tests (DESIGN.md section 21): ``two_clusters``, two PostgreSQL clusters of the
tests' own (``tests/shards/clusters.py``), started once per session and removed at its end.

They run in the suite's PostgreSQL pass (``DATABASE_URL=postgres://...``) on a machine with PostgreSQL's
server programs (Debian's ``/usr/lib/postgresql/*/bin``: initdb, pg_ctl, postgres); skipped otherwise.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.conftest import is_postgres
from tests.shards.clusters import Clusters

NO_SERVER_PROGRAMS = (
    "needs PostgreSQL's server programs (initdb, pg_ctl, postgres) in /usr/lib/postgresql/*/bin or on PATH "
    "to start clusters of its own"
)
NOT_POSTGRES = "runs in the PostgreSQL pass (set DATABASE_URL=postgres://...)"


def skip_reason() -> str | None:
    """Why the shard tests cannot run here (None: they can)."""
    if not is_postgres():
        return NOT_POSTGRES
    if not Clusters.available():
        return NO_SERVER_PROGRAMS
    return None


@pytest.fixture(scope="session")
def two_clusters() -> Iterator[Clusters]:
    """Two PostgreSQL clusters ("default" and "shard1"), each with the database ``rivet_shards``; a test
    that stops one must start it again (``Clusters.down_for`` does), and each test gets them running
    (``ensure_running``). Skipped with the reason when this machine cannot start them."""
    reason = skip_reason()
    if reason:
        pytest.skip(reason)
    clusters = Clusters(2).start()
    try:
        yield clusters
    finally:
        clusters.remove()


@pytest.fixture
def clusters(two_clusters: Clusters) -> Iterator[Clusters]:
    """``two_clusters``, both running at the start and at the end of the test."""
    two_clusters.ensure_running()
    yield two_clusters
    two_clusters.ensure_running()
