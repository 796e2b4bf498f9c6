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

import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.db import IntegrityError, connections, transaction
from django.db.models import Case, Count, DateTimeField, F, Min, Q, Value, When
from django.db.models.functions import Now
from django.db.models.sql import Query

from .. import models
from ..engine import errors, observe, ports, serde
from . import mapper
from .connection import Connections, user_code, writes_only_through
from .cron import CronStorage
from .queues import QueueStorage


def lease_fence(actor_id: str, token: int) -> Q:
    """The lease fence of every executor write: the row of ``actor_id`` whose lease ``token`` still holds
    (a lease owner is set) and that is not destroyed. A write filtered by it changes nothing once another
    executor claimed the actor, the lease was released or the actor was destroyed (ports docstring).
    ``postgres.LEASE_FENCE`` is the same predicate in SQL."""
    return Q(pk=actor_id, lease_token=token, lease_owner__isnull=False, destroyed=False)


def lease_free(now: datetime) -> Q:
    """Actors whose lease is free or expired at ``now`` (a claim may take them)."""
    return Q(lease_expires_at__isnull=True) | Q(lease_expires_at__lt=now)


#: the actor columns a claim reads to apply the flow rules
_FLOW_VALUES = (
    "actor_id",
    "name",
    "concurrency_key",
    "concurrency_limit",
    "rate_count",
    "rate_per",
    "lease_token",
)

#: how many batches of due actors ``claim_due`` looks at to fill its batch past full groups
_SCAN_BATCHES = 8


def _window(store: DjangoStore, row: dict[str, Any], now: datetime):
    """The run starts of ``row``'s group within its rate window (``FlowStart`` rows)."""
    return models.FlowStart.objects.using(store.using).filter(
        name=row["name"],
        group=row["concurrency_key"],
        started_at__gt=now - timedelta(seconds=row["rate_per"]),
    )


class _Admission:
    """The flow check of one claim transaction (portable): per group, the live leases and the run starts in
    the rate window, counted once and updated as this claim admits actors."""

    def __init__(self, store: DjangoStore, now: datetime) -> None:
        self.store = store
        self.now = now
        self.live: dict[tuple[str, str], int] = {}
        self.starts: dict[tuple[str, str], int] = {}

    def admit(self, row: dict[str, Any]) -> bool:
        """True (and the slot counted) when ``row`` (``_FLOW_VALUES``) may be claimed now."""
        if row["concurrency_key"] is None:
            return True
        group = (row["name"], row["concurrency_key"])
        limit, rate = row["concurrency_limit"], row["rate_count"]
        if limit is not None:
            if group not in self.live:
                self.live[group] = (
                    self.store._actors()
                    .filter(
                        name=row["name"],
                        concurrency_key=row["concurrency_key"],
                        lease_owner__isnull=False,
                        lease_expires_at__gt=self.now,
                        destroyed=False,
                    )
                    .count()
                )
            if self.live[group] >= limit:
                return False
        if rate is not None:
            if group not in self.starts:
                self.starts[group] = _window(self.store, row, self.now).count()
            if self.starts[group] >= rate:
                return False
            self.starts[group] += 1
        if limit is not None:
            self.live[group] += 1
        return True


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


class DjangoStore(Connections, CronStorage, QueueStorage, ports.BaseStore):
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
    ) -> tuple[ports.ActorRecord, bool]:
        """Insert the actor ``(name, key)`` with ``state``, pending, due now (database clock) if ``due``,
        with ``flow``'s controls on the row (``deadline_at`` = now + ``flow.timeout``).

        Returns ``(new record, True)``, or ``(existing record, False)`` with nothing written when the key
        is taken (also by a concurrent creator). SerializationError for an unserializable input or state.
        """
        state_json = serde.to_json(state, where="state")
        input_json = serde.to_json(input, where="input")
        text = mapper.key_text(key)
        try:
            with self._atomic():
                now = self.now()
                row = self._actors().create(
                    name=name,
                    key=list(key),
                    key_text=text,
                    state=state_json,
                    input=input_json,
                    workflow_state=ports.PENDING,
                    wake_at=now if due else None,
                    created_at=now,
                    updated_at=now,
                    trace_context=trace_context,
                    deadline_at=(
                        None
                        if flow is None or flow.timeout is None
                        else now + timedelta(seconds=flow.timeout)
                    ),
                    **mapper.flow_columns(flow),
                )
        except IntegrityError:
            row = self._actors().get(name=name, key_text=text, destroyed=False)
            return mapper.actor_from_model(row), False
        return mapper.actor_from_model(row), True

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

    def list_actors(self, name: str | None = None, *, limit: int | None = None) -> list[ports.ActorRecord]:
        """Live actors (of type ``name``, or all), oldest first, at most ``limit``."""
        rows = self._actors().filter(destroyed=False).order_by("created_at", "actor_id")
        if name is not None:
            rows = rows.filter(name=name)
        return [mapper.actor_from_model(row) for row in (rows if limit is None else rows[:limit])]

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

    def destroy_actor(self, actor_id: str) -> None:
        """Delete the actor with its history, messages and cron entries; its key is free again.

        A running executor's next write is then fenced off (``commit`` returns ok=False).
        ActorNotFoundError if there is no such actor.
        """
        with self._atomic():
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
                .values(*_FLOW_VALUES)
                .first()
            )
            if candidate is None or not _Admission(self, now).admit(candidate):
                return None
            won = (
                self._actors()
                .filter(lease_free(now), pk=actor_id, destroyed=False, paused_at__isnull=True)
                .update(
                    lease_owner=owner,
                    lease_expires_at=now + timedelta(seconds=lease_seconds),
                    lease_token=F("lease_token") + 1,
                    step_lock_until=None,  # a step lock of a dead lease is dead too
                )
            )
            if won != 1:
                return None
            token = self._actors().filter(pk=actor_id).values_list("lease_token", flat=True).get()
            self._record_starts([{**candidate, "lease_token": token - 1}], now)
            return token

    def due_queryset(self, now: datetime):
        """The actors due at ``now`` and not paused, highest priority first, then earliest ``wake_at``
        (served by the partial index rivet_actor_prio_due_idx)."""
        return (
            self._actors()
            .filter(
                lease_free(now),
                wake_at__isnull=False,
                wake_at__lte=now,
                destroyed=False,
                paused_at__isnull=True,
            )
            .order_by("-priority", "wake_at", "created_at", "actor_id")
        )

    def claim_due(self, owner: str, limit: int, lease_seconds: float) -> list[tuple[str, int]]:
        """Claim up to ``limit`` due actors (wake_at <= now, lease free or expired, not paused, within their
        flow limits), highest priority first, then earliest wake_at.

        Returns ``[(actor_id, token), ...]``. Rows locked by a concurrent sweep are skipped (row-locking
        databases; SQLite has one writer at a time). Candidates over their group's limits are passed over
        (up to ``_SCAN_BATCHES`` batches are looked at), so a full group does not hold up other actors.
        The flow limits are exact where writers are serialised (SQLite); on PostgreSQL ``PostgresStore``
        decides them in the database.
        """
        if limit <= 0:
            return []
        with self._atomic():
            now = self.now()
            admission = _Admission(self, now)
            chosen: list[dict[str, Any]] = []
            due = self.due_queryset(now).select_for_update(skip_locked=True).values(*_FLOW_VALUES)
            batch = limit  # rows are locked as they are read: read no more than a batch needs
            for round_ in range(_SCAN_BATCHES):
                candidates = list(due[round_ * batch : (round_ + 1) * batch])
                for candidate in candidates:
                    if len(chosen) < limit and admission.admit(candidate):
                        chosen.append(candidate)
                if len(chosen) >= limit or len(candidates) < batch:
                    break
            if not chosen:
                return []
            ids = [c["actor_id"] for c in chosen]
            expires = now + timedelta(seconds=lease_seconds)
            self._actors().filter(lease_free(now), pk__in=ids).update(
                lease_owner=owner,
                lease_expires_at=expires,
                lease_token=F("lease_token") + 1,
                step_lock_until=None,
            )
            rows = dict(
                self._actors()
                .filter(pk__in=ids, lease_owner=owner, lease_expires_at=expires)
                .values_list("pk", "lease_token")
            )
            self._record_starts([c for c in chosen if c["actor_id"] in rows], now)
        return [(actor_id, rows[actor_id]) for actor_id in ids if actor_id in rows]

    # ------------------------------------------------------------------ flow controls (DESIGN.md 12)

    def _record_starts(self, claimed: list[dict[str, Any]], now: datetime) -> None:
        """Record a run start for each claimed rate-limited actor (``FlowStart``, token = the new token)."""
        starts = [
            models.FlowStart(
                name=c["name"],
                group=c["concurrency_key"],
                actor_id=c["actor_id"],
                lease_token=c["lease_token"] + 1,
                started_at=now,
            )
            for c in claimed
            if c["concurrency_key"] is not None and c["rate_count"] is not None
        ]
        if starts:
            models.FlowStart.objects.using(self.using).bulk_create(starts, ignore_conflicts=True)

    def _next_in_group(self, actor_id: str, name: str, group: str | None, now: datetime) -> str | None:
        """The next due actor of the concurrency group ``(name, group)`` in which ``actor_id`` just freed a
        slot (highest priority, then oldest ``wake_at``), to wake at once; None when nobody waits."""
        if group is None:
            return None
        return (
            self.due_queryset(now)
            .filter(name=name, concurrency_key=group)
            .exclude(pk=actor_id)
            .values_list("pk", flat=True)
            .first()
        )

    def flow_retry_at(self, actor_id: str) -> datetime | None:
        """When the rate limit lets the due actor ``actor_id`` be claimed (``ports.Store.flow_retry_at``)."""
        now = self.now()
        row = (
            self._actors()
            .filter(pk=actor_id, destroyed=False, paused_at__isnull=True, wake_at__lte=now)
            .values(*_FLOW_VALUES)
            .first()
        )
        if row is None or row["concurrency_key"] is None or row["rate_count"] is None:
            return None
        starts = list(_window(self, row, now).order_by("started_at").values_list("started_at", flat=True))
        if len(starts) < row["rate_count"]:
            return None
        return mapper.utc(starts[0]) + timedelta(seconds=row["rate_per"])

    def set_paused(
        self,
        actor_id: str,
        paused: bool,
        reason: str | None = None,
        *,
        audit: ports.OperatorActionRecord | None = None,
    ) -> bool:
        """Pause (recording ``reason``) or resume the actor in one conditional UPDATE, with the ``audit`` row
        in the same transaction when it changed; True when it changed. Pausing a finished workflow changes
        nothing. ActorNotFoundError for an unknown actor."""
        with self._atomic():
            now = self.now()
            rows = self._actors().filter(pk=actor_id, destroyed=False)
            if paused:
                changed = (
                    rows.filter(paused_at__isnull=True)
                    .exclude(workflow_state__in=list(ports.FINISHED_STATES))
                    .update(paused_at=now, pause_reason=reason, updated_at=now)
                )
            else:
                changed = rows.filter(paused_at__isnull=False).update(
                    paused_at=None, pause_reason=None, updated_at=now
                )
            if not changed and not rows.exists():
                raise errors.ActorNotFoundError(f"no actor with id {actor_id!r}", actor_id=actor_id)
            if changed and audit is not None:
                self._write_audit(actor_id, audit, now)
        return changed == 1

    def renew(self, actor_id: str, token: int, lease_seconds: float) -> bool:
        """Extend the lease by ``lease_seconds`` from now if ``token`` still holds it; False = lease lost."""
        with self._atomic():
            now = self.now()
            renewed = self._actors().filter(lease_fence(actor_id, token))
            return renewed.update(lease_expires_at=now + timedelta(seconds=lease_seconds)) == 1

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
        receipts/completions, outbox deliveries (woken like ``send``), then on ``release`` the lease is
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
            woken = self._deliver_outbox(commit, written.now)
            if commit.audit is not None:
                self._write_audit(actor_id, commit.audit, written.now)
            wake_at = self._settle(actor_id, commit, written, woken)
        result = ports.CommitResult(ok=True, wake_at=wake_at, woken=woken, paused=written.paused)
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
        row = self._actors().select_for_update().filter(lease_fence(actor_id, token)).values("state").first()
        if row is None:
            return None
        now = self.now()
        updates = mapper.actor_changes(commit)
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
        """The end of the rule: a finished actor is never due; on ``release`` free the lease and make the
        actor due now if a pending message matches its ``waiting_for`` (not before ``defer_until``, when the
        commit sets it). Returns the final ``wake_at`` and
        appends this actor to ``woken`` when a release leaves it due."""
        final = (
            self._actors()
            .filter(pk=actor_id)
            .values("wake_at", "waiting_for", "workflow_state", "paused_at", "name", "concurrency_key")
            .get()
        )
        written.paused = final["paused_at"] is not None
        wake_at = final["wake_at"]
        finished = final["workflow_state"] in ports.FINISHED_STATES
        tail: dict[str, Any] = {}
        if finished and wake_at is not None:
            wake_at = tail["wake_at"] = None  # finished actors are never due
        if commit.release:
            tail.update(lease_owner=None, lease_expires_at=None, step_lock_until=None)
            if (
                not finished
                and (wake_at is None or wake_at > written.now)
                and self._has_matching_message(actor_id, final["waiting_for"] or [])
            ):
                wake_at = tail["wake_at"] = written.now
            defer = commit.defer_until
            if isinstance(defer, datetime) and wake_at is not None and wake_at < defer:
                wake_at = tail["wake_at"] = defer  # a run left for another code version backs off
            if wake_at is not None and wake_at <= written.now and actor_id not in woken:
                woken.append(actor_id)
        if tail:
            self._actors().filter(pk=actor_id).update(**tail)
        if commit.release:  # a freed concurrency slot wakes the next due actor of the group at once
            following = self._next_in_group(actor_id, final["name"], final["concurrency_key"], written.now)
            if following is not None and following not in woken:
                woken.append(following)
        return wake_at

    # ------------------------------------------------------------------ actions

    # ------------------------------------------------------------------ the operator audit

    def _write_audit(
        self, actor_id: str, action: ports.OperatorActionRecord, now: datetime
    ) -> ports.OperatorActionRecord:
        row = models.OperatorAction.objects.using(self.using).create(
            actor_id=actor_id,
            action=action.action,
            who=action.who,
            reason=action.reason,
            at=now,
            archived_entries=mapper.audit_archive(action),
        )
        return mapper.operator_action_from_model(row)

    def record_operator_action(self, action: ports.OperatorActionRecord) -> ports.OperatorActionRecord:
        """Write ``action`` on its own (``ports.Store``); ``ActorNotFoundError``, ``SerializationError``."""
        with self._atomic():
            if not self._actors().filter(pk=action.actor_id, destroyed=False).exists():
                raise errors.ActorNotFoundError(
                    f"no actor with id {action.actor_id!r}", actor_id=action.actor_id
                )
            return self._write_audit(action.actor_id, action, self.now())

    def operator_actions(
        self, actor_id: str, *, limit: int | None = None
    ) -> list[ports.OperatorActionRecord]:
        """The actor's audit rows, newest first (served by ``rivet_opaction_actor_idx``)."""
        rows = models.OperatorAction.objects.using(self.using).filter(actor_id=actor_id).order_by("-id")
        if limit is not None:
            rows = rows[:limit]
        return [mapper.operator_action_from_model(row) for row in rows]

    def run_action(
        self, actor_id: str, fn: Callable[[Any], Any], timeout: float, *, make_due: bool = False
    ) -> tuple[Any, Any]:
        """Run ``fn(state)`` once no live step lock is held, serialised with commits on the actor; save the state.

        ``make_due=True`` also sets ``wake_at`` to the database clock in the same write (unless it is
        earlier already, the workflow is finished or ``fn`` destroyed the actor).

        With row locks: under the actor's row lock. Without (SQLite): under the actor's file lock with
        ``fn`` running outside any transaction, so a slow action does not stall other actors. A step lock
        is live while ``step_lock_until`` and the lease are both in the future; the wait polls every
        ``poll_interval`` seconds holding no lock. WorkflowInFlightError after ``timeout`` seconds,
        ActorNotFoundError. An exception from ``fn`` propagates and the state is not saved; an action that
        changed neither the state nor the wake-up writes nothing (``updated_at`` stays). Returns
        ``(result, state)``.
        """
        deadline = time.monotonic() + timeout
        while True:
            with self._serialised(actor_id, max(deadline - time.monotonic(), 0.0)):
                if self._actor_locks() is None:
                    with self._atomic():
                        done, value = self._try_action(
                            actor_id, fn, select_for_update=True, make_due=make_due
                        )
                else:
                    done, value = self._try_action(actor_id, fn, select_for_update=False, make_due=make_due)
                if done:
                    return value
            if time.monotonic() >= deadline:
                raise errors.WorkflowInFlightError(
                    f"actor {actor_id} is running a step; the action waited {timeout}s", actor_id=actor_id
                )
            time.sleep(self.poll_interval)

    def _try_action(
        self, actor_id: str, fn: Callable[[Any], Any], *, select_for_update: bool, make_due: bool = False
    ) -> tuple[bool, tuple[Any, Any] | None]:
        """One attempt of run_action: (False, None) while a live step lock is held."""
        rows = self._actors().select_for_update() if select_for_update else self._actors()
        columns = ("state", "step_lock_until", "lease_expires_at", "destroyed", "wake_at", "workflow_state")
        row = rows.filter(pk=actor_id).values(*columns).first()
        if row is None or row["destroyed"]:
            raise errors.ActorNotFoundError(f"no actor with id {actor_id!r}", actor_id=actor_id)
        now = self.now()
        if (
            row["step_lock_until"] is not None
            and row["step_lock_until"] > now
            and row["lease_expires_at"] is not None
            and row["lease_expires_at"] > now
        ):
            return False, None
        state = serde.from_json(row["state"])
        result = user_code(fn)(state)
        stored = serde.to_json(state, where="state")
        now = self.now()
        wakes = (
            make_due
            and row["workflow_state"] not in ports.FINISHED_STATES
            and (row["wake_at"] is None or row["wake_at"] > now)
        )
        if (
            mapper.same_json(stored, row["state"]) and not wakes
        ):  # an action that changed nothing writes nothing
            return True, (result, serde.from_json(stored))
        updates: dict[str, Any] = {"state": stored, "updated_at": now}
        if make_due:  # in the same UPDATE: due now unless finished or due earlier already
            updates["wake_at"] = Case(
                When(workflow_state__in=list(ports.FINISHED_STATES), then=F("wake_at")),
                When(wake_at__lte=now, then=F("wake_at")),
                default=Value(now, output_field=DateTimeField()),
            )
        self._actors().filter(pk=actor_id).update(**updates)  # a destroyed actor matches nothing
        return True, (result, serde.from_json(stored))
