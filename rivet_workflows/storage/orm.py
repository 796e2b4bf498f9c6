"""DjangoStore: the engine's storage port on the Django ORM, portable to SQLite and any backend (DESIGN.md 4, 11).

Invariants kept here (the ports docstring has the full list):

* Every executor write is fenced by ``lease_fence`` (the actor id and lease token, a lease held, the actor
  not destroyed): a write that does not match it changes nothing and the commit reports ``ok=False``.
* ``commit`` is the commit-and-wake rule, written once as a template (``_apply``) whose steps are small
  methods a dialect overrides (``PostgresStore`` in ``postgres.py``): fence and actor columns, history,
  message receipts and completions, outbox deliveries with the wake rule, and the release with its
  pending-message re-check, all in one transaction.
* ``claim`` is one conditional UPDATE (free or expired lease) whose row count decides, bumping
  ``lease_token``; it never touches ``wake_at``, so a dead executor's actor is due again as soon as its
  lease expires.
* Deadlines are compared with the DATABASE clock (``now``, Django's ``Now()`` compiled for the backend).
* Where the database has no row locks (SQLite), actions and commits on one actor are serialised by a file
  lock per actor (``locks.ActorLocks``) and actions run outside any transaction.
* The path of one step writes only the history keys it upserts or deletes: no query scans the history.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.db import IntegrityError, connections, transaction
from django.db.models import Count, F, Min, Q, QuerySet
from django.db.models.functions import Now
from django.db.models.sql import Query

from .. import models
from ..engine.model import base_store, errors, fork_copy, observe, ports, serde, wake
from . import mapper
from .actions import ActionStorage
from .audit import AuditStorage
from .connection import Connections, writes_only_through
from .cron import CronStorage
from .flow import FLOW_VALUES, Admission, FlowStorage, lease_free
from .queues import QueueStorage
from .relay import RelayStorage
from .schedules import ScheduleStorage
from .streams import StreamStorage


def lease_fence(actor_id: str, token: int) -> Q:
    """The lease fence of every executor write: the row of ``actor_id`` whose lease ``token`` still holds
    (a lease owner is set) and that is not destroyed. A write filtered by it changes nothing once another
    executor claimed the actor, the lease was released or the actor was destroyed (ports docstring).
    ``postgres.LEASE_FENCE`` is the same predicate in SQL."""
    return Q(pk=actor_id, lease_token=token, lease_owner__isnull=False, destroyed=False)


def _given_id(actor_id: str | None, now: datetime) -> dict[str, Any]:
    """The columns of a new actor whose id the caller gives (a sharded store's, computed from its type and
    key: DESIGN.md section 21): the id, and a first fencing token from the creation instant (microseconds
    since the epoch) instead of 0. A key destroyed and created again gets the same id, and its tokens start
    past any the destroyed actor reached (one claim per microsecond would be needed to catch up), so an
    executor of the destroyed actor is still fenced off. None: a fresh uuid4 id, tokens from 0."""
    if actor_id is None:
        return {}
    return {"actor_id": actor_id, "lease_token": int(now.timestamp() * 1_000_000)}


def _new_lease(owner: str, now: datetime, lease_seconds: float) -> dict[str, Any]:
    """The columns of a claim (``claim``, ``claim_for_operator``): the lease to ``owner`` until ``now`` +
    ``lease_seconds``, the fencing token bumped, and a dead lease's step lock cleared with it."""
    return {
        "lease_owner": owner,
        "lease_expires_at": now + timedelta(seconds=lease_seconds),
        "lease_token": F("lease_token") + 1,
        "step_lock_until": None,
    }


@dataclass
class Written:
    """What the fenced actor write of a commit saw: the database clock of the commit, the actor's state
    column after the write (``serde.to_json`` form), and, when the dialect reads them in the same
    statement, the actor's ``wake_at``/``waiting_for``/``workflow_state`` after it (else None: ``_settle``
    reads them) and whether that write already freed the lease."""

    now: datetime
    state: Any = None
    wake_at: datetime | None = None
    waiting_for: list[str] | None = None
    workflow_state: str | None = None
    released: bool = False
    #: the actor is paused (read with the write; ``CommitResult.paused``)
    paused: bool = False
    #: the actor's type and concurrency group, when the dialect read them with the write
    name: str | None = None
    concurrency_key: str | None = None


class DjangoStore(
    Connections,
    FlowStorage,
    AuditStorage,
    ActionStorage,
    CronStorage,
    QueueStorage,
    RelayStorage,
    ScheduleStorage,
    StreamStorage,
    base_store.BaseStore,
):
    """``ports.Store`` on the Django ORM (database alias ``using``, default ``"default"``).

    ``poll_interval`` (seconds) paces ``run_action`` while a step holds the actor's step lock;
    ``lock_timeout`` (seconds) bounds the wait for an actor's file lock on SQLite; a call that finds its
    thread's connection idle for more than ``idle_check`` seconds checks it first and replaces it when the
    server closed it (``connection``). Thread-safe: every call uses the calling thread's connection. On PostgreSQL use ``storage.store_for()``, which returns the
    ``PostgresStore`` subclass (same contract, raw-SQL hot paths); this class stays correct there too.
    """

    def __init__(
        self,
        using: str = "default",
        *,
        poll_interval: float = 0.02,
        lock_timeout: float = 60.0,
        idle_check: float = 1.0,
    ) -> None:
        self.using = using
        self.poll_interval = poll_interval
        self.lock_timeout = lock_timeout
        self.idle_check = idle_check
        self._locks = False  # decided on first use (``Connections._actor_locks``)
        self._clock_sql: tuple[str, list] | None = None

    def __repr__(self) -> str:
        return f"<{type(self).__name__} using={self.using!r}>"

    def _actors(self):
        return models.Actor.objects.using(self.using)

    def relay_sources(self) -> dict[str, ports.Store]:
        """``{self.using: self}``: this store is one shard (``ports.Store.relay_sources``)."""
        return {self.using: self}

    # ------------------------------------------------------------------ clock

    def now(self) -> datetime:
        """The database clock as an aware UTC datetime (Django's ``Now()`` as the backend writes it)."""
        connection = connections[self.using]
        if self._clock_sql is None:
            query = Query(None)
            sql, params = query.get_compiler(connection=connection).compile(Now().resolve_expression(query))
            self._clock_sql = (f"SELECT {sql}", list(params))
        sql, params = self._clock_sql
        with connection.cursor() as cursor:
            cursor.execute(sql, params)
            value = cursor.fetchone()[0]
        expression = Now()
        for convert in connection.ops.get_db_converters(expression):
            value = convert(value, expression, connection)
        return mapper.utc(value)

    # ------------------------------------------------------------------ actors

    def create_actor(
        self,
        name: str,
        key: list,
        input: Any,
        state: Any,
        *,
        due: bool = False,
        trace_context: dict | None = None,
        flow: ports.Flow | None = None,
        parent_id: str | None = None,
        start_after: float | None = None,
        actor_id: str | None = None,
    ) -> tuple[ports.ActorRecord, bool]:
        """Insert the actor ``(name, key)`` with ``state``, pending, due now (database clock) if ``due``,
        with ``flow``'s controls on the row (``deadline_at`` = now + ``flow.timeout``).

        Returns ``(new record, True)``, or ``(existing record, False)`` with nothing written when the key
        is taken (also by a concurrent creator). SerializationError for an unserializable input or state.
        ``actor_id``: the new actor's id (a sharded store's, carrying its bucket; DESIGN.md section 21);
        None: a fresh uuid4 (``models.new_actor_id``).
        """
        state_json = serde.to_json(state, where="state")
        input_json = serde.to_json(input, where="input")
        text = mapper.key_text(key)
        try:
            with self._atomic():
                now = self._creation_instant()
                row = self._actors().create(
                    **_given_id(actor_id, now),
                    name=name,
                    key=list(key),
                    key_text=text,
                    state=state_json,
                    input=input_json,
                    workflow_state=ports.PENDING,
                    wake_at=(
                        now + timedelta(seconds=start_after)
                        if start_after is not None
                        else now
                        if due
                        else None
                    ),
                    created_at=now,
                    updated_at=now,
                    trace_context=trace_context,
                    deadline_at=(
                        None
                        if flow is None or flow.timeout is None
                        else now + timedelta(seconds=flow.timeout)
                    ),
                    parent_actor_id=parent_id,
                    **mapper.flow_columns(flow),
                )
        except IntegrityError:
            row = self._actors().get(name=name, key_text=text, destroyed=False)
            return mapper.actor_from_model(row), False
        return mapper.actor_from_model(row), True

    def fork_actor(
        self,
        source_id: str,
        name: str,
        key: list,
        input: Any,
        state: Any,
        entries: list[ports.EntryRecord],
        *,
        source_audit: ports.OperatorActionRecord,
        fork_audit: ports.OperatorActionRecord,
        flow: ports.Flow | None = None,
        actor_id: str | None = None,
    ) -> ports.ActorRecord:
        """The fork in one transaction (``ports.Store.fork_actor``): the actor row due now (database
        clock), its history as one ``bulk_create`` in list order (ids, the ``seq``, follow it), both audit
        rows. ``ActorNotFoundError``, ``ActorAlreadyExistsError`` (the unique key), ``SerializationError``
        (checked before anything is written). ``actor_id``: the fork's id (None: a fresh uuid4)."""
        state_json = serde.to_json(state, where="state")
        input_json = serde.to_json(input, where="input")
        text = mapper.key_text(key)
        attributes = fork_copy.copied_attributes(entries)
        try:
            with self._atomic():
                if not self._actors().filter(pk=source_id, destroyed=False).exists():
                    raise errors.ActorNotFoundError(f"no actor with id {source_id!r}", actor_id=source_id)
                plan = self._plan_fork_streams(source_id, entries)
                encoded = [mapper.entry_values(rec, rec.created_at) for rec in plan.entries]
                now = self.now()
                row = self._actors().create(
                    **_given_id(actor_id, now),
                    name=name,
                    key=list(key),
                    key_text=text,
                    state=state_json,
                    input=input_json,
                    attributes=attributes,
                    workflow_state=ports.PENDING,
                    wake_at=now,
                    created_at=now,
                    updated_at=now,
                    deadline_at=(
                        None
                        if flow is None or flow.timeout is None
                        else now + timedelta(seconds=flow.timeout)
                    ),
                    **mapper.flow_columns(flow),
                )
                for values in encoded:
                    values["created_at"] = values["created_at"] or now
                models.HistoryEntry.objects.using(self.using).bulk_create(
                    [models.HistoryEntry(actor_id=row.pk, **values) for values in encoded]
                )
                self._copy_fork_streams(row.pk, plan, now)
                self._write_audit(source_id, source_audit, now)
                self._write_audit(row.pk, fork_audit, now)
        except IntegrityError:
            if self._actors().filter(name=name, key_text=text, destroyed=False).exists():
                raise errors.ActorAlreadyExistsError(
                    f"actor {name!r} with key {key!r} already exists", name=name, key=list(key)
                ) from None
            raise
        return mapper.actor_from_model(row)

    def _creation_instant(self) -> datetime:
        """The database clock, moved past the newest actor's ``created_at`` when the clock has not (SQLite's
        clock ticks in milliseconds): a listing's keyset on ``(created_at, actor_id)`` then sees every new
        actor after every existing one, so paging on while actors are created skips none (DESIGN.md 19)."""
        now = self.now()
        latest = self._actors().order_by("-created_at").values_list("created_at", flat=True).first()
        if latest is not None and mapper.utc(latest) >= now:
            return mapper.utc(latest) + timedelta(microseconds=1)
        return now

    def get_actor(self, actor_id: str) -> ports.ActorRecord:
        """The actor's record; ActorNotFoundError if unknown or destroyed."""
        row = self._actors().filter(pk=actor_id, destroyed=False).first()
        if row is None:
            raise errors.ActorNotFoundError(f"no actor with id {actor_id!r}", actor_id=actor_id)
        return mapper.actor_from_model(row)

    def find_actor(self, name: str, key: list) -> ports.ActorRecord | None:
        """The live (not destroyed) actor ``(name, key)`` or None."""
        row = self._actors().filter(name=name, key_text=mapper.key_text(key), destroyed=False).first()
        return None if row is None else mapper.actor_from_model(row)

    def list_children(self, actor_id: str) -> list[ports.ActorRecord]:
        """The live actors created from ``actor_id``'s runs, oldest first (``ports.Store.list_children``)."""
        rows = (
            self._actors()
            .filter(parent_actor_id=actor_id, destroyed=False)
            .order_by("created_at", "actor_id")
        )
        return [mapper.actor_from_model(row) for row in rows]

    def list_actors(self, name: str | None = None, *, limit: int | None = None) -> list[ports.ActorRecord]:
        """Live actors (of type ``name``, or all), oldest first, at most ``limit``."""
        rows = self._actors().filter(destroyed=False).order_by("created_at", "actor_id")
        if name is not None:
            rows = rows.filter(name=name)
        return [mapper.actor_from_model(row) for row in (rows if limit is None else rows[:limit])]

    def _matching(self, query: ports.ActorFilter) -> QuerySet:
        """The live actors ``query`` selects (``ActorFilter.matches``) as a queryset."""
        rows = self._actors().filter(destroyed=False)
        if query.name is not None:
            rows = rows.filter(name=query.name)
        if query.names is not None:
            rows = rows.filter(name__in=list(query.names))
        if query.exclude_names:
            rows = rows.exclude(name__in=list(query.exclude_names))
        if query.state is not None:
            state = query.state
            if state == ports.PAUSED:
                halted = sorted(ports.HALTED_STATES)
                rows = rows.filter(paused_at__isnull=False).exclude(workflow_state__in=halted)
            elif state in ports.HALTED_STATES:
                rows = rows.filter(workflow_state=state)
            else:
                rows = rows.filter(workflow_state=state, paused_at__isnull=True)
        if query.attributes:
            rows = rows.filter(self._attributes_q(query.attributes))
        for lookup, value in (
            ("created_at__gt", query.created_after),
            ("created_at__lt", query.created_before),
            ("updated_at__gt", query.updated_after),
            ("updated_at__lt", query.updated_before),
        ):
            if value is not None:
                rows = rows.filter(**{lookup: value})
        return rows

    def _attributes_q(self, attributes: dict[str, Any]) -> Q:
        """Every attribute equal to its value: one JSON key lookup each (``PostgresStore``: one jsonb
        containment the GIN index serves). The database's JSON equality decides (SQLite reads ``true`` as 1)."""
        q = Q()
        for key, value in attributes.items():
            q &= Q(**{f"attributes__{key}": value})
        return q

    def find_actors(
        self,
        query: ports.ActorFilter,
        *,
        limit: int = 100,
        after: tuple[datetime, str] | None = None,
        newest_first: bool = False,
        offset: int = 0,
    ) -> list[ports.ActorRecord]:
        """``Store.find_actors``: one query on ``rivet_actor_created_idx`` (keyset on ``(created_at, actor_id)``)."""
        rows = self._matching(query)
        if after is not None:
            created_at, actor_id = after
            way = "lt" if newest_first else "gt"
            rows = rows.filter(
                Q(**{f"created_at__{way}": created_at})
                | Q(created_at=created_at, **{f"actor_id__{way}": actor_id})
            )
        order = ("-created_at", "-actor_id") if newest_first else ("created_at", "actor_id")
        rows = rows.order_by(*order)[offset : offset + limit]
        return [mapper.actor_from_model(row) for row in rows]

    def count_actors(self, query: ports.ActorFilter) -> int:
        """``Store.count_actors``: one ``COUNT``."""
        return self._matching(query).count()

    def actor_counts(self) -> observe.ActorCounts:
        """``observe.ActorCounts`` in one grouped query on the database clock (one row per type and state)."""
        now = Now()
        due = Q(lease_free(now), wake_at__isnull=False, wake_at__lte=now)
        expired = Q(lease_owner__isnull=False, lease_expires_at__lt=now) & ~Q(
            workflow_state__in=sorted(ports.FINISHED_STATES)
        )
        grouped = (
            self._actors()
            .filter(destroyed=False)
            .values_list("name", "workflow_state")
            .annotate(n=Count("pk"), due=Count("pk", filter=due), expired=Count("pk", filter=expired))
            .order_by()
        )
        counts = observe.ActorCounts()
        for name, state, n, n_due, n_expired in grouped:
            counts.by_state[(name, state)] = n
            counts.due += n_due
            counts.leases_expired += n_expired
        return counts

    def defer_start(
        self, actor_id: str, input: Any, state: Any, delay: float, max_delay: float | None
    ) -> ports.ActorRecord | None:
        """Push back an unstarted workflow's start in one conditional UPDATE (``ports.Store.defer_start``):
        input (and state unless ``UNSET``) replaced, ``wake_at`` = now + ``delay`` bounded by
        ``created_at`` + ``max_delay``; the new record, or None when it started or is due already."""
        columns: dict[str, Any] = {"input": serde.to_json(input, where="actor input")}
        if state is not ports.UNSET:
            columns["state"] = serde.to_json(state, where="actor state")
        with self._atomic():
            now = self.now()
            row = self._actors().filter(pk=actor_id, destroyed=False).values("created_at").first()
            if row is None:
                raise errors.ActorNotFoundError(f"no actor with id {actor_id!r}", actor_id=actor_id)
            wake_at = now + timedelta(seconds=delay)
            if max_delay is not None:
                wake_at = min(wake_at, mapper.utc(row["created_at"]) + timedelta(seconds=max_delay))
            changed = (
                self._actors()
                .filter(pk=actor_id, destroyed=False, workflow_state=ports.PENDING, lease_owner__isnull=True)
                .filter(Q(wake_at__isnull=True) | Q(wake_at__gt=now))
                .update(wake_at=wake_at, updated_at=now, **columns)
            )
        return self.get_actor(actor_id) if changed else None

    def destroy_actor(self, actor_id: str) -> None:
        """Delete the actor with its history, messages and cron entries; its key is free again.

        A running executor's next write is then fenced off (``commit`` returns ok=False).
        ActorNotFoundError if there is no such actor.
        """
        with self._atomic():
            self._notify_ended(actor_id)  # before its messages go: the notify asks whether one is open
            deleted, _ = self._actors().filter(pk=actor_id).delete()
        if not deleted:
            raise errors.ActorNotFoundError(f"no actor with id {actor_id!r}", actor_id=actor_id)
        locks = self._actor_locks()
        if locks is not None:
            locks.discard(actor_id)

    # ------------------------------------------------------------------ leases

    def claim(self, actor_id: str, owner: str, lease_seconds: float) -> int | None:
        """Take the actor's lease if it is free or expired; return the new fencing token, else None.

        One UPDATE decides (row count 1 = won); ``wake_at`` is left as it is, a dead step lock is cleared,
        ``updated_at`` is not touched (lease bookkeeping is not a change of the actor).
        """
        with self._atomic():
            now = self.now()
            candidate = (
                self._actors()
                .filter(lease_free(now), pk=actor_id, destroyed=False, paused_at__isnull=True)
                .values(*FLOW_VALUES)
                .first()
            )
            if candidate is None or not Admission(self, now).admit(candidate):
                return None
            won = (
                self._actors()
                .filter(lease_free(now), pk=actor_id, destroyed=False, paused_at__isnull=True)
                .update(**_new_lease(owner, now, lease_seconds))
            )
            if won != 1:
                return None
            token = self._actors().filter(pk=actor_id).values_list("lease_token", flat=True).get()
            self._record_starts([{**candidate, "lease_token": token - 1}], now)
            return token

    def renew(self, actor_id: str, token: int, lease_seconds: float) -> bool:
        """Extend the lease by ``lease_seconds`` from now if ``token`` still holds it; False = lease lost."""
        with self._atomic():
            now = self.now()
            renewed = self._actors().filter(lease_fence(actor_id, token))
            return renewed.update(lease_expires_at=now + timedelta(seconds=lease_seconds)) == 1

    def claim_for_operator(self, actor_id: str, owner: str, lease_seconds: float) -> int | None:
        """Take the lease if it is free or expired, paused or not and whatever the flow limits (no run
        start recorded): one conditional UPDATE as ``claim``; the new fencing token, else None."""
        with self._atomic():
            now = self.now()
            won = (
                self._actors()
                .filter(lease_free(now), pk=actor_id, destroyed=False)
                .update(**_new_lease(owner, now, lease_seconds))
            )
            if won != 1:
                return None
            return self._actors().filter(pk=actor_id).values_list("lease_token", flat=True).get()

    def handoff(self, actor_id: str, token: int, owner: str, lease_seconds: float) -> int | None:
        """Take over the lease held with ``token`` (a sweep's claim handed to a run task): one conditional
        UPDATE bumping the token, so a duplicate delivery of the same hand-over gets None (I5)."""
        with self._atomic():
            now = self.now()
            won = (
                self._actors()
                .filter(lease_fence(actor_id, token))
                .update(
                    lease_owner=owner,
                    lease_expires_at=now + timedelta(seconds=lease_seconds),
                    lease_token=F("lease_token") + 1,
                )
            )
            return token + 1 if won == 1 else None

    def next_deadline(self) -> datetime | None:
        """Earliest ``wake_at`` of any live, unfinished, unpaused actor (None if nothing is scheduled)."""
        return (
            self._actors()
            .filter(wake_at__isnull=False, destroyed=False, paused_at__isnull=True)
            .exclude(workflow_state__in=list(ports.FINISHED_STATES))
            .aggregate(first=Min("wake_at"))["first"]
        )

    # ------------------------------------------------------------------ history

    def load_history(self, actor_id: str) -> list[ports.EntryRecord]:
        """Every history entry of the actor in creation order (``seq`` = row id); ActorNotFoundError."""
        if not self._actors().filter(pk=actor_id, destroyed=False).exists():
            raise errors.ActorNotFoundError(f"no actor with id {actor_id!r}", actor_id=actor_id)
        rows = models.HistoryEntry.objects.using(self.using).filter(actor_id=actor_id).order_by("id")
        return [mapper.entry_from_model(row) for row in rows]

    # ------------------------------------------------------------------ commit: the rule, once

    def commit(self, actor_id: str, token: int, commit: ports.Commit) -> ports.CommitResult:
        """Apply ``commit`` atomically if ``token`` still holds the lease (ok=False and nothing written if not).

        Order inside the transaction (``_apply``): the fenced actor write, history upserts/deletes, message
        receipts/completions, outbox deliveries (woken like ``send``), relay rows (``Commit.relay``, for
        actors on another shard: ``CommitResult.relayed``), then on ``release`` the lease is
        freed and a pending message matching the new ``waiting_for`` makes the actor due now. Serialization
        errors propagate and roll everything back. Without row locks (SQLite) the actor's file lock is held
        too. Every actor row the commit touches is locked up front in id order, so two actors messaging
        each other cannot deadlock; a deadlock the database still reports is retried (nothing was written).
        """
        with self._serialised(actor_id):
            return self._retry_on_deadlock(lambda: self._apply(actor_id, token, commit))

    def _apply(self, actor_id: str, token: int, commit: ports.Commit) -> ports.CommitResult:
        """The commit-and-wake rule of the ports docstring as one transaction of small steps."""
        with self._atomic():
            self._lock_actors(actor_id, commit)
            written = self._write_actor(actor_id, token, commit)
            if written is None:  # fenced off: nothing was written
                return ports.CommitResult(ok=False)
            self._delete_entries(actor_id, commit.deletes)
            self._upsert_entries(actor_id, commit.upserts, written.now)
            self._write_messages(actor_id, commit, written.now)
            if commit.workflow_state in ports.FINISHED_STATES:  # ends the wait of its senders
                self._notify_ended(actor_id)
            woken = self._deliver_outbox(commit, written.now)
            self._write_relay(actor_id, commit.relay, written.now)
            if commit.audit is not None:
                self._write_audit(actor_id, commit.audit, written.now)
            wake_at = self._settle(actor_id, commit, written, woken)
        result = ports.CommitResult(
            ok=True, wake_at=wake_at, woken=woken, paused=written.paused, relayed=bool(commit.relay)
        )
        if isinstance(commit.step_lock_until, datetime):
            result.state = serde.from_json(written.state)
        return result

    def run_in_commit(
        self, actor_id: str, token: int, body: Callable[[], ports.Commit]
    ) -> ports.CommitResult:
        """Run ``body()`` (an atomic step's body; it returns the commit of its outcome) in the transaction
        that applies that commit, on the store's alias (DESIGN.md section 13, ports docstring).

        One transaction per call (a savepoint inside an enclosing one): a fence check first (a zombie's
        body never runs), then ``body()`` (writes through another alias raise ``AtomicStepError``), then
        the commit template (``_apply``) whose fenced actor write re-checks the lease in the same
        transaction; a failed fence marks the transaction for rollback, so the body's writes never land.
        An exception of ``body`` rolls everything back and propagates. On SQLite the actor's file lock and
        the database's write lock are held while ``body`` runs: keep atomic bodies short.
        """
        with self._serialised(actor_id):
            with self._atomic():
                if not self._actors().filter(lease_fence(actor_id, token)).exists():
                    return ports.CommitResult(ok=False)
                with writes_only_through(self.using):
                    commit = body()
                result = self._apply(actor_id, token, commit)
                if not result.ok:
                    transaction.set_rollback(True, using=self.using)
        return result

    def _lock_actors(self, actor_id: str, commit: ports.Commit) -> None:
        """Lock every actor row the commit touches in id order when the outbox reaches other actors."""
        targets = {target for target, _name, _body, _completable in commit.outbox}
        if targets - {actor_id}:
            list(
                self._actors()
                .select_for_update()
                .filter(pk__in=sorted(targets | {actor_id}))
                .order_by("pk")
                .values_list("pk", flat=True)
            )

    def _write_actor(self, actor_id: str, token: int, commit: ports.Commit) -> Written | None:
        """Check the fence under the row lock and write the commit's actor columns; None when fenced off."""
        fields = ("state", "attributes") if isinstance(commit.attributes, dict) else ("state",)
        row = self._actors().select_for_update().filter(lease_fence(actor_id, token)).values(*fields).first()
        if row is None:
            return None
        now = self.now()
        updates = mapper.actor_changes(commit)
        if "attributes" in updates:  # merged under the row lock (SQLite: the actor's file lock too)
            updates["attributes"] = {**(row["attributes"] or {}), **updates["attributes"]}
        state = updates.get("state", row["state"])
        if not commit.lease_only:
            updates["updated_at"] = now
        if updates:
            self._actors().filter(pk=actor_id).update(**updates)
        return Written(now=now, state=state)

    def _delete_entries(self, actor_id: str, keys: list[str]) -> None:
        if keys:
            models.HistoryEntry.objects.using(self.using).filter(
                actor_id=actor_id, key__in=list(keys)
            ).delete()

    def _upsert_entries(self, actor_id: str, upserts: list[ports.EntryRecord], now: datetime) -> None:
        """Insert or overwrite history entries by key (an overwrite keeps the row's id and created_at)."""
        if not upserts:
            return
        rows = [
            models.HistoryEntry(actor_id=actor_id, **mapper.entry_values(rec, rec.created_at or now))
            for rec in upserts
        ]
        models.HistoryEntry.objects.using(self.using).bulk_create(
            rows,
            update_conflicts=True,
            unique_fields=["actor", "key"],
            update_fields=list(mapper.ENTRY_UPDATE_COLUMNS),
        )

    def _deliver_outbox(self, commit: ports.Commit, now: datetime) -> list[str]:
        """Deliver the commit's outbox (``_deliver``, the wake rule of ``send``); the targets it woke."""
        woken: list[str] = []
        for target, name, body, completable in commit.outbox:
            _, woke = self._deliver(target, name, body, completable, now)
            if woke and target not in woken:
                woken.append(target)
        return woken

    def _settle(
        self, actor_id: str, commit: ports.Commit, written: Written, woken: list[str]
    ) -> datetime | None:
        """The end of the commit: the wake rule (``engine.wake.settle``) on the actor's columns, the lease
        freed on ``release``. Returns the final ``wake_at`` and appends this actor to ``woken`` when a
        release leaves it due, then the group's next due actor when the release freed a slot."""
        final = (
            self._actors()
            .filter(pk=actor_id)
            .values("wake_at", "waiting_for", "workflow_state", "paused_at", "name", "concurrency_key")
            .get()
        )
        written.paused = final["paused_at"] is not None
        wake_at = wake.settle(
            workflow_state=final["workflow_state"],
            wake_at=final["wake_at"],
            waiting_for=final["waiting_for"],
            release=commit.release,
            now=written.now,
            has_matching_message=lambda names: self._has_matching_message(actor_id, names),
            defer_until=commit.defer_until,
        )
        tail: dict[str, Any] = {}
        if wake_at != final["wake_at"]:
            tail["wake_at"] = wake_at
        if commit.release:
            tail.update(lease_owner=None, lease_expires_at=None, step_lock_until=None)
            if wake.due_now(wake_at, written.now) and actor_id not in woken:
                woken.append(actor_id)
        if tail:
            self._actors().filter(pk=actor_id).update(**tail)
        if commit.release:  # a freed concurrency slot wakes the next due actor of the group at once
            following = self._next_in_group(actor_id, final["name"], final["concurrency_key"], written.now)
            if following is not None and following not in woken:
                woken.append(following)
        return wake_at
