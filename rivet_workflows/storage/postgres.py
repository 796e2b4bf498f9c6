"""PostgresStore: ``DjangoStore`` with its hot paths as raw SQL on PostgreSQL (psycopg 3), same contract.

The portable ORM store stays the reference; on PostgreSQL this subclass overrides what it does in fewer
round trips (DESIGN.md section 11):

* ``commit``: a step's commit (actor columns, history upserts, message receipts, a release that needs no
  pending-message re-check) is ONE autocommit statement: the fenced ``UPDATE actor ... RETURNING`` and the
  history upsert and receipts as data-modifying CTEs joined to it (they write nothing when the fence
  rejects it). Other commits run the template of ``DjangoStore._apply`` with raw-SQL steps: the fenced
  UPDATE that also reads the clock and the new wake-up columns, one multi-row history upsert, the release
  with its re-check as one conditional UPDATE.
* ``claim_and_load``/``load_for_run``: the claim's ``UPDATE ... RETURNING`` (or the actor's SELECT) and the
  history query pipelined: one round trip, one transaction.
* ``create_actor``: one statement (``INSERT ... ON CONFLICT DO NOTHING``).
* ``send`` (one statement with the wake rule, the notify and the sender's hint) and ``wait_for_messages``
  (LISTEN/NOTIFY) come from ``postgres_queues.PostgresQueues``.

Deadlines use the database clock: ``clock_timestamp()`` read once per statement through a sub-select.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from datetime import datetime
from typing import Any

from django.db import DatabaseError, connections
from django.db.models import Q

from .. import models
from ..engine.model import errors, ports, serde, wake
from . import mapper
from .orm import DjangoStore, Written
from .postgres_flow import OVERFETCH as _OVERFETCH
from .postgres_flow import admit as _admit
from .postgres_flow import candidates
from .postgres_flow import flow_params as _flow_params
from .postgres_queues import ENDED_NOTIFY_SQL, PostgresQueues, ended_notify_params
from .postgres_streams import PostgresStreams

_ACTOR = models.Actor._meta.db_table
_ENTRY = models.HistoryEntry._meta.db_table
_MESSAGE = models.QueueMessage._meta.db_table
_FINISHED_SQL = ", ".join(f"'{s}'" for s in sorted(ports.FINISHED_STATES))
_ACTOR_COLUMNS = ", ".join(mapper.ACTOR_COLUMNS)
_ACTOR_COLUMNS_A = ", ".join(f"a.{c}" for c in mapper.ACTOR_COLUMNS)
_ENTRY_COLUMNS = ", ".join('"key"' if c == "key" else c for c in mapper.ENTRY_COLUMNS)
_ENTRY_INSERT = f'INSERT INTO {_ENTRY} (actor_id, "key", ' + ", ".join(mapper.ENTRY_WRITE_COLUMNS[1:]) + ")"
_UPSERT_ROW = "(%s, %s, %s::jsonb, %s, %s::jsonb, %s, %s, %s::jsonb, %s, %s, %s, %s, %s::jsonb, %s)"
_UPSERT_TAIL = ' ON CONFLICT (actor_id, "key") DO UPDATE SET ' + ", ".join(
    f"{c} = EXCLUDED.{c}" for c in mapper.ENTRY_UPDATE_COLUMNS
)
_VALUES_ROW = (
    "(%s, %s::jsonb, %s, %s::jsonb, %s, %s::integer, %s::jsonb, %s::timestamptz, %s::timestamptz, "
    "%s::timestamptz, %s::timestamptz, %s::jsonb, %s::text)"
)

#: SQLSTATEs of a session the server ended while it was idle (nothing of a call sent after it ran)
_ENDED_BEFORE_THE_CALL = frozenset({"57P05"})  # idle_session_timeout

#: ``orm.lease_fence`` in SQL, on the actor table aliased ``a``; parameters: actor id, lease token
LEASE_FENCE = "a.actor_id = %s AND a.lease_token = %s AND a.lease_owner IS NOT NULL AND NOT a.destroyed"

#: where the fenced UPDATE's RETURNING (``_returning``) puts the state, when it returns it
_STATE_AT = 7

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


def _one_statement(commit: ports.Commit) -> bool:
    """True when the commit is one statement's work: actor columns, history upserts and message receipts
    only (no audit row, no outbox or relay row), and a release that needs no pending-message re-check (no queue wait, or a finished workflow)."""
    if (
        commit.outbox
        or commit.relay
        or commit.deletes
        or commit.complete_messages
        or commit.audit is not None
    ):
        return False
    if commit.defer_until is not ports.UNSET:
        return False
    if not commit.release:
        return True
    return commit.workflow_state in ports.FINISHED_STATES or (
        commit.waiting_for is not ports.UNSET and not commit.waiting_for
    )


def _actor_sets(commit: ports.Commit, changes: dict[str, Any]) -> tuple[list[str], list[Any], bool]:
    """The SET clauses of the fenced actor UPDATE of ``commit`` (its ``mapper.actor_changes``):
    ``(sets, params, release_now)``; ``release_now``: the UPDATE frees the lease itself (no outbox)."""
    sets: list[str] = [] if commit.lease_only else ["updated_at = c.now"]
    params: list[Any] = []
    for name in ("state", "input", "output", "error"):
        if name in changes:
            sets.append(f"{name} = %s::jsonb")
            params.append(mapper.jsonb(changes[name]))
    if "workflow_state" in changes:
        sets.append("workflow_state = %s")
        params.append(changes["workflow_state"])
        if changes["workflow_state"] in ports.FINISHED_STATES:
            sets.append("wake_at = NULL")  # finished actors are never due
        elif "wake_at" in changes:
            sets.append("wake_at = %s")
            params.append(changes["wake_at"])
    elif "wake_at" in changes:
        sets.append(
            f"wake_at = CASE WHEN a.workflow_state IN ({_FINISHED_SQL}) THEN NULL ELSE %s::timestamptz END"
        )
        params.append(changes["wake_at"])
    else:
        sets.append(f"wake_at = CASE WHEN a.workflow_state IN ({_FINISHED_SQL}) THEN NULL ELSE a.wake_at END")
    if "waiting_for" in changes:
        sets.append("waiting_for = %s::jsonb")
        params.append(mapper.jsonb(changes["waiting_for"]))
    for name in ("code_version", "awaiting_code_version"):
        if name in changes:
            sets.append(f"{name} = %s")
            params.append(changes[name])
    if "replay_generation" in changes:
        sets.append("replay_generation = %s")
        params.append(changes["replay_generation"])
    if "attributes" in changes:  # merged into the stored ones (jsonb ||: a key set again takes the new value)
        sets.append("attributes = a.attributes || %s::jsonb")
        params.append(mapper.jsonb(changes["attributes"]))
    release_now = commit.release and not commit.outbox
    if release_now:
        sets.append("lease_owner = NULL, lease_expires_at = NULL, step_lock_until = NULL")
    elif "step_lock_until" in changes:
        sets.append("step_lock_until = %s")
        params.append(changes["step_lock_until"])
    return sets, params, release_now


def _returning(commit: ports.Commit, changes: dict[str, Any]) -> tuple[str, bool]:
    """The RETURNING list of the fenced UPDATE; True when it also returns the state (a step lock taken
    by a commit that does not write the state: the step body gets the fresh state)."""
    want_state = isinstance(commit.step_lock_until, datetime) and "state" not in changes
    return "c.now, a.wake_at, a.waiting_for, a.workflow_state, a.paused_at IS NOT NULL, a.name, " + (
        "a.concurrency_key" + (", a.state" if want_state else "")
    ), want_state


class PostgresStore(PostgresStreams, PostgresQueues, DjangoStore):
    """``DjangoStore`` on PostgreSQL with the hot paths in raw SQL (see the module docstring).

    Same contract and thread-safety as ``DjangoStore``, and its constructor plus ``prepared_statements``
    (bool, default True: the store's statements are prepared, ``prepared``); build it with
    ``storage.store_for``.
    """

    def __init__(self, using: str = "default", *, prepared_statements: bool = True, **options: Any) -> None:
        super().__init__(using, **options)
        self.prepared_statements = prepared_statements

    def _attributes_q(self, attributes: dict[str, Any]) -> Q:
        """Every attribute equal to its value as one jsonb containment (``attributes @> {...}``), which the
        GIN index ``rivet_actor_attributes_gin`` serves (DESIGN.md section 19; ``true`` is not ``1`` here)."""
        return Q(attributes__contains=dict(attributes))

    def _never_ran(self, error: DatabaseError) -> bool:
        """True for SQLSTATE 57P05: the server ended the session for being idle before the call arrived."""
        return getattr(error.__cause__, "sqlstate", None) in _ENDED_BEFORE_THE_CALL

    def now(self) -> datetime:
        """The database clock: ``clock_timestamp()`` as an aware UTC datetime."""
        with self._cursor() as cursor:
            cursor.execute("SELECT clock_timestamp()")
            return mapper.utc(cursor.fetchone()[0])

    @contextlib.contextmanager
    def _one_round_trip(self) -> Iterator[None]:
        """Send the statements executed inside as one pipeline (psycopg pipeline mode): one round trip and,
        in autocommit, one implicit transaction. Each statement still takes its own snapshot (READ
        COMMITTED), so a read after a claim that waited for a row lock sees what the previous holder
        committed. Errors are wrapped like Django's (a broken connection is marked unusable). Without
        pipeline support in libpq (< 14) the statements simply run one after another."""
        connection = connections[self.using]
        connection.ensure_connection()
        if not _pipeline() or not hasattr(connection.connection, "pipeline"):
            yield
            return
        with connection.wrap_database_errors, connection.connection.pipeline():
            yield

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
        """``DjangoStore.create_actor`` as one autocommit statement in the common case: ``INSERT ... ON
        CONFLICT DO NOTHING`` returning the new row, united with the existing row when the key was taken
        before the statement began. When a concurrent creator committed the key while this insert waited
        for it, the statement returns nothing (its snapshot predates that row) and a second query reads the
        winner's row. SerializationError for an unserializable input or state. ``actor_id``: the new
        actor's id (None: a fresh uuid4), its first fencing token the creation instant in microseconds
        (``orm._given_id``: a key re-created under the same id stays fenced from the old executor)."""
        state_json = serde.to_json(state, where="state")
        input_json = serde.to_json(input, where="input")
        key_text = mapper.key_text(key)
        wake_sql = "c.now" if due else "NULL"
        if start_after is not None:  # a deferred start: its offset is a parameter (one prepared statement)
            wake_sql = "c.now + %s * interval '1 second'"
        sql = (
            "WITH c AS (SELECT clock_timestamp() AS now), "
            f"ins AS (INSERT INTO {_ACTOR} (actor_id, name, key, key_text, state, input, output, error, "
            "workflow_state, wake_at, waiting_for, lease_owner, lease_expires_at, lease_token, "
            "step_lock_until, destroyed, created_at, updated_at, trace_context, replay_generation, "
            "concurrency_key, concurrency_limit, rate_count, rate_per, priority, deadline_at, parent_actor_id, "
            "attributes) "
            "SELECT %s, %s, %s::jsonb, %s, %s::jsonb, %s::jsonb, NULL, NULL, %s, "
            f"{wake_sql}, '[]'::jsonb, NULL, NULL, "
            "CASE WHEN %s THEN (extract(epoch FROM c.now) * 1000000)::bigint ELSE 0 END, "
            "NULL, false, c.now, c.now, %s::jsonb, 0, "
            "%s, %s, %s, %s, %s, c.now + %s * interval '1 second', %s, '{}'::jsonb FROM c "
            f"ON CONFLICT (name, key_text) DO NOTHING RETURNING {_ACTOR_COLUMNS}) "
            f"SELECT {_ACTOR_COLUMNS}, true FROM ins UNION ALL "
            f"SELECT {_ACTOR_COLUMNS}, false FROM {_ACTOR} WHERE name = %s AND key_text = %s AND NOT destroyed "
            "AND NOT EXISTS (SELECT 1 FROM ins)"
        )
        params = [
            actor_id or models.new_actor_id(),
            name,
            mapper.jsonb(list(key)),
            key_text,
            mapper.jsonb(state_json),
            mapper.jsonb(input_json),
            ports.PENDING,
            *([] if start_after is None else [float(start_after)]),
            actor_id
            is not None,  # a given (computed) id: tokens from the creation instant (``orm._given_id``)
            mapper.jsonb(trace_context),
            *_flow_params(flow),
            parent_id,
            name,
            key_text,
        ]
        with self._cursor() as cursor:
            for _attempt in range(3):
                cursor.execute(sql, params)
                row = cursor.fetchone()
                if row is not None:
                    return mapper.actor_from_sql(row[:-1]), bool(row[-1])
                cursor.execute(  # lost a race to a creator that committed while we waited: read its row
                    f"SELECT {_ACTOR_COLUMNS} FROM {_ACTOR} WHERE name = %s AND key_text = %s AND NOT destroyed",
                    [name, key_text],
                )
                row = cursor.fetchone()
                if row is not None:
                    return mapper.actor_from_sql(row), False
                # the winner was destroyed meanwhile: the key is free again, try the insert once more
        raise errors.RivetWorkflowsError(
            f"could not create or find actor {name!r} {key!r} (concurrent destroys)"
        )

    # ------------------------------------------------------------------ leases and the run's reads

    def claim(self, actor_id: str, owner: str, lease_seconds: float) -> int | None:
        """``DjangoStore.claim`` as one ``UPDATE ... RETURNING``."""
        got = self._claim(actor_id, owner, lease_seconds, history=False)
        return None if got is None else got[0]

    def claim_and_load(
        self, actor_id: str, owner: str, lease_seconds: float
    ) -> tuple[int, ports.ActorRecord, list[ports.EntryRecord], datetime] | None:
        """``claim`` plus the run's initial reads: ``(token, actor, history, now)`` with ``now`` the database
        clock of the claim, or None when the lease is held elsewhere or the actor is gone. The claim's
        UPDATE and the history query are pipelined: one round trip and one transaction."""
        return self._claim(actor_id, owner, lease_seconds, history=True)

    def _claim(
        self, actor_id: str, owner: str, lease_seconds: float, *, history: bool
    ) -> tuple[int, ports.ActorRecord, list[ports.EntryRecord], datetime] | None:
        with self._one_round_trip(), self._cursor() as cursor:
            cursor.execute(
                f"UPDATE {_ACTOR} AS a SET lease_owner = %s, "
                "lease_expires_at = c.now + %s * interval '1 second', lease_token = a.lease_token + 1, "
                "step_lock_until = NULL "
                "FROM (SELECT clock_timestamp() AS now) AS c "
                "WHERE a.actor_id = %s AND NOT a.destroyed AND a.paused_at IS NULL "
                f"AND (a.lease_expires_at IS NULL OR a.lease_expires_at < c.now) AND {_admit(True)} "
                f"RETURNING {_ACTOR_COLUMNS_A}, c.now",
                [owner, lease_seconds, actor_id],
            )
            if history:
                with self._cursor() as entries:
                    self._query_history(entries, actor_id)
                    row = cursor.fetchone()
                    loaded = [mapper.entry_from_sql(entry) for entry in entries.fetchall()]
            else:
                row, loaded = cursor.fetchone(), []
        if row is None:
            return None
        actor = mapper.actor_from_sql(row[:-1])
        return actor.lease_token, actor, loaded, mapper.utc(row[-1])

    def claim_due(
        self, owner: str, limit: int, lease_seconds: float, *, expired_only: bool = False
    ) -> list[tuple[str, int]]:
        """``DjangoStore.claim_due`` as one statement: the due candidates (``FOR UPDATE SKIP LOCKED``, highest
        priority then oldest ``wake_at``, groups at their limit passed over, at most a group's free slots
        picked from it) and their claim, each limited
        actor admitted by ``rivet_flow_admit`` (a group whose lock another claim holds is skipped this time).
        No table lock: concurrent sweeps claim disjoint actors and never pass a limit."""
        if limit <= 0:
            return []
        expired, ranked = expired_only, "a.priority DESC, a.wake_at"
        with self._cursor() as cursor:
            cursor.execute(
                f"WITH plain AS ({candidates(_ACTOR, 'a.priority = 0', 'a.wake_at', expired_only=expired)}), "
                f"ranked AS ({candidates(_ACTOR, 'a.priority <> 0', ranked, expired_only=expired)}), "
                "cand AS (SELECT * FROM plain UNION ALL SELECT * FROM ranked), "
                "pick AS (SELECT r.actor_id FROM (SELECT cand.*, row_number() OVER (PARTITION BY cand.name, "
                "cand.concurrency_key ORDER BY cand.priority DESC, cand.wake_at, cand.created_at, cand.actor_id) "
                "AS n FROM cand) AS r WHERE r.room IS NULL OR r.n <= r.room "
                "ORDER BY r.priority DESC, r.wake_at, r.created_at, r.actor_id LIMIT %s) "
                f"UPDATE {_ACTOR} AS a SET lease_owner = %s, "
                "lease_expires_at = c.now + %s * interval '1 second', lease_token = a.lease_token + 1, "
                "step_lock_until = NULL "
                "FROM pick, (SELECT clock_timestamp() AS now) AS c "
                "WHERE a.actor_id = pick.actor_id AND a.paused_at IS NULL "
                f"AND (a.lease_expires_at IS NULL OR a.lease_expires_at < c.now) AND {_admit(False)} "
                "RETURNING a.actor_id, a.lease_token, a.priority, a.wake_at, a.created_at",
                [limit * _OVERFETCH, limit * _OVERFETCH, limit, owner, lease_seconds],
            )
            rows = cursor.fetchall()
        rows.sort(key=lambda r: (-r[2], r[3], r[4], r[0]))
        return [(row[0], row[1]) for row in rows]

    @staticmethod
    def _query_history(cursor: Any, actor_id: str) -> None:
        cursor.execute(f"SELECT {_ENTRY_COLUMNS} FROM {_ENTRY} WHERE actor_id = %s ORDER BY id", [actor_id])

    def load_for_run(self, actor_id: str) -> tuple[ports.ActorRecord, list[ports.EntryRecord], datetime]:
        """``(actor, history, now)`` for a run holding a lease already; ActorNotFoundError when it is gone or
        destroyed. Two statements in one round trip and one transaction (pipelined)."""
        with self._one_round_trip(), self._cursor() as cursor:
            cursor.execute(
                f"SELECT {_ACTOR_COLUMNS}, clock_timestamp() FROM {_ACTOR} WHERE actor_id = %s AND NOT destroyed",
                [actor_id],
            )
            with self._cursor() as entries:
                self._query_history(entries, actor_id)
                row = cursor.fetchone()
                loaded = [mapper.entry_from_sql(entry) for entry in entries.fetchall()]
        if row is None:
            raise errors.ActorNotFoundError(f"no actor with id {actor_id!r}", actor_id=actor_id)
        return mapper.actor_from_sql(row[:-1]), loaded, mapper.utc(row[-1])

    # ------------------------------------------------------------------ commit steps

    def _apply(self, actor_id: str, token: int, commit: ports.Commit) -> ports.CommitResult:
        """A step's commit in one statement (``_apply_in_one_statement``), any other through the template."""
        if _one_statement(commit) and not self._db().in_atomic_block:
            return self._apply_in_one_statement(actor_id, token, commit)
        return super()._apply(actor_id, token, commit)

    def _write_actor(self, actor_id: str, token: int, commit: ports.Commit) -> Written | None:
        """The fenced UPDATE: takes the row lock, checks the fence, writes the actor columns, frees the lease
        when it can (no outbox) and reads the clock and the new wake-up columns, in one statement."""
        changes = mapper.actor_changes(commit)
        sets, params, release_now = _actor_sets(commit, changes)
        returning, want_state = _returning(commit, changes)
        with self._cursor() as cursor:
            cursor.execute(
                f"UPDATE {_ACTOR} AS a SET {', '.join(sets)} FROM (SELECT clock_timestamp() AS now) AS c "
                f"WHERE {LEASE_FENCE} RETURNING {returning}",
                [*params, actor_id, token],
            )
            row = cursor.fetchone()
        if row is None:
            return None
        return Written(
            now=mapper.utc(row[0]),
            state=mapper.load_json(row[_STATE_AT]) if want_state else changes.get("state"),
            wake_at=mapper.utc(row[1]),
            waiting_for=list(mapper.load_json(row[2]) or []),
            workflow_state=row[3],
            released=release_now,
            paused=bool(row[4]),
            name=row[5],
            concurrency_key=row[6],
        )

    def _upsert_entries(self, actor_id: str, upserts: list[ports.EntryRecord], now: datetime) -> None:
        """All history upserts of a commit as one multi-row INSERT ... ON CONFLICT DO UPDATE."""
        if not upserts:
            return
        params: list[Any] = []
        for rec in upserts:
            params += [actor_id, *mapper.entry_params(rec, rec.created_at or now)]
        with self._cursor() as cursor:
            cursor.execute(
                f"{_ENTRY_INSERT} VALUES " + ", ".join([_UPSERT_ROW] * len(upserts)) + _UPSERT_TAIL, params
            )

    def _settle(
        self, actor_id: str, commit: ports.Commit, written: Written, woken: list[str]
    ) -> datetime | None:
        """``DjangoStore._settle`` on the columns the fenced UPDATE returned (which cleared the ``wake_at``
        of a finished workflow already, in SQL): the lease is freed here only when the outbox kept it
        (deliveries to a leased actor must see it leased); the rule is ``engine.wake.settle``, whose
        pending-message check is one conditional UPDATE making the actor due now."""
        wake_at, now = written.wake_at, written.now
        if not commit.release:
            return wake_at
        with self._cursor() as cursor:
            if not written.released:
                cursor.execute(
                    f"UPDATE {_ACTOR} SET lease_owner = NULL, lease_expires_at = NULL, "
                    "step_lock_until = NULL WHERE actor_id = %s RETURNING wake_at",
                    [actor_id],
                )
                wake_at = mapper.utc(cursor.fetchone()[0])
            made_due: list[datetime] = []

            def due_now_if_message(names: list[str]) -> bool:
                """The rule's pending-message check, which also writes ``wake_at = now`` when it holds."""
                any_name = "" if "*" in names else " AND m.name = ANY(%s)"
                cursor.execute(
                    f"UPDATE {_ACTOR} SET wake_at = %s WHERE actor_id = %s AND EXISTS (SELECT 1 FROM "
                    f"{_MESSAGE} AS m WHERE m.actor_id = %s AND m.status = %s{any_name}) RETURNING wake_at",
                    [now, actor_id, actor_id, ports.MESSAGE_PENDING, *([names] if any_name else [])],
                )
                if cursor.fetchone() is None:
                    return False
                made_due.append(now)
                return True

            final = wake.settle(
                workflow_state=written.workflow_state,
                wake_at=wake_at,
                waiting_for=written.waiting_for,
                release=True,
                now=now,
                has_matching_message=due_now_if_message,
                defer_until=commit.defer_until,
            )
            if final != (made_due[0] if made_due else wake_at):  # moved past the message check (defer_until)
                cursor.execute(f"UPDATE {_ACTOR} SET wake_at = %s WHERE actor_id = %s", [final, actor_id])
        if wake.due_now(final, now) and actor_id not in woken:
            woken.append(actor_id)
        self._wake_next_in_group(actor_id, written.name, written.concurrency_key, now, woken)
        return final

    def _wake_next_in_group(
        self, actor_id: str, name: str | None, group: str | None, now: datetime, woken: list[str]
    ) -> None:
        """After a release of an actor with a concurrency group: add the group's next due actor to ``woken``
        (the releasing worker dispatches it at once: no wait for the sweep)."""
        if group is None or name is None:
            return
        with self._cursor() as cursor:
            cursor.execute(
                f"SELECT a.actor_id FROM {_ACTOR} AS a WHERE a.name = %s AND a.concurrency_key = %s "
                "AND a.actor_id <> %s AND a.wake_at <= %s AND NOT a.destroyed AND a.paused_at IS NULL "
                "AND (a.lease_expires_at IS NULL OR a.lease_expires_at < %s) "
                "ORDER BY a.priority DESC, a.wake_at, a.created_at LIMIT 1",
                [name, group, actor_id, now, now],
            )
            row = cursor.fetchone()
        if row is not None and row[0] not in woken:
            woken.append(row[0])

    def _apply_in_one_statement(self, actor_id: str, token: int, commit: ports.Commit) -> ports.CommitResult:
        """A ``_one_statement`` commit as one statement (one round trip, one transaction): the fenced actor
        UPDATE, then the history upsert and the message receipts as data-modifying CTEs joined to it (so
        they write nothing when the fence rejects the commit)."""
        changes = mapper.actor_changes(commit)
        sets, params, _release_now = _actor_sets(commit, changes)
        returning, want_state = _returning(commit, changes)
        sql = (
            "WITH c AS (SELECT clock_timestamp() AS now), "
            f"u AS (UPDATE {_ACTOR} AS a SET {', '.join(sets)} FROM c WHERE {LEASE_FENCE} "
            f"RETURNING {returning})"
        )
        params += [actor_id, token]
        if commit.upserts:
            rows: list[Any] = []
            for rec in commit.upserts:
                rows += mapper.entry_params(rec, rec.created_at)
            sql += (
                f", i AS ({_ENTRY_INSERT} "
                "SELECT %s, v.k, v.loc, v.kind, v.data, v.status, v.attempts, v.error, v.last_attempt_at, "
                "COALESCE(v.created_at, u.now), v.completed_at, v.rollback_completed_at, v.rollback_error, "
                f"v.code_version FROM (VALUES {', '.join([_VALUES_ROW] * len(commit.upserts))}) AS v(k, loc, "
                "kind, data, status, attempts, error, last_attempt_at, created_at, completed_at, "
                "rollback_completed_at, rollback_error, code_version) CROSS JOIN u" + _UPSERT_TAIL + ")"
            )
            params += [actor_id, *rows]
        if commit.receive_messages:  # the messages a queue wait took, marked received (only if still pending)
            sql += (
                f", r AS (UPDATE {_MESSAGE} AS m SET status = %s FROM u WHERE m.actor_id = %s "
                "AND m.id = ANY(%s) AND m.status = %s)"
            )
            params += [
                ports.MESSAGE_RECEIVED,
                actor_id,
                [mapper.row_id(m) for m in commit.receive_messages],
                ports.MESSAGE_PENDING,
            ]
        sql += " SELECT u.* FROM u"
        if commit.workflow_state in ports.FINISHED_STATES:
            # the end of the workflow ends the wait of its senders (``_notify_ended``), in the same statement
            sql += f" LEFT JOIN LATERAL ({ENDED_NOTIFY_SQL}) AS n ON true"
            params += ended_notify_params(actor_id)
        with self._cursor() as cursor:
            cursor.execute(sql, params)
            row = cursor.fetchone()
        if row is None:  # fenced off: the upsert joined no row, nothing was written
            return ports.CommitResult(ok=False)
        now, wake_at, workflow_state = mapper.utc(row[0]), mapper.utc(row[1]), row[3]
        # the UPDATE applied the wake rule in SQL (a one-statement release has no queue wait to re-check)
        wake_at = wake.settle(
            workflow_state=workflow_state,
            wake_at=wake_at,
            waiting_for=(),
            release=commit.release,
            now=now,
            has_matching_message=lambda names: False,
        )
        woken: list[str] = []
        if commit.release and wake.due_now(wake_at, now):
            woken.append(actor_id)
        if commit.release:
            self._wake_next_in_group(actor_id, row[5], row[6], now, woken)
        result = ports.CommitResult(ok=True, wake_at=wake_at, woken=woken, paused=bool(row[4]))
        if isinstance(commit.step_lock_until, datetime):
            state = mapper.load_json(row[_STATE_AT]) if want_state else changes.get("state")
            result.state = serde.from_json(state)
        return result
