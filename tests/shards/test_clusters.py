"""The harness of the shard tests itself (``tests/shards/clusters.py``): two throwaway PostgreSQL clusters,
a database in each, one stopped and started again on the same port while the other keeps serving."""

from __future__ import annotations

import time

import psycopg
import pytest

from tests.shards import cluster_fixtures
from tests.shards.clusters import Clusters, aliases_for

# the fixtures of the clusters (not a conftest.py: tests/shards/conftest.py is the one-server tests')
two_clusters = cluster_fixtures.two_clusters
clusters = cluster_fixtures.clusters

pytestmark = [pytest.mark.postgres]


def test_two_clusters_are_two_servers_with_a_database_each(clusters: Clusters):
    assert clusters.aliases == ["default", "shard1"]
    ports = {server.port for server in clusters.servers}
    assert len(ports) == 2
    identities = set()
    for shard in clusters.aliases:
        with clusters.connect(shard) as conn:
            row = conn.execute(
                "SELECT current_database(), inet_server_port(), current_setting('data_directory')"
            ).fetchone()
        assert row[0] == "rivet_shards"
        assert row[1] == clusters.server(shard).port
        identities.add(row[2])
    assert len(identities) == 2  # two data directories: two clusters, not two databases of one
    assert [url.rsplit("/", 1)[1] for url in clusters.urls()] == ["rivet_shards", "rivet_shards"]
    assert clusters.env()["RIVET_SHARD_URLS"].count(",") == 1


def test_a_row_written_on_one_cluster_is_not_on_the_other(clusters: Clusters):
    for shard in (0, 1):
        with clusters.connect(shard) as conn:
            conn.execute("CREATE TABLE IF NOT EXISTS probe (shard text)")
            conn.execute("DELETE FROM probe")
    with clusters.connect("default") as conn:
        conn.execute("INSERT INTO probe VALUES ('default')")
    assert clusters.count("default", "SELECT count(*) FROM probe") == 1
    assert clusters.count("shard1", "SELECT count(*) FROM probe") == 0


def test_one_cluster_stopped_for_a_while_comes_back_on_its_port_with_its_rows(clusters: Clusters):
    with clusters.connect("shard1") as conn:
        conn.execute("CREATE TABLE IF NOT EXISTS kept (n int)")
        conn.execute("INSERT INTO kept VALUES (1)")
    began = time.monotonic()
    outage = clusters.down_for("shard1", 2.0, background=True)
    deadline = time.monotonic() + 30
    while clusters.running("shard1") and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not clusters.running("shard1")
    with pytest.raises(psycopg.OperationalError):
        clusters.connect("shard1")
    assert clusters.count("default", "SELECT 1") == 1  # the other shard keeps serving
    outage.join(timeout=60)
    assert time.monotonic() - began >= 2.0
    assert clusters.running("shard1")
    assert clusters.count("shard1", "SELECT count(*) FROM kept WHERE n = 1") >= 1


def test_a_crash_stop_and_a_kill_recover_too(clusters: Clusters):
    with clusters.connect(1) as conn:
        conn.execute("CREATE TABLE IF NOT EXISTS crashed (n int)")
        conn.execute("INSERT INTO crashed VALUES (7)")
    clusters.down_for(1, 0.5, mode="immediate")
    assert clusters.count(1, "SELECT count(*) FROM crashed WHERE n = 7") >= 1
    clusters.kill(1)
    assert not clusters.running(1)
    clusters.start_again(1)
    assert clusters.count(1, "SELECT count(*) FROM crashed WHERE n = 7") >= 1


def test_fresh_database_gives_each_test_an_empty_one(clusters: Clusters):
    urls = clusters.fresh_database("rivet_shards_fresh")
    assert [u.rsplit("/", 1)[1] for u in urls] == ["rivet_shards_fresh"] * 2
    for shard in (0, 1):
        with clusters.connect(shard, "rivet_shards_fresh") as conn:
            conn.execute("CREATE TABLE t (n int)")
    urls = clusters.fresh_database("rivet_shards_fresh")  # dropped and made again: no table t
    assert (
        clusters.count(
            0, "SELECT count(*) FROM pg_tables WHERE tablename = 't'", database="rivet_shards_fresh"
        )
        == 0
    )


def test_the_aliases_and_bad_names():
    assert aliases_for(3) == ["default", "shard1", "shard2"]
    with pytest.raises(ValueError):
        aliases_for(0)
    with pytest.raises(KeyError):
        Clusters(2).server("shard9")
