"""Where an actor lives when its rows are spread over several databases (DESIGN.md section 21).

An actor's shard is fixed when it is created: a stable hash of its type name and its canonical key text picks
one of ``buckets`` buckets (``bucket_for``), and the buckets map to the shards' database aliases in contiguous
ranges (``ShardMap``). The actor's id carries its bucket (a UUIDv8 whose first 16 bits are the bucket), so a
lookup by id needs no directory (``bucket_of_id``); an id without a bucket (a uuid4 of an actor created
before sharding) lives on the first shard. The id of an actor created by key is computed from (type, key)
(``actor_id_for_key``): any process names it without a lookup, and a step body can address an actor on
another shard before the relay has created it there (DESIGN.md section 21).

Pure Python: the engine and the Django side both use it; nothing here touches a database.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Callable, Sequence
from typing import Any

from . import serde
from .errors import InvalidBucketError as InvalidBucketError
from .errors import ShardConfigError as ShardConfigError
from .records import RelayCreate

#: the most buckets a shard map may have: the bucket is the id's first 4 hex digits (16 bits)
MAX_BUCKETS = 65536
#: the default number of buckets (``RIVET_WORKFLOWS["SHARD_BUCKETS"]``)
DEFAULT_BUCKETS = 256


def key_text(key: list) -> str:
    """Canonical JSON text of an actor key: the text the stores keep in ``key_text`` (unique with the name).

    ``key`` is a list of str and int parts (``keys.normalize_key``). ``SerializationError`` for a part the
    serializer refuses. Compact separators, sorted keys: the same key always gives the same text."""
    return json.dumps(serde.to_json(list(key), where="actor key"), separators=(",", ":"), sort_keys=True)


def bucket_for(name: str, key: list, buckets: int) -> int:
    """The bucket (``0 <= bucket < buckets``) of the actor ``(name, key)``: a stable hash (BLAKE2b, 8 bytes)
    of the type name and the canonical key text (``key_text``), the same in every process and Python
    version (never ``hash()``, which is salted per process). ``InvalidBucketError`` when ``buckets`` is
    not an int in 1..``MAX_BUCKETS``; ``SerializationError`` for a key the serializer refuses."""
    _check_buckets(buckets)
    digest = hashlib.blake2b(digest_size=8)
    digest.update(name.encode("utf-8"))
    digest.update(b"\x00")  # the name ends here: ("ab", ["c"]) and ("a", ["bc"]) do not collide by design
    digest.update(key_text(key).encode("utf-8"))
    return int.from_bytes(digest.digest(), "big") % buckets


def new_actor_id(bucket: int) -> str:
    """A fresh actor id carrying ``bucket``: 32 lowercase hex digits shaped like a UUIDv8 (RFC 9562), the
    bucket in the first 4 hex digits, version nibble ``8`` at index 12, the RFC 4122 variant bits at index
    16, the other 106 bits random. ``InvalidBucketError`` for a bucket outside 0..65535."""
    if not isinstance(bucket, int) or isinstance(bucket, bool) or not 0 <= bucket < MAX_BUCKETS:
        raise InvalidBucketError(f"a bucket is an int in 0..{MAX_BUCKETS - 1}, got {bucket!r}", bucket=bucket)
    return _shaped(int.from_bytes(os.urandom(16), "big"), bucket)


def actor_id_for_key(name: str, key: list, buckets: int) -> str:
    """The id of the actor ``(name, key)`` under a map of ``buckets`` buckets: shaped as ``new_actor_id``
    (UUIDv8, the bucket ``bucket_for(name, key, buckets)`` in the first 4 hex digits), the other 106 bits
    from a BLAKE2b digest (16 bytes) of the type name and the canonical key text, so the same (type, key)
    gets the same id in every process. A key destroyed and created again gets the same id again
    (docs/howto/shards.md says what that means). ``InvalidBucketError`` for a bad ``buckets``,
    ``SerializationError`` for a key the serializer refuses."""
    bucket = bucket_for(name, key, buckets)
    digest = hashlib.blake2b(digest_size=16, person=b"rivet-actor-id")
    digest.update(name.encode("utf-8"))
    digest.update(b"\x00")
    digest.update(key_text(key).encode("utf-8"))
    return _shaped(int.from_bytes(digest.digest(), "big"), bucket)


def _shaped(value: int, bucket: int) -> str:
    """``value`` (128 bits) with ``bucket`` in its top 16 bits, version 8 and the RFC 4122 variant: 32 hex."""
    value = (value & ~(0xFFFF << 112)) | (bucket << 112)  # the bucket: the top 16 bits
    value = (value & ~(0xF << 76)) | (0x8 << 76)  # version 8
    value = (value & ~(0x3 << 62)) | (0x2 << 62)  # variant 10xx, as ``uuid`` sets it
    return f"{value:032x}"


def bucket_of_id(actor_id: str) -> int | None:
    """The bucket an id made by ``new_actor_id`` carries; None for any other id (a uuid4 made before
    sharding, an id of another shape): such an actor lives on the first shard."""
    if not isinstance(actor_id, str) or len(actor_id) != 32:
        return None
    if actor_id[12] != "8" or actor_id[16] not in "89ab":
        return None
    try:
        int(actor_id, 16)
    except ValueError:
        return None
    if actor_id != actor_id.lower():
        return None
    return int(actor_id[:4], 16)


def _check_buckets(buckets: Any) -> None:
    if not isinstance(buckets, int) or isinstance(buckets, bool) or not 1 <= buckets <= MAX_BUCKETS:
        raise InvalidBucketError(
            f"the bucket count is an int in 1..{MAX_BUCKETS}, got {buckets!r}", buckets=buckets
        )


class ShardMap:
    """Buckets over database aliases: bucket ``b`` of ``buckets`` lives on ``aliases[b * len(aliases) //
    buckets]`` (contiguous ranges, as even as the division allows).

    ``aliases``: the shards' database aliases (non-empty strings, no duplicates; the first also holds the
    actors whose id carries no bucket and the schedules stored as data). ``buckets``: an int in
    ``len(aliases)``..``MAX_BUCKETS``. ``ShardConfigError`` (a ``ValueError``) otherwise. Immutable.
    """

    def __init__(self, aliases: Sequence[str], buckets: int = DEFAULT_BUCKETS) -> None:
        if isinstance(aliases, str) or not isinstance(aliases, Sequence) or not aliases:
            raise ShardConfigError(f"shard aliases are a non-empty list of names, got {aliases!r}")
        if not all(isinstance(a, str) and a for a in aliases):
            raise ShardConfigError(f"every shard alias is a non-empty str, got {list(aliases)!r}")
        if len(set(aliases)) != len(aliases):
            raise ShardConfigError(f"shard aliases repeat: {list(aliases)!r}")
        try:
            _check_buckets(buckets)
        except InvalidBucketError as exc:
            raise ShardConfigError(exc.message, buckets=buckets) from None
        if buckets < len(aliases):
            raise ShardConfigError(
                f"{buckets} buckets cannot cover {len(aliases)} shards (at least one bucket per shard)",
                buckets=buckets,
            )
        self.aliases: tuple[str, ...] = tuple(aliases)
        self.buckets = buckets

    def __repr__(self) -> str:
        return f"ShardMap({list(self.aliases)!r}, buckets={self.buckets})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, ShardMap) and (self.aliases, self.buckets) == (other.aliases, other.buckets)

    def __hash__(self) -> int:
        return hash((self.aliases, self.buckets))

    def alias_for_bucket(self, bucket: int) -> str:
        """The alias of ``bucket`` (0..``buckets`` - 1); ``InvalidBucketError`` outside that range. A bucket
        carried by an id made under a larger map is folded (``bucket % buckets``)."""
        if not isinstance(bucket, int) or isinstance(bucket, bool) or not 0 <= bucket < MAX_BUCKETS:
            raise InvalidBucketError(
                f"a bucket is an int in 0..{MAX_BUCKETS - 1}, got {bucket!r}", bucket=bucket
            )
        return self.aliases[(bucket % self.buckets) * len(self.aliases) // self.buckets]

    def alias_for_actor(self, actor_id: str) -> str:
        """The alias holding the actor ``actor_id``: its bucket's, or the first alias for an id without one."""
        bucket = bucket_of_id(actor_id)
        return self.aliases[0] if bucket is None else self.alias_for_bucket(bucket)

    def bucket_for_key(self, name: str, key: list) -> int:
        """``bucket_for(name, key, self.buckets)``."""
        return bucket_for(name, key, self.buckets)

    def actor_id_for_key(self, name: str, key: list) -> str:
        """``actor_id_for_key(name, key, self.buckets)``: the id the actor ``(name, key)`` is created with."""
        return actor_id_for_key(name, key, self.buckets)

    def alias_for_key(self, name: str, key: list) -> str:
        """The alias a new actor ``(name, key)`` is created on (and found on)."""
        return self.alias_for_bucket(self.bucket_for_key(name, key))


def split_outbox(commit: Any, is_local: Callable[[str], bool]) -> None:
    """Move the entries of ``commit.outbox`` (``(target_id, queue, body, completable)``) whose target is not
    local (``is_local(target_id)`` False: it lives on another shard) into ``commit.relay``, keeping their
    order; the local ones stay in the outbox. A ``RelayCreate`` entry (a step body's create of an actor on
    another shard) always moves. The store writes ``relay`` entries with the commit, and the relay delivers
    them to their shard (DESIGN.md section 21)."""
    local, remote = [], []
    for entry in commit.outbox:
        (remote if isinstance(entry, RelayCreate) or not is_local(entry[0]) else local).append(entry)
    if remote:
        commit.outbox = local
        commit.relay.extend(remote)
