"""PostgreSQL fast paths of ``DjangoStore`` (issue 6): the hot statements as raw SQL, same semantics.

The ORM path in ``storage.py`` stays the portable one (SQLite and any other backend). On PostgreSQL the
executor's per-step write, the claim and the run's initial load use these instead:

* ``commit``: one fenced ``UPDATE actor ... WHERE actor_id AND lease_token ... RETURNING`` (it takes the
  row lock, checks the fence, writes the actor columns, optionally frees the lease and reads the database
  clock in one statement), then one multi-row ``INSERT ... ON CONFLICT (actor_id, key) DO UPDATE`` for the
  history upserts. Nothing else runs unless the commit carries deletes, messages or an outbox.
* ``claim_and_load``: one conditional ``UPDATE ... RETURNING`` of the whole actor row, then the history,
  pipelined: one round trip, one transaction (``load_for_run`` likewise).
* ``create_actor``: one ``INSERT ... ON CONFLICT DO NOTHING`` that creates the actor already due (database
  clock) or returns the existing one.

Deadlines use the database clock: ``clock_timestamp()`` read once per statement through a sub-select.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from django.db import connections

from . import models
from .engine import errors, ports, serde

if TYPE_CHECKING:
    from .storage import DjangoStore

_ACTOR = models.Actor._meta.db_table
_ENTRY = models.HistoryEntry._meta.db_table
_MESSAGE = models.QueueMessage._meta.db_table
_FINISHED_SQL = ", ".join(f"'{s}'" for s in sorted(ports.FINISHED_STATES))
_ACTOR_COLUMNS = (
    "actor_id, name, key, state, input, output, error, workflow_state, wake_at, waiting_for, "
    "created_at, updated_at, destroyed, lease_owner, lease_expires_at, lease_token"
)
_ENTRY_COLUMNS = (
    '"key", location, kind, data, status, attempts, error, id, last_attempt_at, created_at, completed_at, '
    "rollback_completed_at, rollback_error"
)
_UPSERT_HEAD = (
    f'INSERT INTO {_ENTRY} (actor_id, "key", location, kind, data, status, attempts, error, '
    "last_attempt_at, created_at, completed_at, rollback_completed_at, rollback_error) VALUES "
)
_UPSERT_ROW = "(%s, %s, %s::jsonb, %s, %s::jsonb, %s, %s, %s::jsonb, %s, %s, %s, %s, %s::jsonb)"
_UPSERT_TAIL = (
    ' ON CONFLICT (actor_id, "key") DO UPDATE SET location = EXCLUDED.location, kind = EXCLUDED.kind, '
    "data = EXCLUDED.data, status = EXCLUDED.status, attempts = EXCLUDED.attempts, "
    "error = EXCLUDED.error, last_attempt_at = EXCLUDED.last_attempt_at, "
    "completed_at = EXCLUDED.completed_at, rollback_completed_at = EXCLUDED.rollback_completed_at, "
    "rollback_error = EXCLUDED.rollback_error"
)


_pipeline_supported: bool | None = None


def _pipeline() -> bool:
    """True when psycopg's libpq supports pipeline mode (libpq >= 14); checked once."""
    global _pipeline_supported
    if _pipeline_supported is None:
        try:
            import psycopg

            _pipeline_supported = bool(psycopg.Pipeline.is_supported())
        except ImportError:  # psycopg2: no pipeline mode
            _pipeline_supported = False
    return _pipeline_supported


def enabled(store: DjangoStore) -> bool:
    """True when the store's database is PostgreSQL (the fast paths apply)."""
    return connections[store.using].vendor == "postgresql"


def _jsonb(value: Any) -> str | None:
    """A ``serde.to_json`` value as the text of a jsonb parameter (None -> SQL NULL, like the ORM)."""
    return None if value is None else json.dumps(value, separators=(",", ":"))


def _load(value: Any) -> Any:
    """A jsonb column read back (Django registers a text loader for jsonb)."""
    return json.loads(value) if isinstance(value, str) else value


def _utc(value: datetime | None) -> datetime | None:
    return None if value is None else value.astimezone(UTC)


def _actor_record(row: tuple) -> ports.ActorRecord:
    (actor_id, name, key, state, input_, output, error, workflow_state, wake_at, waiting_for, created_at,
     updated_at, destroyed, lease_owner, lease_expires_at, lease_token) = row  # fmt: skip
    return ports.ActorRecord(
        actor_id=actor_id,
        name=name,
        key=list(_load(key)),
        state=serde.from_json(_load(state)),
        input=serde.from_json(_load(input_)),
        output=serde.from_json(_load(output)),
        error=serde.from_json(_load(error)),
        workflow_state=workflow_state,
        wake_at=_utc(wake_at),
        waiting_for=list(_load(waiting_for) or []),
        created_at=_utc(created_at),
        updated_at=_utc(updated_at),
        destroyed=destroyed,
        lease_owner=lease_owner,
        lease_expires_at=_utc(lease_expires_at),
        lease_token=lease_token,
    )


def _query_history(cursor: Any, actor_id: str) -> None:
    cursor.execute(f"SELECT {_ENTRY_COLUMNS} FROM {_ENTRY} WHERE actor_id = %s ORDER BY id", [actor_id])


def _read_history(cursor: Any) -> list[ports.EntryRecord]:
    """The history rows of ``_query_history`` as records (in creation order)."""
    return [
        ports.EntryRecord(
            key=key,
            location=list(_load(location)),
            kind=kind,
            data=serde.from_json(_load(data)) or {},
            status=status,
            attempts=attempts,
            error=serde.from_json(_load(error)),
            seq=seq,
            last_attempt_at=_utc(last_attempt_at),
            created_at=_utc(created_at),
            completed_at=_utc(completed_at),
            rollback_completed_at=_utc(rollback_completed_at),
            rollback_error=serde.from_json(_load(rollback_error)),
        )
        for (
            key,
            location,
            kind,
            data,
            status,
            attempts,
            error,
            seq,
            last_attempt_at,
            created_at,
            completed_at,
            rollback_completed_at,
            rollback_error,
        ) in cursor.fetchall()  # fmt: skip
    ]


@contextlib.contextmanager
def _one_round_trip(store: DjangoStore) -> Iterator[None]:
    """Send the statements executed inside as one pipeline (psycopg pipeline mode): one round trip and, in
    autocommit, one implicit transaction. Each statement still takes its own snapshot (READ COMMITTED), so
    a read after a claim that waited for a row lock sees what the previous holder committed. Errors are
    wrapped like Django's (a broken connection is marked unusable). Without pipeline support in libpq
    (< 14) the statements simply run one after another."""
    connection = connections[store.using]
    connection.ensure_connection()
    if not _pipeline() or not hasattr(connection.connection, "pipeline"):
        yield
        return
    with connection.wrap_database_errors, connection.connection.pipeline():
        yield


def claim_and_load(
    store: DjangoStore, actor_id: str, owner: str, lease_seconds: float, *, history: bool = True
) -> tuple[int, ports.ActorRecord, list[ports.EntryRecord], datetime] | None:
    """Claim the actor (as ``DjangoStore.claim``) and read its row and history: ``(token, actor, history,
    now)`` with ``now`` the database clock of the claim, or None when the lease is held by someone else or
    the actor is gone. One round trip and one transaction: the claim's ``UPDATE ... RETURNING`` and the
    history query are pipelined (``history=False``: the UPDATE alone, with an empty history)."""
    with _one_round_trip(store), connections[store.using].cursor() as cursor:
        cursor.execute(
            f"UPDATE {_ACTOR} AS a SET lease_owner = %s, "
            "lease_expires_at = c.now + %s * interval '1 second', lease_token = a.lease_token + 1, "
            "step_lock_until = NULL, updated_at = c.now "
            "FROM (SELECT clock_timestamp() AS now) AS c "
            "WHERE a.actor_id = %s AND NOT a.destroyed "
            "AND (a.lease_expires_at IS NULL OR a.lease_expires_at < c.now) "
            f"RETURNING {', '.join('a.' + col.strip() for col in _ACTOR_COLUMNS.split(','))}",
            [owner, lease_seconds, actor_id],
        )
        if history:
            with connections[store.using].cursor() as entries:
                _query_history(entries, actor_id)
                row = cursor.fetchone()
                loaded = _read_history(entries)
        else:
            row, loaded = cursor.fetchone(), []
    if row is None:
        return None
    actor = _actor_record(row)
    return actor.lease_token, actor, loaded, actor.updated_at


def load_for_run(
    store: DjangoStore, actor_id: str
) -> tuple[ports.ActorRecord, list[ports.EntryRecord], datetime]:
    """The actor's row, its history and the database clock (``(actor, history, now)``), for a run holding a
    lease already; ActorNotFoundError when it is gone or destroyed. Two statements in one round trip and
    one transaction (pipelined)."""
    with _one_round_trip(store), connections[store.using].cursor() as cursor:
        cursor.execute(
            f"SELECT {_ACTOR_COLUMNS}, clock_timestamp() FROM {_ACTOR} WHERE actor_id = %s AND NOT destroyed",
            [actor_id],
        )
        with connections[store.using].cursor() as entries:
            _query_history(entries, actor_id)
            row = cursor.fetchone()
            loaded = _read_history(entries)
    if row is None:
        raise errors.ActorNotFoundError(f"no actor with id {actor_id!r}", actor_id=actor_id)
    return _actor_record(row[:-1]), loaded, _utc(row[-1])


def create_actor(
    store: DjangoStore, name: str, key: list, key_text: str, input_json: Any, state_json: Any, due: bool
) -> tuple[ports.ActorRecord, bool]:
    """``DjangoStore.create_actor`` on PostgreSQL: ``(record, created)``; ``input_json``/``state_json`` are
    ``serde.to_json`` output. One autocommit statement: ``INSERT ... ON CONFLICT DO NOTHING`` returning
    the new row, united with the existing row when the key was taken before the statement began. When a
    concurrent creator committed the key while this insert waited for it, the statement returns nothing
    (its snapshot predates that row) and a second query reads the winner's row."""
    returning = ", ".join(col.strip() for col in _ACTOR_COLUMNS.split(","))
    sql = (
        "WITH c AS (SELECT clock_timestamp() AS now), "
        f"ins AS (INSERT INTO {_ACTOR} (actor_id, name, key, key_text, state, input, output, error, "
        "workflow_state, wake_at, waiting_for, lease_owner, lease_expires_at, lease_token, step_lock_until, "
        "destroyed, created_at, updated_at) "
        "SELECT %s, %s, %s::jsonb, %s, %s::jsonb, %s::jsonb, NULL, NULL, %s, "
        f"{'c.now' if due else 'NULL'}, '[]'::jsonb, NULL, NULL, 0, NULL, false, c.now, c.now FROM c "
        f"ON CONFLICT (name, key_text) DO NOTHING RETURNING {returning}) "
        f"SELECT {returning}, true FROM ins UNION ALL "
        f"SELECT {returning}, false FROM {_ACTOR} WHERE name = %s AND key_text = %s AND NOT destroyed "
        "AND NOT EXISTS (SELECT 1 FROM ins)"
    )
    params = [
        models.new_actor_id(),
        name,
        _jsonb(list(key)),
        key_text,
        _jsonb(state_json),
        _jsonb(input_json),
        ports.PENDING,
        name,
        key_text,
    ]
    with connections[store.using].cursor() as cursor:
        for _attempt in range(3):
            cursor.execute(sql, params)
            row = cursor.fetchone()
            if row is not None:
                return _actor_record(row[:-1]), bool(row[-1])
            cursor.execute(  # lost a race to a creator that committed while we waited: read its row
                f"SELECT {returning}, false FROM {_ACTOR} WHERE name = %s AND key_text = %s AND NOT destroyed",
                [name, key_text],
            )
            row = cursor.fetchone()
            if row is not None:
                return _actor_record(row[:-1]), False
            # the winner was destroyed meanwhile: the key is free again, try the insert once more
    raise errors.RivetWorkflowsError(f"could not create or find actor {name!r} {key!r} (concurrent destroys)")


def _actor_sets(commit: ports.Commit) -> tuple[list[str], list[Any], Any, bool, bool]:
    """The SET clauses of the fenced actor UPDATE: ``(sets, params, fresh_state, release_now, want_state)``."""
    sets: list[str] = ["updated_at = c.now"]
    params: list[Any] = []
    fresh_state: Any = ports.UNSET
    if commit.state is not ports.UNSET:
        fresh_state = serde.to_json(commit.state, where="state")
        sets.append("state = %s::jsonb")
        params.append(_jsonb(fresh_state))
    for name in ("input", "output", "error"):
        value = getattr(commit, name)
        if value is not ports.UNSET:
            sets.append(f"{name} = %s::jsonb")
            params.append(_jsonb(serde.to_json(value, where=name)))
    if commit.workflow_state is not ports.UNSET:
        sets.append("workflow_state = %s")
        params.append(commit.workflow_state)
        if commit.workflow_state in ports.FINISHED_STATES:
            sets.append("wake_at = NULL")  # finished actors are never due
        elif commit.wake_at is not ports.UNSET:
            sets.append("wake_at = %s")
            params.append(commit.wake_at)
    elif commit.wake_at is not ports.UNSET:
        sets.append(f"wake_at = CASE WHEN a.workflow_state IN ({_FINISHED_SQL}) THEN NULL ELSE %s END")
        params.append(commit.wake_at)
    else:
        sets.append(f"wake_at = CASE WHEN a.workflow_state IN ({_FINISHED_SQL}) THEN NULL ELSE a.wake_at END")
    if commit.waiting_for is not ports.UNSET:
        sets.append("waiting_for = %s::jsonb")
        params.append(_jsonb(list(commit.waiting_for or [])))
    release_now = commit.release and not commit.outbox
    if release_now:
        sets.append("lease_owner = NULL, lease_expires_at = NULL, step_lock_until = NULL")
    elif commit.step_lock_until is not ports.UNSET:
        sets.append("step_lock_until = %s")
        params.append(commit.step_lock_until)
    want_state = isinstance(commit.step_lock_until, datetime) and fresh_state is ports.UNSET
    return sets, params, fresh_state, release_now, want_state


def _simple(commit: ports.Commit) -> bool:
    """True when the commit is one statement's work: actor columns, history upserts and message receipts
    only, and a release that needs no pending-message re-check (no queue wait, or a finished workflow)."""
    if commit.outbox or commit.deletes or commit.complete_messages:
        return False
    if not commit.release:
        return True
    return commit.workflow_state in ports.FINISHED_STATES or (
        commit.waiting_for is not ports.UNSET and not commit.waiting_for
    )


def commit(store: DjangoStore, actor_id: str, token: int, commit: ports.Commit) -> ports.CommitResult:
    """``DjangoStore.commit`` on PostgreSQL (same contract; see the module docstring for the statements).

    A step's commit (actor columns + history upserts, see ``_simple``) is one autocommit statement: the
    fenced UPDATE and the upsert as data-modifying CTEs, the upsert guarded by the UPDATE having matched.
    """
    if _simple(commit) and not connections[store.using].in_atomic_block:
        return _commit_one_statement(store, actor_id, token, commit)
    with store._atomic():
        connection = connections[store.using]
        targets = {target for target, _name, _body, _completable in commit.outbox}
        if targets - {actor_id}:  # lock every actor the commit touches in id order (no deadlock)
            list(
                store._actors()
                .select_for_update()
                .filter(pk__in=sorted(targets | {actor_id}))
                .order_by("pk")
                .values_list("pk", flat=True)
            )
        sets, params, fresh_state, release_now, want_state = _actor_sets(commit)
        returning = "c.now, a.wake_at, a.waiting_for, a.workflow_state" + (", a.state" if want_state else "")
        with connection.cursor() as cursor:
            cursor.execute(
                f"UPDATE {_ACTOR} AS a SET {', '.join(sets)} "
                "FROM (SELECT clock_timestamp() AS now) AS c "
                "WHERE a.actor_id = %s AND a.lease_token = %s AND a.lease_owner IS NOT NULL "
                f"AND NOT a.destroyed RETURNING {returning}",
                [*params, actor_id, token],
            )
            row = cursor.fetchone()
            if row is None:  # fenced off: nothing was written
                return ports.CommitResult(ok=False)
            now, wake_at, waiting_for, workflow_state = _utc(row[0]), _utc(row[1]), _load(row[2]), row[3]
            if want_state:
                fresh_state = _load(row[4])
            if commit.deletes:
                store._write_history(actor_id, ports.Commit(deletes=commit.deletes), now)
            if commit.upserts:
                _upsert(cursor, actor_id, commit.upserts, now)
            if commit.receive_messages or commit.complete_messages:
                store._write_messages(actor_id, commit, now)
            woken: list[str] = []
            for target, name, body, completable in commit.outbox:
                _, woke = store._deliver(target, name, body, completable, now)
                if woke and target not in woken:
                    woken.append(target)
            if commit.release:
                if not release_now:
                    cursor.execute(
                        f"UPDATE {_ACTOR} SET lease_owner = NULL, lease_expires_at = NULL, "
                        "step_lock_until = NULL WHERE actor_id = %s RETURNING wake_at",
                        [actor_id],
                    )
                    wake_at = _utc(cursor.fetchone()[0])
                finished = workflow_state in ports.FINISHED_STATES
                waiting = list(waiting_for or [])
                if not finished and waiting and (wake_at is None or wake_at > now):
                    names = "" if "*" in waiting else " AND m.name = ANY(%s)"
                    cursor.execute(
                        f"UPDATE {_ACTOR} SET wake_at = %s WHERE actor_id = %s AND EXISTS (SELECT 1 FROM "
                        f"{_MESSAGE} AS m WHERE m.actor_id = %s AND m.status = %s{names}) RETURNING wake_at",
                        [now, actor_id, actor_id, ports.MESSAGE_PENDING, *([waiting] if names else [])],
                    )
                    if cursor.fetchone() is not None:
                        wake_at = now
                if wake_at is not None and wake_at <= now and actor_id not in woken:
                    woken.append(actor_id)
    result = ports.CommitResult(ok=True, wake_at=wake_at, woken=woken)
    if isinstance(commit.step_lock_until, datetime):
        result.state = serde.from_json(fresh_state)
    return result


def _entry_params(rec: ports.EntryRecord, created_at: datetime | None) -> list[Any]:
    """The 12 column values of one history entry after ``actor_id``, in ``_UPSERT_ROW``/``_VALUES_ROW``
    order (key, location, kind, data, status, attempts, error, last_attempt_at, created_at, completed_at,
    rollback_completed_at, rollback_error); JSON columns serialised (``SerializationError``)."""
    return [
        rec.key,
        _jsonb(list(rec.location)),
        rec.kind,
        _jsonb(serde.to_json(rec.data, where=f"history entry {rec.key!r}")),
        rec.status,
        rec.attempts,
        _jsonb(serde.to_json(rec.error, where=f"error of {rec.key!r}")),
        rec.last_attempt_at,
        created_at,
        rec.completed_at,
        rec.rollback_completed_at,
        _jsonb(serde.to_json(rec.rollback_error, where=f"rollback error of {rec.key!r}")),
    ]


def _upsert(cursor: Any, actor_id: str, upserts: list[ports.EntryRecord], now: datetime) -> None:
    """All history upserts of a commit as one multi-row INSERT ... ON CONFLICT DO UPDATE."""
    params: list[Any] = []
    for rec in upserts:
        params += [actor_id, *_entry_params(rec, rec.created_at or now)]
    cursor.execute(_UPSERT_HEAD + ", ".join([_UPSERT_ROW] * len(upserts)) + _UPSERT_TAIL, params)


_VALUES_ROW = (
    "(%s, %s::jsonb, %s, %s::jsonb, %s, %s::integer, %s::jsonb, %s::timestamptz, %s::timestamptz, "
    "%s::timestamptz, %s::timestamptz, %s::jsonb)"
)


def _commit_one_statement(
    store: DjangoStore, actor_id: str, token: int, commit: ports.Commit
) -> ports.CommitResult:
    """A ``_simple`` commit as one statement (one round trip, one transaction): the fenced actor UPDATE,
    then the history upsert and the message receipts as data-modifying CTEs joined to it (so they write
    nothing when the fence rejects the commit)."""
    sets, params, fresh_state, _release_now, want_state = _actor_sets(commit)
    returning = "c.now, a.wake_at, a.waiting_for, a.workflow_state" + (", a.state" if want_state else "")
    sql = (
        "WITH c AS (SELECT clock_timestamp() AS now), "
        f"u AS (UPDATE {_ACTOR} AS a SET {', '.join(sets)} FROM c "
        "WHERE a.actor_id = %s AND a.lease_token = %s AND a.lease_owner IS NOT NULL AND NOT a.destroyed "
        f"RETURNING {returning})"
    )
    params += [actor_id, token]
    if commit.upserts:
        rows: list[Any] = []
        for rec in commit.upserts:
            rows += _entry_params(rec, rec.created_at)
        sql += (
            f', i AS (INSERT INTO {_ENTRY} (actor_id, "key", location, kind, data, status, attempts, error, '
            "last_attempt_at, created_at, completed_at, rollback_completed_at, rollback_error) "
            "SELECT %s, v.k, v.loc, v.kind, v.data, v.status, v.attempts, v.error, v.last_attempt_at, "
            "COALESCE(v.created_at, u.now), v.completed_at, v.rollback_completed_at, v.rollback_error "
            f"FROM (VALUES {', '.join([_VALUES_ROW] * len(commit.upserts))}) AS v(k, loc, kind, data, status, "
            "attempts, error, last_attempt_at, created_at, completed_at, rollback_completed_at, "
            "rollback_error) CROSS JOIN u" + _UPSERT_TAIL + ")"
        )
        params += [actor_id, *rows]
    if commit.receive_messages:  # the messages a queue wait took, marked received (only if still pending)
        from .storage import _message_pk

        sql += (
            f", r AS (UPDATE {_MESSAGE} AS m SET status = %s FROM u WHERE m.actor_id = %s "
            "AND m.id = ANY(%s) AND m.status = %s)"
        )
        params += [
            ports.MESSAGE_RECEIVED,
            actor_id,
            [_message_pk(m) for m in commit.receive_messages],
            ports.MESSAGE_PENDING,
        ]
    sql += " SELECT * FROM u"
    with connections[store.using].cursor() as cursor:
        cursor.execute(sql, params)
        row = cursor.fetchone()
    if row is None:  # fenced off: the upsert joined no row, nothing was written
        return ports.CommitResult(ok=False)
    now, wake_at, workflow_state = _utc(row[0]), _utc(row[1]), row[3]
    if want_state:
        fresh_state = _load(row[4])
    woken: list[str] = []
    if commit.release and workflow_state not in ports.FINISHED_STATES and wake_at is not None:
        if wake_at <= now:
            woken.append(actor_id)
    result = ports.CommitResult(ok=True, wake_at=wake_at, woken=woken)
    if isinstance(commit.step_lock_until, datetime):
        result.state = serde.from_json(fresh_state)
    return result


# --- warm queue waits (LISTEN/NOTIFY) ---------------------------------------------------------------------


def wake_channel(actor_id: str) -> str:
    """The NOTIFY channel a warm-waiting run of ``actor_id`` listens on (an actor id is 32 hex digits)."""
    return f"rivet_wake_{actor_id}"


def notify_waiter(cursor: Any, actor_id: str) -> None:
    """Queue a notification for a run of ``actor_id`` listening in a warm wait; PostgreSQL delivers it
    when the surrounding transaction commits (so the listener sees the message it announces)."""
    cursor.execute("SELECT pg_notify(%s, '')", [wake_channel(actor_id)])


def _has_pending(cursor: Any, actor_id: str, names: list[str]) -> bool:
    any_name = "*" in names
    cursor.execute(
        f"SELECT EXISTS (SELECT 1 FROM {_MESSAGE} WHERE actor_id = %s AND status = %s"
        + ("" if any_name else " AND name = ANY(%s)")
        + ")",
        [actor_id, ports.MESSAGE_PENDING, *([] if any_name else [list(names)])],
    )
    return bool(cursor.fetchone()[0])


def wait_for_messages(store: DjangoStore, actor_id: str, names: list[str], timeout: float) -> bool:
    """``DjangoStore.wait_for_messages`` on PostgreSQL: LISTEN on the actor's channel, look for a pending
    message, then wait up to ``timeout`` seconds for a notification (``notify_waiter``, sent by every
    delivery to an actor whose lease is held) and look again; UNLISTEN before returning.

    Listening starts before the look, so a message committed at any point is either seen by the look or
    announced by a notification that arrives while waiting. Returns True when the look found a pending
    message matching ``names`` (``"*"``: any) or a notification arrived (the caller looks at the messages
    next: a notification may announce a message on another queue), False when the window passed.
    """
    import time

    connection = connections[store.using]
    if connection.in_atomic_block or not actor_id.isalnum():
        return False
    channel = wake_channel(actor_id)
    deadline = time.monotonic() + max(timeout, 0.0)
    with connection.cursor() as cursor:
        cursor.execute(f'LISTEN "{channel}"')
        try:
            pg = connection.connection
            for _ in pg.notifies(timeout=0):  # drop notifications left from earlier waits
                pass
            if _has_pending(cursor, actor_id, names):
                return True
            remaining = deadline - time.monotonic()
            return remaining > 0 and bool(list(pg.notifies(timeout=remaining, stop_after=1)))
        finally:
            cursor.execute(f'UNLISTEN "{channel}"')


def send(
    store: DjangoStore, actor_id: str, name: str, body: Any, completable: bool
) -> tuple[ports.MessageRecord, bool]:
    """``DjangoStore.send_and_check`` on PostgreSQL as one statement (same contract as ``_deliver``): lock
    the actor row, insert the message, apply the wake rule (``wake_at`` = now when the actor waits on
    ``name`` or ``"*"``, or a run holds its lease, and it is unfinished and not due yet) and notify a run
    holding the lease (``notify_waiter``; delivered at commit). Returns ``(message, hint)``: ``hint`` is
    ``actor_context.wake_if_due``'s answer read in the same statement (the actor is due now and no live
    lease is held). Raises ActorNotFoundError (missing or destroyed actor) and SerializationError (body)."""
    encoded = serde.to_json(body, where=f"body of queue message {name!r}")
    live = f"a.workflow_state NOT IN ({_FINISHED_SQL})"
    sql = (
        "WITH c AS (SELECT clock_timestamp() AS now), "
        "a AS (SELECT actor_id, workflow_state, waiting_for, lease_owner, lease_expires_at, wake_at "
        f"FROM {_ACTOR} "
        "WHERE actor_id = %s AND NOT destroyed FOR UPDATE), "
        f"m AS (INSERT INTO {_MESSAGE} (actor_id, name, body, created_at, completable, status) "
        "SELECT a.actor_id, %s, %s::jsonb, c.now, %s, %s FROM a, c RETURNING id, created_at), "
        f"w AS (UPDATE {_ACTOR} AS t SET wake_at = c.now, updated_at = c.now FROM a, c "
        f"WHERE t.actor_id = a.actor_id AND {live} AND (a.lease_owner IS NOT NULL "
        "OR jsonb_exists(a.waiting_for, '*') OR jsonb_exists(a.waiting_for, %s)) "
        "AND (a.wake_at IS NULL OR a.wake_at > c.now) RETURNING 1) "
        f"SELECT m.id, m.created_at, CASE WHEN a.lease_owner IS NOT NULL AND {live} "
        "THEN pg_notify(%s, '') END, "
        "(EXISTS (SELECT 1 FROM w) OR a.wake_at <= c.now) "
        "AND NOT (a.lease_owner IS NOT NULL AND a.lease_expires_at > c.now) FROM m, a, c"
    )
    params = [
        actor_id,
        name,
        _jsonb(encoded),
        completable,
        ports.MESSAGE_PENDING,
        name,
        wake_channel(actor_id),
    ]
    with connections[store.using].cursor() as cursor:
        cursor.execute(sql, params)
        row = cursor.fetchone()
    if row is None:
        raise errors.ActorNotFoundError(f"no actor with id {actor_id!r}", actor_id=actor_id)
    message = ports.MessageRecord(
        id=str(row[0]),
        actor_id=actor_id,
        name=name,
        body=serde.from_json(encoded),
        created_at=_utc(row[1]),
        completable=completable,
        status=ports.MESSAGE_PENDING,
    )
    return message, bool(row[3])
