"""DjangoStore: the Django ORM implementation of the engine's storage port (engine/ports.py, DESIGN.md s. 4).

Invariants kept here (see the ports docstring for the full list):

* Every executor write is fenced: ``commit`` locks the actor row (``select_for_update``; on SQLite the
  IMMEDIATE transaction serialises writers) and writes nothing unless ``lease_token`` still matches.
* ``claim`` is one conditional UPDATE (free or expired lease) whose row count decides, bumping
  ``lease_token``; ``claim`` never touches ``wake_at``, so a dead executor's actor is due again as soon
  as its lease expires.
* Deadlines are compared with the DATABASE clock: ``now()`` reads it (``clock_timestamp()`` on
  PostgreSQL, ``strftime('%f', 'now')`` on SQLite) and every lease/wake comparison uses that reading.
* Values are stored as ``engine.serde.to_json`` output and decoded with ``from_json``.
* The path of one step writes only the history keys it upserts or deletes: no query scans the history.
"""

from __future__ import annotations

import contextlib
import json
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

from django.db import IntegrityError, OperationalError, connections, transaction
from django.db.models import Case, DateTimeField, F, Min, Q, Value, When

from . import models, storage_pg
from .actor_locks import ActorLocks
from .cron_storage import DjangoCronMixin
from .engine import errors, ports, serde

_ENTRY_UPDATE_FIELDS = [
    "location",
    "kind",
    "data",
    "status",
    "attempts",
    "error",
    "last_attempt_at",
    "completed_at",
    "rollback_completed_at",
    "rollback_error",
]


def _message_pk(message_id: str | int) -> int:
    """The row id of a message id (ids are decimal strings); -1 (matches nothing) for a foreign id."""
    try:
        return int(message_id)
    except (TypeError, ValueError):
        return -1


def key_text(key: list) -> str:
    """Canonical JSON text of an actor key (a list of strings): the unique column with the actor name."""
    return json.dumps(serde.to_json(list(key), where="actor key"), separators=(",", ":"), sort_keys=True)


class DjangoStore(DjangoCronMixin, ports.BaseStore):
    """``ports.Store`` on the Django ORM (database alias ``using``, default ``"default"``).

    ``poll_interval`` (seconds) paces ``run_action`` while a step holds the actor's step lock.
    Thread-safe: every call uses the calling thread's connection.
    """

    def __init__(
        self, using: str = "default", *, poll_interval: float = 0.02, lock_timeout: float = 60.0
    ) -> None:
        self.using = using
        self.poll_interval = poll_interval
        self.lock_timeout = lock_timeout
        self._locks: ActorLocks | None | bool = False  # False: not decided yet
        self._pg: bool | None = None  # None: not decided yet

    def _fast(self) -> bool:
        """True on PostgreSQL: the raw-SQL fast paths of ``storage_pg`` serve the hot calls."""
        if self._pg is None:
            self._pg = storage_pg.enabled(self)
        return self._pg

    def _actor_locks(self) -> ActorLocks | None:
        """Per-actor file locks when the database is a SQLite file, else None (row locks do the job)."""
        if self._locks is False:
            connection = connections[self.using]
            name = str(connection.settings_dict.get("NAME") or "")
            if (
                connection.vendor == "sqlite"
                and name
                and ":memory:" not in name
                and "mode=memory" not in name
            ):
                self._locks = ActorLocks(f"{name}.locks")
            else:
                self._locks = None
        return self._locks

    @contextlib.contextmanager
    def _serialised(self, actor_id: str, timeout: float | None = None) -> Iterator[None]:
        """Hold the actor's lock on SQLite (see actor_locks); nothing to do on PostgreSQL."""
        locks = self._actor_locks()
        if locks is None:
            yield
            return
        with locks.hold(actor_id, self.lock_timeout if timeout is None else timeout):
            yield

    # ------------------------------------------------------------------ clock

    def now(self) -> datetime:
        """The database clock as an aware UTC datetime (PostgreSQL ``clock_timestamp()``, SQLite ``now``)."""
        connection = connections[self.using]
        with connection.cursor() as cursor:
            if connection.vendor == "postgresql":
                cursor.execute("SELECT clock_timestamp()")
                value = cursor.fetchone()[0]
                return value.astimezone(UTC)
            if connection.vendor == "sqlite":
                cursor.execute("SELECT strftime('%Y-%m-%d %H:%M:%f', 'now')")
                text = cursor.fetchone()[0]
                return datetime.strptime(text, "%Y-%m-%d %H:%M:%S.%f").replace(tzinfo=UTC)
        from django.utils import timezone

        return timezone.now()

    # ------------------------------------------------------------------ actors

    def _actors(self):
        return models.Actor.objects.using(self.using)

    def _atomic(self):
        return transaction.atomic(using=self.using)

    @staticmethod
    def _record(row: models.Actor) -> ports.ActorRecord:
        return ports.ActorRecord(
            actor_id=row.actor_id,
            name=row.name,
            key=list(row.key),
            state=serde.from_json(row.state),
            input=serde.from_json(row.input),
            output=serde.from_json(row.output),
            error=serde.from_json(row.error),
            workflow_state=row.workflow_state,
            wake_at=row.wake_at,
            waiting_for=list(row.waiting_for or []),
            created_at=row.created_at,
            updated_at=row.updated_at,
            destroyed=row.destroyed,
            lease_owner=row.lease_owner,
            lease_expires_at=row.lease_expires_at,
            lease_token=row.lease_token,
        )

    def create_actor(
        self, name: str, key: list, input: Any, state: Any, *, due: bool = False
    ) -> tuple[ports.ActorRecord, bool]:
        """Insert the actor ``(name, key)`` with ``state``, pending, due now (database clock) if ``due``.

        Returns ``(new record, True)``, or ``(existing record, False)`` with nothing written when the key
        is taken (also by a concurrent creator). On PostgreSQL one statement in the common case
        (``INSERT ... ON CONFLICT DO NOTHING`` returning the new or the existing row). SerializationError
        for an unserializable input or state.
        """
        state_json = serde.to_json(state, where="state")
        input_json = serde.to_json(input, where="input")
        if self._fast():
            return storage_pg.create_actor(self, name, key, key_text(key), input_json, state_json, due)
        text = key_text(key)
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
                )
        except IntegrityError:
            row = self._actors().get(name=name, key_text=text, destroyed=False)
            return self._record(row), False
        return self._record(row), True

    def get_actor(self, actor_id: str) -> ports.ActorRecord:
        """The actor's record; ActorNotFoundError if unknown or destroyed."""
        row = self._actors().filter(pk=actor_id, destroyed=False).first()
        if row is None:
            raise errors.ActorNotFoundError(f"no actor with id {actor_id!r}", actor_id=actor_id)
        return self._record(row)

    def find_actor(self, name: str, key: list) -> ports.ActorRecord | None:
        """The live (not destroyed) actor ``(name, key)`` or None."""
        row = self._actors().filter(name=name, key_text=key_text(key), destroyed=False).first()
        return None if row is None else self._record(row)

    def list_actors(self, name: str | None = None, *, limit: int | None = None) -> list[ports.ActorRecord]:
        """Live actors (of type ``name``, or all), oldest first, at most ``limit``."""
        rows = self._actors().filter(destroyed=False).order_by("created_at", "actor_id")
        if name is not None:
            rows = rows.filter(name=name)
        return [self._record(row) for row in (rows if limit is None else rows[:limit])]

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

    @staticmethod
    def _lease_free(now: datetime) -> Q:
        return Q(lease_expires_at__isnull=True) | Q(lease_expires_at__lt=now)

    def claim(self, actor_id: str, owner: str, lease_seconds: float) -> int | None:
        """Take the actor's lease if it is free or expired; return the new fencing token, else None.

        One UPDATE decides (row count 1 = won); ``wake_at`` is left as it is, a dead step lock is cleared.
        """
        if self._fast():
            got = storage_pg.claim_and_load(self, actor_id, owner, lease_seconds, history=False)
            return None if got is None else got[0]
        with self._atomic():
            now = self.now()
            won = (
                self._actors()
                .filter(self._lease_free(now), pk=actor_id, destroyed=False)
                .update(
                    lease_owner=owner,
                    lease_expires_at=now + timedelta(seconds=lease_seconds),
                    lease_token=F("lease_token") + 1,
                    step_lock_until=None,  # a step lock of a dead lease is dead too
                    updated_at=now,
                )
            )
            if won != 1:
                return None
            return self._actors().filter(pk=actor_id).values_list("lease_token", flat=True).get()

    def claim_and_load(
        self, actor_id: str, owner: str, lease_seconds: float
    ) -> tuple[int, ports.ActorRecord, list[ports.EntryRecord], datetime] | None:
        """``claim`` plus the run's initial reads: ``(token, actor, history, now)`` (database clock), or None
        when the lease is held elsewhere or the actor is gone. On PostgreSQL two statements in one round trip
        and one transaction (pipelined)."""
        if self._fast():
            return storage_pg.claim_and_load(self, actor_id, owner, lease_seconds)
        return super().claim_and_load(actor_id, owner, lease_seconds)

    def load_for_run(self, actor_id: str) -> tuple[ports.ActorRecord, list[ports.EntryRecord], datetime]:
        """``(actor, history, now)`` for a run that holds the lease; ActorNotFoundError if gone or destroyed."""
        if self._fast():
            return storage_pg.load_for_run(self, actor_id)
        return super().load_for_run(actor_id)

    def due_queryset(self, now: datetime):
        """Ids of the actors due at ``now``, earliest first (served by the partial index rivet_actor_due_idx)."""
        return (
            self._actors()
            .filter(self._lease_free(now), wake_at__isnull=False, wake_at__lte=now, destroyed=False)
            .order_by("wake_at", "created_at", "actor_id")
            .values_list("pk", flat=True)
        )

    def claim_due(self, owner: str, limit: int, lease_seconds: float) -> list[tuple[str, int]]:
        """Claim up to ``limit`` due actors (wake_at <= now, lease free or expired), earliest wake_at first.

        Returns ``[(actor_id, token), ...]``. Rows locked by a concurrent sweep are skipped (PostgreSQL).
        """
        if limit <= 0:
            return []
        with self._atomic():
            now = self.now()
            ids = list(self.due_queryset(now).select_for_update(skip_locked=True)[:limit])
            if not ids:
                return []
            expires = now + timedelta(seconds=lease_seconds)
            self._actors().filter(self._lease_free(now), pk__in=ids).update(
                lease_owner=owner,
                lease_expires_at=expires,
                lease_token=F("lease_token") + 1,
                step_lock_until=None,
                updated_at=now,
            )
            rows = dict(
                self._actors()
                .filter(pk__in=ids, lease_owner=owner, lease_expires_at=expires)
                .values_list("pk", "lease_token")
            )
        return [(actor_id, rows[actor_id]) for actor_id in ids if actor_id in rows]

    def renew(self, actor_id: str, token: int, lease_seconds: float) -> bool:
        """Extend the lease by ``lease_seconds`` from now if ``token`` still holds it; False = lease lost."""
        with self._atomic():
            now = self.now()
            return (
                self._actors()
                .filter(pk=actor_id, lease_token=token, destroyed=False, lease_owner__isnull=False)
                .update(lease_expires_at=now + timedelta(seconds=lease_seconds))
                == 1
            )

    def close_thread_connection(self) -> None:
        """Close this thread's database connections (called by the executor's heartbeat thread on exit)."""
        for conn in connections.all(initialized_only=True):
            conn.close()

    def handoff(self, actor_id: str, token: int, owner: str, lease_seconds: float) -> int | None:
        """Take over the lease held with ``token`` (a sweep's claim handed to a run task): one conditional
        UPDATE bumping the token, so a duplicate delivery of the same hand-over gets None (I5)."""
        with self._atomic():
            now = self.now()
            won = (
                self._actors()
                .filter(pk=actor_id, lease_token=token, destroyed=False, lease_owner__isnull=False)
                .update(
                    lease_owner=owner,
                    lease_expires_at=now + timedelta(seconds=lease_seconds),
                    lease_token=F("lease_token") + 1,
                )
            )
            return token + 1 if won == 1 else None

    def next_deadline(self) -> datetime | None:
        """Earliest ``wake_at`` of any live, unfinished actor (None if nothing is scheduled)."""
        return (
            self._actors()
            .filter(wake_at__isnull=False, destroyed=False)
            .exclude(workflow_state__in=list(ports.FINISHED_STATES))
            .aggregate(first=Min("wake_at"))["first"]
        )

    # ------------------------------------------------------------------ history

    def load_history(self, actor_id: str) -> list[ports.EntryRecord]:
        """Every history entry of the actor in creation order (``seq`` = row id); ActorNotFoundError."""
        if not self._actors().filter(pk=actor_id, destroyed=False).exists():
            raise errors.ActorNotFoundError(f"no actor with id {actor_id!r}", actor_id=actor_id)
        rows = models.HistoryEntry.objects.using(self.using).filter(actor_id=actor_id).order_by("id")
        return [
            ports.EntryRecord(
                key=row.key,
                location=list(row.location),
                kind=row.kind,
                data=serde.from_json(row.data) or {},
                status=row.status,
                attempts=row.attempts,
                error=serde.from_json(row.error),
                seq=row.id,
                last_attempt_at=row.last_attempt_at,
                created_at=row.created_at,
                completed_at=row.completed_at,
                rollback_completed_at=row.rollback_completed_at,
                rollback_error=serde.from_json(row.rollback_error),
            )
            for row in rows
        ]

    def commit(self, actor_id: str, token: int, commit: ports.Commit) -> ports.CommitResult:
        """Apply ``commit`` atomically if ``token`` still holds the lease (ok=False and nothing written if not).

        Order inside the transaction: history upserts/deletes, message receipts/completions, actor
        columns, outbox deliveries (woken like ``send``), then on ``release`` the lease is freed and a
        pending message matching the new ``waiting_for`` makes the actor due now. Serialization errors
        propagate and roll everything back. On SQLite the actor's lock is held too (actor_locks).
        Every actor row the commit touches is locked up front in id order, so two actors messaging each
        other cannot deadlock; a deadlock the database still reports is retried (nothing was written).
        """
        if self._fast():
            return self._retry_on_deadlock(lambda: storage_pg.commit(self, actor_id, token, commit))
        with self._serialised(actor_id):
            return self._retry_on_deadlock(lambda: self._commit(actor_id, token, commit))

    def _retry_on_deadlock(self, fn: Callable[[], Any], attempts: int = 3) -> Any:
        """Call ``fn`` (one whole transaction); retry when the database aborted it for a deadlock/lock timeout.

        Only outside an enclosing atomic block: inside one, the outer transaction is broken and the
        error must propagate.
        """
        for attempt in range(attempts):
            if connections[self.using].in_atomic_block:
                return fn()
            try:
                return fn()
            except OperationalError as exc:
                text = str(exc).lower()
                if attempt == attempts - 1 or not ("deadlock" in text or "database is locked" in text):
                    raise
                time.sleep(self.poll_interval * (attempt + 1))
        raise AssertionError("unreachable")

    def _commit(self, actor_id: str, token: int, commit: ports.Commit) -> ports.CommitResult:
        with self._atomic():
            targets = {target for target, _name, _body, _completable in commit.outbox}
            if targets - {actor_id}:
                list(
                    self._actors()
                    .select_for_update()
                    .filter(pk__in=sorted(targets | {actor_id}))
                    .order_by("pk")
                    .values_list("pk", flat=True)
                )
            row = (
                self._actors()
                .select_for_update()
                .filter(pk=actor_id)
                .values("lease_token", "lease_owner", "state", "destroyed")
                .first()
            )
            if row is None or row["lease_token"] != token or row["lease_owner"] is None or row["destroyed"]:
                return ports.CommitResult(ok=False)
            now = self.now()
            self._write_history(actor_id, commit, now)
            self._write_messages(actor_id, commit, now)

            updates: dict[str, Any] = {"updated_at": now}
            fresh_state: Any = ports.UNSET
            if commit.state is not ports.UNSET:
                updates["state"] = serde.to_json(commit.state, where="state")
                fresh_state = updates["state"]
            for name in ("input", "output", "error"):
                value = getattr(commit, name)
                if value is not ports.UNSET:
                    updates[name] = serde.to_json(value, where=name)
            if commit.workflow_state is not ports.UNSET:
                updates["workflow_state"] = commit.workflow_state
            if commit.wake_at is not ports.UNSET:
                updates["wake_at"] = commit.wake_at
            if commit.waiting_for is not ports.UNSET:
                updates["waiting_for"] = list(commit.waiting_for or [])
            if commit.step_lock_until is not ports.UNSET:
                updates["step_lock_until"] = commit.step_lock_until
            self._actors().filter(pk=actor_id).update(**updates)

            woken: list[str] = []
            for target, name, body, completable in commit.outbox:
                _, woke = self._deliver(target, name, body, completable, now)
                if woke and target not in woken:
                    woken.append(target)

            final = (
                self._actors().filter(pk=actor_id).values("wake_at", "waiting_for", "workflow_state").get()
            )
            wake_at = final["wake_at"]
            finished = final["workflow_state"] in ports.FINISHED_STATES
            tail: dict[str, Any] = {}
            if finished and wake_at is not None:
                wake_at = tail["wake_at"] = None  # finished actors are never due
            if commit.release:
                tail.update(lease_owner=None, lease_expires_at=None, step_lock_until=None)
                if (
                    not finished
                    and (wake_at is None or wake_at > now)
                    and self._has_matching_message(actor_id, final["waiting_for"] or [])
                ):
                    wake_at = tail["wake_at"] = now
                if wake_at is not None and wake_at <= now and actor_id not in woken:
                    woken.append(actor_id)
            if tail:
                self._actors().filter(pk=actor_id).update(**tail)

        result = ports.CommitResult(ok=True, wake_at=wake_at, woken=woken)
        if isinstance(commit.step_lock_until, datetime):
            result.state = serde.from_json(fresh_state if fresh_state is not ports.UNSET else row["state"])
        return result

    def _write_history(self, actor_id: str, commit: ports.Commit, now: datetime) -> None:
        entries = models.HistoryEntry.objects.using(self.using)
        if commit.deletes:
            entries.filter(actor_id=actor_id, key__in=list(commit.deletes)).delete()
        if not commit.upserts:
            return
        rows = [
            models.HistoryEntry(
                actor_id=actor_id,
                key=rec.key,
                location=list(rec.location),
                kind=rec.kind,
                data=serde.to_json(rec.data, where=f"history entry {rec.key!r}"),
                status=rec.status,
                attempts=rec.attempts,
                error=serde.to_json(rec.error, where=f"error of {rec.key!r}"),
                last_attempt_at=rec.last_attempt_at,
                created_at=rec.created_at or now,
                completed_at=rec.completed_at,
                rollback_completed_at=rec.rollback_completed_at,
                rollback_error=serde.to_json(rec.rollback_error, where=f"rollback error of {rec.key!r}"),
            )
            for rec in commit.upserts
        ]
        entries.bulk_create(
            rows, update_conflicts=True, unique_fields=["actor", "key"], update_fields=_ENTRY_UPDATE_FIELDS
        )

    def _write_messages(self, actor_id: str, commit: ports.Commit, now: datetime) -> None:
        messages = models.QueueMessage.objects.using(self.using).filter(actor_id=actor_id)
        if commit.complete_messages:
            ids = [_message_pk(m) for m, _ in commit.complete_messages]
            statuses = dict(messages.filter(pk__in=ids).values_list("pk", "status"))
            for (message_id, _), pk in zip(commit.complete_messages, ids, strict=True):
                if pk not in statuses:
                    raise LookupError(f"actor {actor_id} has no queue message {message_id!r}")
                if statuses[pk] == ports.MESSAGE_COMPLETED:
                    raise errors.MessageAlreadyCompletedError(message_id=str(message_id))
        if commit.receive_messages:
            messages.filter(
                pk__in=[_message_pk(m) for m in commit.receive_messages], status=ports.MESSAGE_PENDING
            ).update(status=ports.MESSAGE_RECEIVED)
        for message_id, response in commit.complete_messages:
            messages.filter(pk=_message_pk(message_id)).update(
                status=ports.MESSAGE_COMPLETED,
                response=serde.to_json(response, where="message response"),
                completed_at=now,
            )

    def _has_matching_message(self, actor_id: str, waiting_for: list[str]) -> bool:
        if not waiting_for:
            return False
        pending = models.QueueMessage.objects.using(self.using).filter(
            actor_id=actor_id, status=ports.MESSAGE_PENDING
        )
        if "*" not in waiting_for:
            pending = pending.filter(name__in=list(waiting_for))
        return pending.exists()

    # ------------------------------------------------------------------ queues

    @staticmethod
    def _message(row: models.QueueMessage) -> ports.MessageRecord:
        return ports.MessageRecord(
            id=str(row.id),
            actor_id=row.actor_id,
            name=row.name,
            body=serde.from_json(row.body),
            created_at=row.created_at,
            completable=row.completable,
            status=row.status,
            response=serde.from_json(row.response),
            completed_at=row.completed_at,
        )

    def _deliver(
        self, actor_id: str, name: str, body: Any, completable: bool, now: datetime
    ) -> tuple[ports.MessageRecord, bool]:
        """Insert a message under the target's row lock and apply the wake rule; returns (record, woke)."""
        row = (
            self._actors()
            .select_for_update()
            .filter(pk=actor_id)
            .values("workflow_state", "waiting_for", "lease_owner", "destroyed", "wake_at")
            .first()
        )
        if row is None or row["destroyed"]:
            raise errors.ActorNotFoundError(f"no actor with id {actor_id!r}", actor_id=actor_id)
        message = models.QueueMessage.objects.using(self.using).create(
            actor_id=actor_id,
            name=name,
            body=serde.to_json(body, where=f"body of queue message {name!r}"),
            completable=completable,
            status=ports.MESSAGE_PENDING,
            created_at=now,
        )
        woke = False
        if row["workflow_state"] not in ports.FINISHED_STATES:
            waiting = row["waiting_for"] or []
            if "*" in waiting or name in waiting or row["lease_owner"] is not None:
                woke = True
                if row["wake_at"] is None or row["wake_at"] > now:
                    self._actors().filter(pk=actor_id).update(wake_at=now, updated_at=now)
            if row["lease_owner"] is not None and self._fast():
                # A run holds the lease: it may be in a warm queue wait, listening (storage_pg).
                with connections[self.using].cursor() as cursor:
                    storage_pg.notify_waiter(cursor, actor_id)
        return self._message(message), woke

    def send(self, actor_id: str, name: str, body: Any, completable: bool = False) -> ports.MessageRecord:
        """Store a message for ``actor_id`` and make the actor due if it waits on ``name`` or is running.

        Raises ActorNotFoundError (missing or destroyed actor) and SerializationError (body).
        """
        if self._fast():
            return storage_pg.send(self, actor_id, name, body, completable)[0]
        with self._atomic():
            message, _ = self._deliver(actor_id, name, body, completable, self.now())
        return message

    def send_and_check(
        self, actor_id: str, name: str, body: Any, completable: bool = False
    ) -> tuple[ports.MessageRecord, bool | None]:
        """``send``, plus whether the sender should wake the actor (``actor_context.wake_if_due``'s answer)
        when the store learns it in the same statement (PostgreSQL), else None (the caller asks).

        Raises as ``send``.
        """
        if self._fast():
            return storage_pg.send(self, actor_id, name, body, completable)
        return super().send_and_check(actor_id, name, body, completable)

    def pending_messages(
        self, actor_id: str, names: list[str] | None, limit: int
    ) -> list[ports.MessageRecord]:
        """Up to ``limit`` not-yet-received messages, oldest first; ``names`` None or containing "*" = any."""
        rows = models.QueueMessage.objects.using(self.using).filter(
            actor_id=actor_id, status=ports.MESSAGE_PENDING
        )
        if names is not None and "*" not in names:
            rows = rows.filter(name__in=list(names))
        return [self._message(row) for row in rows.order_by("id")[: max(limit, 0)]]

    def wait_for_messages(self, actor_id: str, names: list[str], timeout: float) -> bool:
        """Block up to ``timeout`` seconds until a pending message on one of ``names`` (``"*"``: any) exists
        for ``actor_id`` or a new one may have arrived; True then (the caller looks at its messages), False
        when the window passed (or at once on a database without notifications: the caller then releases
        the actor as usual).

        For a run that holds the lease (a warm queue wait): on PostgreSQL it LISTENs for the notification
        every delivery to a leased actor sends (``storage_pg.wait_for_messages``).
        """
        if not self._fast():
            return super().wait_for_messages(actor_id, names, timeout)
        return storage_pg.wait_for_messages(self, actor_id, list(names), timeout)

    def get_message(self, message_id: str) -> ports.MessageRecord:
        """One message by id; raises ``LookupError`` if there is none."""
        row = models.QueueMessage.objects.using(self.using).filter(pk=_message_pk(message_id)).first()
        if row is None:
            raise LookupError(f"no queue message {message_id!r}")
        return self._message(row)

    def complete_message(self, message_id: str, response: Any) -> None:
        """Answer a message with ``response``; MessageAlreadyCompletedError the second time, LookupError if unknown."""
        with self._atomic():
            row = (
                models.QueueMessage.objects.using(self.using)
                .select_for_update()
                .filter(pk=_message_pk(message_id))
                .first()
            )
            if row is None:
                raise LookupError(f"no queue message {message_id!r}")
            if row.status == ports.MESSAGE_COMPLETED:
                raise errors.MessageAlreadyCompletedError(message_id=str(message_id))
            row.status = ports.MESSAGE_COMPLETED
            row.response = serde.to_json(response, where="message response")
            row.completed_at = self.now()
            row.save(update_fields=["status", "response", "completed_at"])

    # ------------------------------------------------------------------ actions

    def run_action(
        self, actor_id: str, fn: Callable[[Any], Any], timeout: float, *, make_due: bool = False
    ) -> tuple[Any, Any]:
        """Run ``fn(state)`` once no live step lock is held, serialised with commits on the actor; save the state.

        ``make_due=True`` also sets ``wake_at`` to the database clock in the same write (unless it is
        earlier already, the workflow is finished or ``fn`` destroyed the actor).

        PostgreSQL: under the actor's row lock. SQLite: under the actor's file lock with ``fn`` running
        outside any transaction, so a slow action does not stall other actors. A step lock is live while
        ``step_lock_until`` and the lease are both in the future; the wait polls every ``poll_interval``
        seconds holding no lock. WorkflowInFlightError after ``timeout`` seconds, ActorNotFoundError.
        An exception from ``fn`` propagates and the state is not saved. Returns ``(result, state)``.
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
        row = (
            rows.filter(pk=actor_id)
            .values("state", "step_lock_until", "lease_expires_at", "destroyed")
            .first()
        )
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
        result = fn(state)
        stored = serde.to_json(state, where="state")
        now = self.now()
        updates: dict[str, Any] = {"state": stored, "updated_at": now}
        if make_due:  # in the same UPDATE: due now unless finished or due earlier already
            updates["wake_at"] = Case(
                When(workflow_state__in=list(ports.FINISHED_STATES), then=F("wake_at")),
                When(wake_at__lte=now, then=F("wake_at")),
                default=Value(now, output_field=DateTimeField()),
            )
        self._actors().filter(pk=actor_id).update(**updates)  # a destroyed actor matches nothing
        return True, (result, serde.from_json(stored))
