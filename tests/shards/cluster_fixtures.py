"""Fixtures of the shard tests on real clusters (DESIGN.md section 21): ``two_clusters``, two PostgreSQL
clusters of the tests' own (``tests/shards/clusters.py``), started once per session and removed at its end,
and ``clusters``, the same made sure to run around each test. A test module names both::

    from tests.shards import cluster_fixtures

    two_clusters = cluster_fixtures.two_clusters
    clusters = cluster_fixtures.clusters

(not a conftest.py: tests/shards/conftest.py holds the fixtures of the two-alias tests on one server).
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


#: the clusters every module's ``two_clusters`` shares (each module naming the fixture makes a fixture of its
#: own for pytest), and how many of those are set up
_SHARED: list[Clusters] = []
_USERS = [0]


@pytest.fixture(scope="session")
def two_clusters() -> Iterator[Clusters]:
    """Two PostgreSQL clusters ("default" and "shard1"), each with the database ``rivet_shards``, one pair for
    the session; a test that stops one must start it again (``Clusters.down_for`` does; ``clusters`` makes
    sure). Skipped with the reason when this machine cannot start them."""
    reason = skip_reason()
    if reason:
        pytest.skip(reason)
    if not _SHARED:
        _SHARED.append(Clusters(2).start())
    _USERS[0] += 1
    try:
        yield _SHARED[0]
    finally:
        _USERS[0] -= 1
        if not _USERS[0]:
            _SHARED.pop().remove()


@pytest.fixture
def clusters(two_clusters: Clusters) -> Iterator[Clusters]:
    """``two_clusters``, both running at the start and at the end of the test."""
    two_clusters.ensure_running()
    yield two_clusters
    two_clusters.ensure_running()
