"""One storage port over several databases: the actors spread over shards (DESIGN.md section 21).

``ShardedStore`` wraps one store per database alias (``store_for(alias)``) and implements ``ports.Store`` by
routing, so the engine sees one store:

* a member about one actor goes to that actor's shard, read from its id (``shards.bucket_of_id``; an id
  without a bucket, made before sharding, lives on the first shard); ``find_actor``/``create_actor``
  route by ``(name, key)`` and a new actor's id is computed from them (``shards.actor_id_for_key``: it
  carries the key's bucket, and any process names it without a lookup: ``actor_id_for_key``);
* a member about a message or a cron entry by its own id asks each shard in turn (one of them has it);
* the schedules stored as data (not about one actor) and the clock live on the first shard;
* the readers of many actors fan out and merge: listings by ``(created_at, actor_id)`` with the same keyset
  cursor, counts summed, deadlines the earliest, ``claim_due`` shard by shard.

A commit whose outbox sends to actors on other shards keeps those entries apart (``shards.split_outbox``
into ``Commit.relay``): the store writes them with the commit and the relay delivers them.
"""

from __future__ import annotations

import contextlib
import heapq
import itertools
import logging
import re
import time
from collections.abc import Callable, Iterable, Iterator
from datetime import datetime
from typing import Any

from ..engine.model import base_store, errors, observe, ports, shards
from ..engine.model.errors import CrossShardForkError as CrossShardForkError

#: members routed to the shard of the actor named by their first argument (an actor id)
BY_ACTOR = (
    "get_actor",
    "defer_start",
    "destroy_actor",
    "claim",
    "claim_for_operator",
    "claim_and_load",
    "load_for_run",
    "flow_retry_at",
    "set_paused",
    "renew",
    "handoff",
    "release",
    "load_history",
    "send",
    "send_and_check",
    "pending_messages",
    "wait_for_messages",
    "watch_sends",
    "run_action",
    "operator_actions",
    "cron_delete",
    "stream_write",
    "stream_close",
    "stream_close_all",
    "stream_discard",
    "stream_read",
    "stream_names",
    "stream_tail",
    "watch_stream",
)
#: members routed to the shard of the actor their first argument (a record) names in ``actor_id``
BY_RECORD = ("cron_upsert", "record_operator_action")
#: members answered by the first shard: the clock and the schedules stored as data
FIRST_SHARD = (
    "now",
    "schedule_create",
    "schedule_get",
    "schedule_list",
    "schedule_set_paused",
    "schedule_delete",
    "schedule_due",
    "schedule_advance",
    "schedule_claim_tick",
    "schedule_fire_done",
    "schedule_stale_fires",
    "schedule_retake_fire",
    "schedule_fires",
    "schedule_next_deadline",
)

#: the last key part of a fork made without a key (``engine.operate.forks.default_key``)
_FORK_PART = re.compile(r"fork-[0-9a-f]{12}")
#: how long ``wait_for_wakes`` listens on one shard before it looks at the next (seconds)
WAKE_SLICE = 0.05
#: outside a sweep pass (``new_pass``), a down shard the readers skip is warned about at most this often (s)
SKIP_WARN_SECONDS = 60.0
#: what a database says of a table of this app it does not have (the shard was never migrated)
_NO_TABLE = re.compile(r'(relation "rivet_workflows_\w+" does not exist|no such table: rivet_workflows_\w+)')

logger = logging.getLogger("rivet_workflows")


def unmigrated(exc: BaseException) -> bool:
    """Whether ``exc`` (or what caused it) says a table of this app is missing: the database was not
    migrated (PostgreSQL's ``relation "rivet_workflows_..." does not exist``, SQLite's ``no such table``)."""
    seen: BaseException | None = exc
    for _ in range(4):
        if seen is None:
            return False
        if _NO_TABLE.search(str(seen)):
            return True
        seen = seen.__cause__ or seen.__context__
    return False


def shard_error(alias: str, exc: BaseException) -> BaseException | None:
    """The error naming the shard ``alias`` to raise instead of ``exc`` (raised by that shard's store or a
    query on it), or None to raise ``exc`` as it is: ``StoreUnavailableError`` with the detail ``shard``
    (the HTTP body's ``metadata.shard``) for a database that cannot be reached or does not exist, and for
    one without this app's tables (the message says ``manage.py migrate --database <alias>``); an error
    naming a shard already (a nested call's) is kept (DESIGN.md section 21)."""
    if isinstance(exc, errors.StoreUnavailableError) and getattr(exc, "shard", None):
        return None
    if unmigrated(exc):
        said = (str(exc).strip().splitlines() or [type(exc).__name__])[0]  # not the SQL the driver quotes
        return errors.StoreUnavailableError(
            f"shard {alias!r} has no rivet_workflows tables: run `manage.py migrate --database {alias}` "
            f"({said})",
            shard=alias,
        )
    if isinstance(exc, errors.StoreUnavailableError):
        return errors.StoreUnavailableError(f"shard {alias!r}: {exc.message}", shard=alias)
    return None


@contextlib.contextmanager
def on_shard(alias: str) -> Iterator[None]:
    """Run the block as a call on the shard ``alias``: what ``shard_error`` names is raised instead (``from``
    the original), anything else as it is."""
    try:
        yield
    except Exception as exc:
        named = shard_error(alias, exc)
        if named is None:
            raise
        raise named from exc


def _by_actor(member: str) -> Callable[..., Any]:
    def routed(self: ShardedStore, actor_id: str, *args: Any, **kwargs: Any) -> Any:
        alias = self.shard_map.alias_for_actor(actor_id)
        with on_shard(alias):
            return getattr(self.stores[alias], member)(actor_id, *args, **kwargs)

    return _named(routed, member, "on the shard of the actor ``actor_id``")


def _by_record(member: str) -> Callable[..., Any]:
    def routed(self: ShardedStore, record: Any, *args: Any, **kwargs: Any) -> Any:
        alias = self.shard_map.alias_for_actor(record.actor_id)
        with on_shard(alias):
            return getattr(self.stores[alias], member)(record, *args, **kwargs)

    return _named(routed, member, "on the shard of the record's ``actor_id``")


def _first_shard(member: str) -> Callable[..., Any]:
    def routed(self: ShardedStore, *args: Any, **kwargs: Any) -> Any:
        with on_shard(self.shard_map.aliases[0]):
            return getattr(self.first, member)(*args, **kwargs)

    return _named(routed, member, "on the first shard")


def _named(routed: Callable[..., Any], member: str, where: str) -> Callable[..., Any]:
    routed.__name__ = routed.__qualname__ = member
    routed.__doc__ = f"``Store.{member}`` {where} (DESIGN.md section 21)."
    return routed


def _default_fork_key(key: list) -> bool:
    """Whether ``key`` ends like the key a fork given none gets (such a fork stays on its source's shard)."""
    return bool(key) and isinstance(key[-1], str) and _FORK_PART.fullmatch(key[-1]) is not None


def _earliest(values: Iterable[datetime | None]) -> datetime | None:
    found = [v for v in values if v is not None]
    return min(found) if found else None


def _order(actor: ports.ActorRecord) -> tuple[datetime, str]:
    return (actor.created_at, actor.actor_id)


class ShardedStore(base_store.BaseStore):
    """The storage port over the shards of ``shard_map`` (``shards.ShardMap``): ``stores`` maps each of its
    aliases to that database's store (``storage.store_for(alias, **options)``, the same class for all).

    ``ShardedStore.build(aliases, buckets, **options)`` makes both. ``same_shard(a_id, b_id)`` says whether
    two actors share a database. ``ShardConfigError`` when ``stores`` does not hold exactly the map's
    aliases.
    """

    def __init__(self, shard_map: shards.ShardMap, stores: dict[str, ports.Store]) -> None:
        if set(stores) != set(shard_map.aliases):
            raise shards.ShardConfigError(
                f"one store per shard alias: the map has {list(shard_map.aliases)}, the stores {sorted(stores)}"
            )
        self.shard_map = shard_map
        self.stores = {alias: stores[alias] for alias in shard_map.aliases}
        self.first = self.stores[shard_map.aliases[0]]
        self.inline_calls = all(s.inline_calls for s in self.stores.values())
        self.notifies_wakes = all(s.notifies_wakes for s in self.stores.values())
        self._turn = itertools.count()  # which shard claim_due asks first (each in turn)
        self._legacy: bool | None = None  # actors made before sharding on the first shard (``_has_legacy``)
        self._warned: dict[str, float] = {}  # alias -> when a skipped down shard was last warned about
        self._down_at: dict[str, float] = {}  # alias -> when a reader skipped it, in this sweep pass
        #: alias -> the error of the shards the readers skipped since ``take_skipped`` (the callers' note)
        self.skipped: dict[str, str] = {}

    @classmethod
    def build(cls, aliases: list[str] | tuple[str, ...], buckets: int = 256, **options: Any) -> ShardedStore:
        """The sharded store over the database ``aliases`` with ``buckets`` buckets; ``options`` go to each
        ``store_for(alias, **options)``. ``ShardConfigError`` for a bad map, Django's
        ``ConnectionDoesNotExist`` for an alias missing from ``settings.DATABASES``."""
        from . import store_for

        shard_map = shards.ShardMap(aliases, buckets)
        return cls(shard_map, {alias: store_for(alias, **dict(options)) for alias in shard_map.aliases})

    def __repr__(self) -> str:
        return f"<ShardedStore {list(self.shard_map.aliases)} buckets={self.shard_map.buckets}>"

    # ------------------------------------------------------------------ routing

    def store_of(self, actor_id: str) -> ports.Store:
        """The store of the shard holding ``actor_id``."""
        return self.stores[self.shard_map.alias_for_actor(actor_id)]

    def alias_of(self, actor_id: str) -> str:
        """The database alias holding ``actor_id``."""
        return self.shard_map.alias_for_actor(actor_id)

    def same_shard(self, a_id: str, b_id: str) -> bool:
        """Whether the actors ``a_id`` and ``b_id`` live on the same shard (a send between them is local)."""
        return self.shard_map.alias_for_actor(a_id) == self.shard_map.alias_for_actor(b_id)

    def actor_id_for_key(self, name: str, key: list) -> str | None:
        """The id of the actor ``(name, key)``, computed (``shards.actor_id_for_key``): the id it was or will
        be created with. None when the key may be held elsewhere under another id: a fork's default key
        (such a fork may live on its source's shard), or any key while the first shard holds actors made
        before sharding (``_has_legacy``: one indexed read, once per store). Reads no row otherwise."""
        if _default_fork_key(key) or self._has_legacy():
            return None
        return self.shard_map.actor_id_for_key(name, key)

    def relay_sources(self) -> dict[str, ports.Store]:
        """Each shard's own store by alias: the relay reads and marks every shard's relay rows on its shard
        (the relay branch's ``Store.relay_sources``; DESIGN.md section 21). A shard a reader found down in
        this sweep pass (``_skip``, less than ``SKIP_WARN_SECONDS`` ago) is left out: its rows wait for a
        later pass, and the pass warns about it once."""
        now = time.monotonic()
        return {
            alias: store
            for alias, store in self.stores.items()
            if now - self._down_at.get(alias, float("-inf")) >= SKIP_WARN_SECONDS
        }

    def _placed(self, name: str, key: list) -> tuple[ports.Store, str]:
        """The store a new actor ``(name, key)`` goes to and its id (computed from them, carrying the bucket)."""
        store = self.stores[self.shard_map.alias_for_key(name, key)]
        return store, self.shard_map.actor_id_for_key(name, key)

    def _any(self, member: str, *args: Any) -> Any:
        """``member(*args)`` on each shard in turn until one does not raise ``LookupError`` (a message or a
        cron entry by its own id); the last shard's ``LookupError`` when none has it. A shard that cannot be
        reached is passed over: its ``StoreUnavailableError`` (naming it) is raised only when no other
        shard has the id (it may be there)."""
        down: BaseException | None = None
        missing: BaseException | None = None
        for alias, store in self.stores.items():
            try:
                with on_shard(alias):
                    return getattr(store, member)(*args)
            except LookupError as exc:
                missing = exc
            except errors.StoreUnavailableError as exc:
                down = down or exc
        assert down is not None or missing is not None
        raise down if down is not None else missing  # type: ignore[misc]

    # ------------------------------------------------------------------ fan-out over the shards

    def _each(self, member: str, *args: Any, skip_down: bool = False, **kwargs: Any) -> list[Any]:
        """``member(*args, **kwargs)`` on every shard, the answers in shard order. A shard that cannot be
        reached (``StoreUnavailableError``, named by ``on_shard``) raises, or with ``skip_down`` is left out
        of this answer: noted in ``skipped`` and warned about once (``_skip``)."""
        found = []
        for alias, store in self.stores.items():
            try:
                with on_shard(alias):
                    found.append(getattr(store, member)(*args, **kwargs))
            except errors.StoreUnavailableError as exc:
                if not skip_down:
                    raise
                self._skip(alias, exc)
        return found

    def _skip(self, alias: str, exc: BaseException) -> None:
        """Note that a reader passed over the down shard ``alias``: in ``skipped``, and one WARNING naming it
        per sweep pass (``new_pass``), at most every ``SKIP_WARN_SECONDS`` outside one."""
        self.skipped[alias] = str(exc)
        now = time.monotonic()
        self._down_at[alias] = now
        if now - self._warned.get(alias, float("-inf")) >= SKIP_WARN_SECONDS:
            self._warned[alias] = now
            logger.warning(
                "shard %r is unavailable, skipped for now (the other shards go on): %s", alias, exc
            )
        else:
            logger.debug("shard %r is unavailable, skipped: %s", alias, exc)

    def new_pass(self) -> None:
        """Start a sweep pass: a shard still down is warned about again once in it (``_skip``)."""
        self._warned.clear()
        self._down_at.clear()

    def take_skipped(self) -> dict[str, str]:
        """The shards the readers skipped (alias -> the error) since the last call, forgotten here."""
        taken, self.skipped = self.skipped, {}
        return taken

    # ------------------------------------------------------------------ actors by (name, key)

    def find_actor(self, name: str, key: list) -> ports.ActorRecord | None:
        """The actor ``(name, key)`` on its key's shard; else, on the first shard when it holds actors made
        before sharding (their id carries no bucket: they stayed where they were); a fork given no key may
        live on its source's shard, so those keys are looked for on every shard."""
        bucket_store = self.stores[self.shard_map.alias_for_key(name, key)]
        found = bucket_store.find_actor(name, key)
        if found is None and _default_fork_key(key):
            for store in self.stores.values():
                if store is not bucket_store and (found := store.find_actor(name, key)) is not None:
                    break
        elif found is None and bucket_store is not self.first and self._has_legacy():
            found = self.first.find_actor(name, key)
        return found

    def create_actor(self, name: str, key: list, input: Any, state: Any, **options: Any) -> tuple[Any, bool]:
        """``create_actor`` on the key's shard with the id computed from ``(name, key)``
        (``shards.actor_id_for_key``; a key destroyed and created again gets the same id again);
        ``(existing, False)`` for a key an actor made before sharding holds on the first shard."""
        store, actor_id = self._placed(name, key)
        if store is not self.first and self._has_legacy():
            existing = self.first.find_actor(name, key)
            if existing is not None and shards.bucket_of_id(existing.actor_id) is None:
                return existing, False
        return store.create_actor(name, key, input, state, actor_id=actor_id, **options)

    def _has_legacy(self) -> bool:
        """Whether the first shard holds live actors made before sharding (ids without a bucket, keyed by any
        hash): its oldest live actor tells, one indexed read, asked once per store. They are found by key
        there too; new ones cannot appear once every process runs sharded."""
        if self._legacy is None:
            oldest = self.first.list_actors(limit=1)
            self._legacy = bool(oldest) and shards.bucket_of_id(oldest[0].actor_id) is None
        return self._legacy

    def fork_actor(
        self, source_id: str, name: str, key: list, *args: Any, **kwargs: Any
    ) -> ports.ActorRecord:
        """The fork on its key's shard when that is the source's; else on the source's shard (the copy reads
        the source's rows there) with a fresh id of that shard's bucket, when the key is the default fork key
        (found by ``find_actor`` on every shard); ``CrossShardForkError`` for a given key of another shard.
        A fork on its key's shard gets the id computed from its key (``shards.actor_id_for_key``)."""
        source_alias = self.shard_map.alias_for_actor(source_id)
        bucket = self.shard_map.bucket_for_key(name, key)
        actor_id = self.shard_map.actor_id_for_key(name, key)
        if self.shard_map.alias_for_bucket(bucket) != source_alias:
            if not _default_fork_key(key):
                raise errors.CrossShardForkError(
                    f"the key {key!r} lives on shard {self.shard_map.alias_for_bucket(bucket)!r}, the source "
                    f"{source_id} on {source_alias!r}: fork without a key",
                    actor_id=source_id,
                )
            source_bucket = shards.bucket_of_id(source_id)
            actor_id = shards.new_actor_id(0 if source_bucket is None else source_bucket)
        return self.stores[source_alias].fork_actor(source_id, name, key, *args, actor_id=actor_id, **kwargs)

    # ------------------------------------------------------------------ the run's writes

    def commit(self, actor_id: str, token: int, commit: ports.Commit) -> ports.CommitResult:
        """``commit`` on the actor's shard, its sends to other shards moved to ``commit.relay`` first."""
        self._split(actor_id, commit)
        return self.store_of(actor_id).commit(actor_id, token, commit)

    def run_in_commit(
        self, actor_id: str, token: int, body: Callable[[], ports.Commit]
    ) -> ports.CommitResult:
        """``run_in_commit`` on the actor's shard; the body's commit split as ``commit``'s."""

        def split_body() -> ports.Commit:
            made = body()
            self._split(actor_id, made)
            return made

        return self.store_of(actor_id).run_in_commit(actor_id, token, split_body)

    def _split(self, actor_id: str, commit: ports.Commit) -> None:
        if commit.outbox:
            shards.split_outbox(commit, lambda target: self.same_shard(actor_id, target))

    # ------------------------------------------------------------------ by a message's or cron entry's id

    def get_message(self, message_id: str) -> ports.MessageRecord:
        """``Store.get_message``: a message id names no shard, so each shard is asked until one has it
        (``MessageNotFoundError`` when none does; a down shard is passed over unless no other has it)."""
        return self._any("get_message", message_id)

    def complete_message(self, message_id: str, response: Any) -> None:
        """``Store.complete_message`` on the shard holding ``message_id`` (found as ``get_message``)."""
        return self._any("complete_message", message_id, response)

    def cron_advance(self, cron_id: str, expected: datetime, next_fire_at: datetime | None) -> bool:
        """True once the shard holding the entry advanced it; a down shard is passed over, its
        ``StoreUnavailableError`` raised only when no other shard advanced it (it may hold the entry)."""
        down: BaseException | None = None
        for alias, store in self.stores.items():
            try:
                with on_shard(alias):
                    if store.cron_advance(cron_id, expected, next_fire_at):
                        return True
            except errors.StoreUnavailableError as exc:
                down = down or exc
        if down is not None:
            raise down
        return False

    def cron_record_fire(self, cron_id: str, fire: ports.CronFireRecord, max_history: int) -> None:
        """``Store.cron_record_fire`` on every reachable shard (a no-op where the entry is not)."""
        # a no-op where the entry is not; the entry's own shard answered cron_due and cron_advance just now
        self._each("cron_record_fire", cron_id, fire, max_history, skip_down=True)

    def cron_fires(self, cron_id: str) -> list[ports.CronFireRecord]:
        """``Store.cron_fires``: the fire log of ``cron_id`` from every shard (only its own has rows)."""
        return [fire for fires in self._each("cron_fires", cron_id) for fire in fires]

    # ------------------------------------------------------------------ readers of many actors

    def list_actors(self, name: str | None = None, *, limit: int | None = None) -> list[ports.ActorRecord]:
        """Every shard's actors merged (``StoreUnavailableError`` naming a shard that cannot be reached)."""
        merged = heapq.merge(*self._each("list_actors", name, limit=limit), key=_order)
        return list(merged if limit is None else itertools.islice(merged, limit))

    def list_children(self, actor_id: str) -> list[ports.ActorRecord]:
        """The children of ``actor_id`` on every shard (a cascade must not miss one): ``StoreUnavailableError``
        naming a shard that cannot be reached. ``reachable_children`` is the page's variant."""
        return list(heapq.merge(*self._each("list_children", actor_id), key=_order))

    def reachable_children(self, actor_id: str) -> tuple[list[ports.ActorRecord], list[str]]:
        """The children of ``actor_id`` on the shards that can be reached, and the aliases of those that
        cannot (skipped, warned about): what an actor's page shows while another shard is down."""
        pages: list[list[ports.ActorRecord]] = []
        down: list[str] = []
        for alias, store in self.stores.items():
            try:
                with on_shard(alias):
                    pages.append(store.list_children(actor_id))
            except errors.StoreUnavailableError as exc:
                self._skip(alias, exc)
                down.append(alias)
        return list(heapq.merge(*pages, key=_order)), down

    def find_actors(
        self,
        query: ports.ActorFilter,
        *,
        limit: int = 100,
        after: tuple[datetime, str] | None = None,
        newest_first: bool = False,
        offset: int = 0,
    ) -> list[ports.ActorRecord]:
        """Each shard's page from the same keyset position, merged in ``(created_at, actor_id)`` order: the
        next ``after`` is the last row's pair, so paging on skips and repeats nothing.
        ``StoreUnavailableError`` naming a shard that cannot be reached (a page without it would skip rows)."""
        pages = self._each("find_actors", query, limit=offset + limit, after=after, newest_first=newest_first)
        merged = heapq.merge(*pages, key=_order, reverse=newest_first)
        return list(itertools.islice(merged, offset, offset + limit))

    def count_actors(self, query: ports.ActorFilter) -> int:
        """The sum over the shards (``StoreUnavailableError`` naming a shard that cannot be reached)."""
        return sum(self._each("count_actors", query))

    def actor_counts(self) -> observe.ActorCounts:
        """The counts summed over the shards that can be reached (a down one is skipped and noted)."""
        total = observe.ActorCounts()
        for counts in self._each("actor_counts", skip_down=True):
            for key, n in counts.by_state.items():
                total.by_state[key] = total.by_state.get(key, 0) + n
            total.due += counts.due
            total.leases_expired += counts.leases_expired
        return total

    def suspended_by_other_version(self, code_version: str, limit: int) -> list[str]:
        """Up to ``limit`` ids over the shards that can be reached (a down one is skipped and noted)."""
        found: list[str] = []
        for alias, store in self.stores.items():
            if len(found) >= limit:
                break
            try:
                with on_shard(alias):
                    found += store.suspended_by_other_version(code_version, limit - len(found))
            except errors.StoreUnavailableError as exc:
                self._skip(alias, exc)
        return found

    def claim_due(
        self, owner: str, limit: int, lease_seconds: float, *, expired_only: bool = False
    ) -> list[tuple[str, int]]:
        """Up to ``limit`` due actors over the shards, each call starting at the next shard so none waits
        behind a busy one. A shard that cannot be reached is skipped for this call (noted in ``skipped``,
        warned about): what the others claimed is returned, never dropped."""
        items = list(self.stores.items())
        start = next(self._turn) % len(items)
        claimed: list[tuple[str, int]] = []
        for alias, store in items[start:] + items[:start]:
            if len(claimed) >= limit:
                break
            try:
                with on_shard(alias):
                    claimed += store.claim_due(
                        owner, limit - len(claimed), lease_seconds, expired_only=expired_only
                    )
            except errors.StoreUnavailableError as exc:
                self._skip(alias, exc)
        return claimed

    def next_deadline(self) -> datetime | None:
        """The earliest deadline over the shards that can be reached (a down one is skipped and noted)."""
        return _earliest(self._each("next_deadline", skip_down=True))

    def cron_list(self, actor_id: str | None = None) -> list[ports.CronRecord]:
        """``Store.cron_list``: the actor's shard for ``actor_id``, else every shard's entries."""
        if actor_id is not None:
            with on_shard(self.alias_of(actor_id)):
                return self.store_of(actor_id).cron_list(actor_id)
        return [record for records in self._each("cron_list") for record in records]

    def cron_due(self, limit: int) -> list[ports.CronRecord]:
        """Up to ``limit`` due entries over the shards that can be reached (a down one is skipped, noted)."""
        due = heapq.merge(*self._each("cron_due", limit, skip_down=True), key=lambda r: r.next_fire_at)
        return list(itertools.islice(due, limit))

    def cron_next_deadline(self) -> datetime | None:
        """The earliest over the shards that can be reached (a down one is skipped and noted)."""
        return _earliest(self._each("cron_next_deadline", skip_down=True))

    # ------------------------------------------------------------------ connections and wakes

    def wait_for_wakes(self, timeout: float) -> list[str]:
        """What each shard heard, listening on them in turn ``WAKE_SLICE`` s at a time for ``timeout``
        seconds in all (a shard's listener keeps what it hears between turns); [] at once when the stores
        hear nothing (``notifies_wakes`` False)."""
        if not self.notifies_wakes:
            return []
        deadline = time.monotonic() + max(timeout, 0.0)
        while True:
            heard = [actor_id for ids in self._each("wait_for_wakes", 0, skip_down=True) for actor_id in ids]
            remaining = deadline - time.monotonic()
            if heard or remaining <= 0:
                return list(dict.fromkeys(heard))
            for alias, store in self.stores.items():
                wait = min(WAKE_SLICE, max(deadline - time.monotonic(), 0.0))
                try:
                    with on_shard(alias):
                        heard += store.wait_for_wakes(wait)
                except errors.StoreUnavailableError as exc:
                    self._skip(alias, exc)
                    time.sleep(wait)  # its slice passes as if it listened: no busy loop while it is down
            if heard:
                return list(dict.fromkeys(heard))

    def release_connection(self) -> None:
        """``Store.release_connection`` on every shard's store."""
        for store in self.stores.values():
            store.release_connection()

    def close_thread_connection(self) -> None:
        """``Store.close_thread_connection`` on every shard's store."""
        for store in self.stores.values():
            store.close_thread_connection()


for _member in BY_ACTOR:
    setattr(ShardedStore, _member, _by_actor(_member))
for _member in BY_RECORD:
    setattr(ShardedStore, _member, _by_record(_member))
for _member in FIRST_SHARD:
    setattr(ShardedStore, _member, _first_shard(_member))
ShardedStore.__abstractmethods__ = frozenset()  # every abstract member is routed above


def _on_shard_of(method: Callable[..., Any], alias_of: Callable[..., str]) -> Callable[..., Any]:
    """``method`` of ``ShardedStore`` with its errors named by the shard ``alias_of(self, *args)`` names
    (``on_shard``)."""

    def call(self: ShardedStore, *args: Any, **kwargs: Any) -> Any:
        with on_shard(alias_of(self, *args)):
            return method(self, *args, **kwargs)

    call.__name__, call.__qualname__, call.__doc__ = method.__name__, method.__qualname__, method.__doc__
    return call


# the members routed by hand above: their errors name the shard they ran on too
for _member, _alias_of in (
    ("find_actor", lambda self, name, key, *_: self.shard_map.alias_for_key(name, key)),
    ("create_actor", lambda self, name, key, *_: self.shard_map.alias_for_key(name, key)),
    ("fork_actor", lambda self, source_id, *_: self.shard_map.alias_for_actor(source_id)),
    ("commit", lambda self, actor_id, *_: self.shard_map.alias_for_actor(actor_id)),
    ("run_in_commit", lambda self, actor_id, *_: self.shard_map.alias_for_actor(actor_id)),
):
    setattr(ShardedStore, _member, _on_shard_of(getattr(ShardedStore, _member), _alias_of))
