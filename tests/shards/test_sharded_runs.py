"""Actors spread over two databases through the client, the executor and the API (DESIGN.md section 21)."""

from __future__ import annotations

import uuid

import pytest
from django.test import override_settings

from rivet_workflows import models
from rivet_workflows.engine.model import ports, shards
from rivet_workflows.engine.runtime import executor
from rivet_workflows.storage import DjangoStore, PostgresStore
from rivet_workflows.storage.sharded import CrossShardForkError, ShardedStore

from .conftest import BASE, SHARDS, both_databases, keys_on

pytestmark = both_databases

ROWS = (models.Actor, models.HistoryEntry, models.QueueMessage, models.StreamItem)


def _rows(alias: str, actor_id: str) -> dict[str, int]:
    """How many rows of each table the actor has in the database ``alias``."""
    counts = {"Actor": models.Actor.objects.using(alias).filter(pk=actor_id).count()}
    for model in ROWS[1:]:
        counts[model.__name__] = model.objects.using(alias).filter(actor_id=actor_id).count()
    return counts


def test_an_actor_is_created_on_its_keys_shard_with_an_id_that_names_it(sharded):
    assert isinstance(sharded.store, ShardedStore)
    client = sharded.registry.client()
    for alias in SHARDS:
        [key] = keys_on(alias, "counter", 1)
        handle = client.counter.get_or_create(key)
        assert sharded.store.shard_map.alias_for_actor(handle.actor_id) == alias
        assert uuid.UUID(hex=handle.actor_id).version == 8
        other = next(a for a in SHARDS if a != alias)
        assert _rows(alias, handle.actor_id)["Actor"] == 1 and _rows(other, handle.actor_id)["Actor"] == 0
        assert handle.call("bump", 2) == 2 and handle.state() == {"n": 2}
        assert client.counter.get_or_create(key).actor_id == handle.actor_id  # found again, not duplicated


def test_a_whole_run_on_shard1_stays_on_shard1(sharded):
    client = sharded.registry.client()
    [key] = keys_on("shard1", "job", 1)
    job = client.job.get_or_create(key)
    executor.drain(sharded, timeout=10)
    assert job.workflow_state() == ports.SLEEPING or job.workflow_state() == ports.PENDING
    job.send("go", {"ok": True})
    executor.drain(sharded, timeout=10)
    assert job.workflow_state() == ports.COMPLETED
    assert job.record().output == {"first": {"key": key}, "go": {"ok": True}, "done": "done"}
    on_shard1 = _rows("shard1", job.actor_id)
    assert on_shard1["Actor"] == 1 and on_shard1["HistoryEntry"] >= 3
    assert on_shard1["QueueMessage"] == 1 and on_shard1["StreamItem"] >= 1
    assert _rows("default", job.actor_id) == dict.fromkeys(on_shard1, 0)
    assert [i.value for i in sharded.store.stream_read(job.actor_id, "log", 0, 10).items] == [
        {"got": {"ok": True}}
    ]


def test_workflows_on_both_shards_complete_in_one_drain(sharded):
    client = sharded.registry.client()
    jobs = [client.job.get_or_create(k) for alias in SHARDS for k in keys_on(alias, "job", 2, "both")]
    executor.drain(sharded, timeout=10)
    for job in jobs:
        job.send("go", 1)
    executor.drain(sharded, timeout=10)
    assert {job.workflow_state() for job in jobs} == {ports.COMPLETED}
    assert sharded.store.next_deadline() is None


def _make_mixed(sharded, count: int = 5) -> list[str]:
    client = sharded.registry.client()
    ids = []
    for i in range(count):  # interleaved over the shards, so the merge has work to do
        for alias in SHARDS:
            [key] = keys_on(alias, "counter", 1, f"mix{i}")
            ids.append(client.counter.get_or_create(key).actor_id)
    return ids


def test_listing_merges_both_shards_page_by_page_without_gap_or_repeat(sharded):
    ids = _make_mixed(sharded)
    client = sharded.registry.client()
    seen, cursor = [], None
    while True:
        page = client.list_actors(name="counter", limit=3, cursor=cursor)
        seen += [item.actor_id for item in page.items]
        cursor = page.next_cursor
        if cursor is None:
            break
    assert sorted(seen) == sorted(ids) and len(seen) == len(set(seen))
    records = [sharded.store.get_actor(i) for i in seen]
    assert [(r.created_at, r.actor_id) for r in records] == sorted(
        (r.created_at, r.actor_id) for r in records
    )
    assert {sharded.store.alias_of(i) for i in seen} == set(SHARDS)
    assert sharded.store.count_actors(ports.ActorFilter(name="counter")) == len(ids)
    assert [a.actor_id for a in sharded.store.list_actors("counter", limit=4)] == seen[:4]


def test_the_http_listing_spans_both_shards_with_a_cursor(sharded, client):
    ids = _make_mixed(sharded, 3)
    seen, url = [], "/api/rivet/actors?name=counter&limit=4"
    while url:
        page = client.get(url, HTTP_AUTHORIZATION="Bearer shard-token").json()
        assert page["count"] == len(ids)
        seen += [item["actor_id"] for item in page["items"]]
        url = page["next_cursor"] and f"/api/rivet/actors?name=counter&limit=4&cursor={page['next_cursor']}"
    assert sorted(seen) == sorted(ids) and len(seen) == len(set(seen))


def test_actor_counts_sum_the_shards(sharded):
    ids = _make_mixed(sharded, 3)
    counts = sharded.store.actor_counts()
    assert sum(counts.by_state.values()) == len(ids)
    per_shard = [store.actor_counts() for store in sharded.store.stores.values()]
    assert all(sum(c.by_state.values()) == 3 for c in per_shard)


def test_a_fork_keeps_its_source_shard_and_is_found_by_id_and_key(sharded):
    client = sharded.registry.client()
    [key] = keys_on("shard1", "job", 1, "fork")
    job = client.job.get_or_create(key)
    executor.drain(sharded, timeout=10)
    forks = [job.fork(reason="test") for _ in range(6)]  # default keys hash to either shard
    for fork in forks:
        assert sharded.store.alias_of(fork.actor_id) == "shard1"
        assert client.job.get(fork.key).actor_id == fork.actor_id
        assert _rows("shard1", fork.actor_id)["HistoryEntry"] >= 1
    [mine] = keys_on("shard1", "job", 1, "given")
    assert sharded.store.alias_of(job.fork(key=mine).actor_id) == "shard1"
    [theirs] = keys_on("default", "job", 1, "given")
    with pytest.raises(CrossShardForkError):
        job.fork(key=theirs)
    assert client.job.get_or_create(theirs).actor_id != job.actor_id  # nothing was written


def test_one_alias_or_none_is_todays_store_with_uuid4_ids(unsharded):
    plain = (DjangoStore, PostgresStore)
    assert type(unsharded.store) in plain
    handle = unsharded.registry.client().counter.get_or_create("u")
    assert uuid.UUID(hex=handle.actor_id).version == 4 and shards.bucket_of_id(handle.actor_id) is None
    with override_settings(RIVET_WORKFLOWS={**BASE, "SHARDS": ["default"]}):
        from rivet_workflows.django_runtime import get_runtime

        assert type(get_runtime().store) in plain
        other = get_runtime().registry.client().counter.get_or_create("u2")
        assert uuid.UUID(hex=other.actor_id).version == 4


def test_a_thousand_actors_spread_within_ten_percent_per_shard(sharded):
    client = sharded.registry.client()
    for i in range(1000):
        client.counter.create(f"spread-{i}")
    per_shard = {alias: models.Actor.objects.using(alias).filter(name="counter").count() for alias in SHARDS}
    assert sum(per_shard.values()) == 1000
    assert all(450 <= n <= 550 for n in per_shard.values()), per_shard
    assert sharded.store.count_actors(ports.ActorFilter(name="counter")) == 1000


def test_sends_to_another_shard_leave_the_outbox_for_the_relay(sharded, monkeypatch):
    """What the relay builds on: a commit's sends to actors of other shards move to ``Commit.relay`` (in
    order), the local ones stay in the outbox and are delivered with the commit."""
    client, store = sharded.registry.client(), sharded.store
    [here_key, local_key] = keys_on("default", "counter", 2, "send")
    [remote_key] = keys_on("shard1", "counter", 1, "send")
    sender, local, remote = (
        client.counter.get_or_create(k).actor_id for k in (here_key, local_key, remote_key)
    )
    assert store.same_shard(sender, local) and not store.same_shard(sender, remote)
    seen = []
    real_commit = store.stores["default"].commit

    def spy(actor_id, token, commit):
        seen.append((list(commit.outbox), list(commit.relay)))
        return real_commit(actor_id, token, commit)

    monkeypatch.setattr(store.stores["default"], "commit", spy)
    token = store.claim(sender, "test", 30)
    outbox = [(remote, "q", 1, False), (local, "q", 2, False), (remote, "q", 3, True)]
    assert store.commit(sender, token, ports.Commit(outbox=list(outbox))).ok
    assert seen == [([outbox[1]], [outbox[0], outbox[2]])]
    made = ports.Commit(
        outbox=list(outbox), release=True
    )  # an atomic step's commit, built in the transaction
    assert store.run_in_commit(sender, token, lambda: made).ok
    assert (made.outbox, made.relay) == ([outbox[1]], [outbox[0], outbox[2]])
    assert [m.body for m in store.pending_messages(local, None, 10)] == [2, 2]


def test_actors_made_before_sharding_stay_found_by_id_and_key(sharded):
    """Turning ``SHARDS`` on over an existing database: its actors keep their uuid4 ids on the first shard,
    and are found there by id and by key even when their key now hashes to another shard."""
    with override_settings(RIVET_WORKFLOWS=BASE):  # not sharded yet
        from rivet_workflows.django_runtime import get_runtime

        [key] = keys_on("shard1", "counter", 1, "legacy")
        old = get_runtime().registry.client().counter.get_or_create(key)
        old.call("bump", 5)
    assert shards.bucket_of_id(old.actor_id) is None
    from rivet_workflows.django_runtime import get_runtime

    store = get_runtime().store
    assert isinstance(store, ShardedStore)
    client = get_runtime().registry.client()
    assert client.counter.get_or_create(key).actor_id == old.actor_id  # no duplicate on shard1
    assert client.counter.get(key).state() == {"n": 5}
    assert client.counter.get_for_id(old.actor_id).call("bump") == 6
    assert models.Actor.objects.using("shard1").filter(name="counter").count() == 0
    [fresh] = keys_on("shard1", "counter", 1, "fresh")
    assert store.alias_of(client.counter.get_or_create(fresh).actor_id) == "shard1"


def test_the_relay_reads_each_shards_own_store(sharded):
    sources = sharded.store.relay_sources()
    assert list(sources) == SHARDS and all(sources[a] is sharded.store.stores[a] for a in SHARDS)
