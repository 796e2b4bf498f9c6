"""The shard map without a database: stable buckets, ids that carry them, the ranges (DESIGN.md section 21)."""

from __future__ import annotations

import collections
import subprocess
import sys
import uuid

import pytest

from rivet_workflows.engine.model import shards
from rivet_workflows.storage import mapper


def test_a_bucket_is_the_same_in_every_process():
    here = [shards.bucket_for("order", ["c-42", 7], 256), shards.bucket_for("order", ["x"], 65536)]
    code = (
        "from rivet_workflows.engine.model import shards; print(shards.bucket_for('order', ['c-42', 7], 256),"
    )
    code += " shards.bucket_for('order', ['x'], 65536))"
    other = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert other.stdout.split() == [str(b) for b in here]
    assert shards.bucket_for("order", ["c-42", 7], 256) == 60  # fixed: data placed once stays found


def test_the_hash_reads_the_stores_canonical_key_text():
    assert shards.key_text(["a", 1]) == mapper.key_text(["a", 1]) == '["a",1]'
    assert shards.bucket_for("ab", ["c"], 65536) != shards.bucket_for("a", ["bc"], 65536)


def test_an_id_carries_its_bucket_and_looks_like_a_uuid_v8():
    for bucket in (0, 1, 255, 4096, 65535):
        actor_id = shards.new_actor_id(bucket)
        assert len(actor_id) == 32 and actor_id == actor_id.lower()
        parsed = uuid.UUID(hex=actor_id)
        assert parsed.version == 8 and parsed.variant == uuid.RFC_4122
        assert shards.bucket_of_id(actor_id) == bucket
    assert shards.new_actor_id(7) != shards.new_actor_id(7)


def test_other_ids_have_no_bucket_and_live_on_the_first_shard():
    legacy = uuid.uuid4().hex
    assert shards.bucket_of_id(legacy) is None
    for other in ("", "nope", legacy.upper(), "x" * 32, 42):
        assert shards.bucket_of_id(other) is None
    assert shards.ShardMap(["a", "b"], 4).alias_for_actor(legacy) == "a"


def test_buckets_map_to_aliases_in_contiguous_ranges():
    m = shards.ShardMap(["a", "b", "c"], 9)
    assert [m.alias_for_bucket(b) for b in range(9)] == ["a"] * 3 + ["b"] * 3 + ["c"] * 3
    m2 = shards.ShardMap(["a", "b"], 256)
    assert {m2.alias_for_bucket(b) for b in range(128)} == {"a"}
    assert {m2.alias_for_bucket(b) for b in range(128, 256)} == {"b"}
    actor_id = shards.new_actor_id(m2.bucket_for_key("order", ["k"]))
    assert m2.alias_for_actor(actor_id) == m2.alias_for_key("order", ["k"])


def test_a_thousand_keys_spread_within_ten_percent_per_shard():
    m = shards.ShardMap(["default", "shard1"], 256)
    counts = collections.Counter(m.alias_for_key("order", [f"customer-{i}"]) for i in range(1000))
    assert set(counts) == {"default", "shard1"}
    assert all(450 <= n <= 550 for n in counts.values()), counts


@pytest.mark.parametrize(
    ("aliases", "buckets"),
    [
        ([], 256),
        ("default", 256),
        (["a", "a"], 256),
        (["a", ""], 256),
        (["a", "b", "c"], 2),
        (["a"], 0),
        (["a"], 65537),
        (["a"], True),
        (["a"], 2.0),
    ],
)
def test_a_bad_map_is_a_typed_value_error(aliases, buckets):
    with pytest.raises(shards.ShardConfigError) as caught:
        shards.ShardMap(aliases, buckets)
    assert isinstance(caught.value, ValueError)


def test_bad_buckets_are_typed_value_errors():
    for call in (
        lambda: shards.new_actor_id(65536),
        lambda: shards.new_actor_id(-1),
        lambda: shards.bucket_for("t", ["k"], 0),
        lambda: shards.ShardMap(["a"], 4).alias_for_bucket(-1),
    ):
        with pytest.raises(shards.InvalidBucketError):
            call()


def test_split_outbox_moves_the_remote_sends_to_the_relay_in_order():
    from rivet_workflows.engine.model import ports

    commit = ports.Commit(outbox=[("l1", "q", 1, False), ("r1", "q", 2, False), ("l2", "q", 3, True)])
    shards.split_outbox(commit, lambda target: target.startswith("l"))
    assert commit.outbox == [("l1", "q", 1, False), ("l2", "q", 3, True)]
    assert commit.relay == [("r1", "q", 2, False)]
    assert not commit.lease_only


def test_an_id_computed_from_type_and_key_is_the_same_everywhere_and_carries_the_bucket():
    actor_id = shards.actor_id_for_key("order", ["c-42", 7], 256)
    code = "from rivet_workflows.engine.model import shards; print(shards.actor_id_for_key('order', ['c-42', 7], 256))"
    other = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert other.stdout.strip() == actor_id
    parsed = uuid.UUID(hex=actor_id)
    assert parsed.version == 8 and parsed.variant == uuid.RFC_4122
    assert shards.bucket_of_id(actor_id) == shards.bucket_for("order", ["c-42", 7], 256) == 60
    assert shards.ShardMap(["a", "b"]).actor_id_for_key("order", ["c-42", 7]) == actor_id
    others = {
        shards.actor_id_for_key("order", ["c-43", 7], 256),
        shards.actor_id_for_key("invoice", ["c-42", 7], 256),
        shards.actor_id_for_key("ab", ["c"], 256),
        shards.actor_id_for_key("a", ["bc"], 256),
    }
    assert actor_id not in others and len(others) == 4
    with pytest.raises(shards.InvalidBucketError):
        shards.actor_id_for_key("order", ["x"], 0)
