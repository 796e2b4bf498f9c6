"""The queue part of ``PostgresStore``: one-statement sends with the dispatcher hint, warm waits on
LISTEN/NOTIFY (every delivery to an actor whose lease is held NOTIFYs the actor's channel at commit; a run
in a warm queue wait LISTENs on it), and the notifications waiting senders hear through the process's
listening connection (``postgres_listener``).

A mixin placed before ``DjangoStore`` in ``PostgresStore``'s bases: the host provides ``using``.
"""

from __future__ import annotations

import threading
import time
from typing import Any

from django.db import connections

from .. import models
from ..engine.model import errors, ports, serde, watches
from . import mapper
from .postgres_listener import listener_for, sends_channel
from .prepared import store_cursor

_ACTOR = models.Actor._meta.db_table
_MESSAGE = models.QueueMessage._meta.db_table
_FINISHED_SQL = ", ".join(f"'{s}'" for s in sorted(ports.FINISHED_STATES))
_CLOSED_SQL = ", ".join(f"'{s}'" for s in sorted(ports.CLOSED_STATES))


def wake_channel(actor_id: str) -> str:
    """The NOTIFY channel a warm-waiting run of ``actor_id`` listens on (an actor id is 32 hex digits)."""
    return f"rivet_wake_{actor_id}"


#: NOTIFY the waiting senders of an actor (params: ``ended_notify_params``) that its workflow ended or it is
#: being destroyed (payload ''); only while a completable message of it is open: nobody else can be
#: waiting, and a NOTIFY costs the committing transaction a global lock
ENDED_NOTIFY_SQL = (
    f"SELECT pg_notify(%s, '') WHERE EXISTS (SELECT 1 FROM {_MESSAGE} WHERE actor_id = %s "
    "AND status <> %s AND completable)"
)


def ended_notify_params(actor_id: str) -> list[str]:
    """The parameters of ``ENDED_NOTIFY_SQL`` for ``actor_id``."""
    return [sends_channel(actor_id), actor_id, ports.MESSAGE_COMPLETED]


#: the NOTIFY channel of sends that make a released actor due (payload: its id); idle workers listen
WAKES_CHANNEL = "rivet_wakes"

#: per thread: alias -> the driver connection that LISTENs on WAKES_CHANNEL
_listening = threading.local()


class PostgresQueues:
    """``send``/``send_and_check``/``pending_messages``/``wait_for_messages``/``watch_sends`` of
    ``PostgresStore`` and the notifies of a delivery, of a completion and of a workflow's end."""

    using: str
    _actors: Any  # provided by DjangoStore: its actors queryset
    _db: Any  # provided by DjangoStore (connection.Connections._db): this thread's Django connection
    notifies_wakes = True
    #: prepare the store's own statements (the ``PREPARED_STATEMENTS`` setting; ``prepared`` module)
    prepared_statements = True

    def _cursor(self) -> Any:
        """A cursor for the store's own statements: bound on the server and prepared
        (``prepared.store_cursor``; not prepared when ``prepared_statements`` is False)."""
        return store_cursor(self.using, prepare=self.prepared_statements, connection=self._db())

    def _notify_waiter(self, actor_id: str) -> None:
        """NOTIFY a run of ``actor_id`` listening in a warm wait; PostgreSQL delivers it when the surrounding
        transaction commits (so the listener sees the message it announces)."""
        with self._cursor() as cursor:
            cursor.execute("SELECT pg_notify(%s, '')", [wake_channel(actor_id)])

    def _notify_completed(self, actor_id: str, message_ids: list[int]) -> None:
        """NOTIFY the senders waiting on ``message_ids`` of ``actor_id`` (one statement, payload: the message
        id); delivered at commit, so the woken sender reads the completed message."""
        with self._cursor() as cursor:
            cursor.execute(
                "SELECT pg_notify(%s, m::text) FROM unnest(%s::bigint[]) AS m",
                [sends_channel(actor_id), list(message_ids)],
            )

    def _notify_ended(self, actor_id: str) -> None:
        """NOTIFY the senders waiting on ``actor_id`` that its workflow finished or it is being destroyed
        (``ENDED_NOTIFY_SQL``)."""
        with self._cursor() as cursor:
            cursor.execute(ENDED_NOTIFY_SQL, ended_notify_params(actor_id))

    def watch_sends(self, actor_id: str) -> watches.SendWatch:
        """A ``NotifiedWatch`` on the actor's sends channel of the process's listening connection
        (``postgres_listener``): the sender holds no connection while it waits, and the process LISTENs once
        per actor however many senders wait and however long. Inside a transaction (nothing it sends
        is committed, nothing is delivered to it) the polling watch."""
        if connections[self.using].in_atomic_block or not actor_id.isalnum():
            return watches.SendWatch()
        return listener_for(self.using).watch(sends_channel(actor_id))

    def send(
        self,
        actor_id: str,
        name: str,
        body: Any,
        completable: bool = False,
        *,
        trace_context: dict | None = None,
        dedup_id: str | None = None,
    ) -> ports.MessageRecord:
        """``DjangoStore.send`` as one statement (see ``send_and_check``)."""
        return self.send_and_check(
            actor_id, name, body, completable, trace_context=trace_context, dedup_id=dedup_id
        )[0]

    def send_and_check(
        self,
        actor_id: str,
        name: str,
        body: Any,
        completable: bool = False,
        *,
        trace_context: dict | None = None,
        dedup_id: str | None = None,
    ) -> tuple[ports.MessageRecord, bool | None]:
        """``send`` as one statement (same contract as ``_deliver``): lock the actor row, insert the message,
        apply the wake rule (``wake_at`` = now when the actor waits on ``name`` or ``"*"``, or a run holds
        its lease, and it is unfinished and not due yet) and notify a run holding the lease (delivered at
        commit). Returns ``(message, hint)``: ``hint`` is ``delivery.wake_if_due``'s answer read in the
        same statement (the actor is due now and no live lease is held); when it is True the statement
        also NOTIFYs ``WAKES_CHANNEL`` with the actor id (``wait_for_wakes``). Raises ActorNotFoundError
        (missing or destroyed actor), SerializationError (body) and WorkflowFinishedError (the workflow is
        completed or cancelled: the statement inserts nothing).

        With ``dedup_id`` the insert does nothing on the unique (actor, dedup_id) constraint (``ON
        CONFLICT``), and then neither wakes nor notifies: the kept message that has it is read and
        returned with hint False (``ports.Store.send``)."""
        encoded = serde.to_json(body, where=f"body of queue message {name!r}")
        live = f"a.workflow_state NOT IN ({_FINISHED_SQL})"
        sql = (
            "WITH c AS (SELECT clock_timestamp() AS now), "
            "a AS (SELECT actor_id, workflow_state, waiting_for, lease_owner, lease_expires_at, wake_at "
            f"FROM {_ACTOR} WHERE actor_id = %s AND NOT destroyed FOR UPDATE), "
            f"m AS (INSERT INTO {_MESSAGE} (actor_id, name, body, created_at, completable, status, "
            "trace_context, dedup_id) "
            "SELECT a.actor_id, %s, %s::jsonb, c.now, %s, %s, %s::jsonb, %s FROM a, c "
            f"WHERE a.workflow_state NOT IN ({_CLOSED_SQL}) ON CONFLICT DO NOTHING RETURNING id, created_at), "
            f"w AS (UPDATE {_ACTOR} AS t SET wake_at = c.now, updated_at = c.now FROM a, c "
            f"WHERE t.actor_id = a.actor_id AND {live} AND EXISTS (SELECT 1 FROM m) "
            "AND (a.lease_owner IS NOT NULL "
            "OR jsonb_exists(a.waiting_for, '*') OR jsonb_exists(a.waiting_for, %s)) "
            "AND (a.wake_at IS NULL OR a.wake_at > c.now) RETURNING 1)"
            f", h AS (SELECT (EXISTS (SELECT 1 FROM w) OR a.wake_at <= c.now) "
            "AND NOT (a.lease_owner IS NOT NULL AND a.lease_expires_at > c.now) AS hint FROM a, c) "
            f"SELECT m.id, m.created_at, CASE WHEN a.lease_owner IS NOT NULL AND {live} "
            "THEN pg_notify(%s, '') END, h.hint, "
            "CASE WHEN h.hint THEN pg_notify(%s, a.actor_id) END FROM m, a, h"
        )
        params = [
            actor_id,
            name,
            mapper.jsonb(encoded),
            completable,
            ports.MESSAGE_PENDING,
            mapper.jsonb(trace_context),
            dedup_id,
            name,
            wake_channel(actor_id),
            WAKES_CHANNEL,
        ]
        with self._cursor() as cursor:
            cursor.execute(sql, params)
            row = cursor.fetchone()
        if row is None and dedup_id is not None:  # a kept message has the dedup id: answer with it
            first = (
                models.QueueMessage.objects.using(self.using)
                .filter(actor_id=actor_id, dedup_id=dedup_id, actor__destroyed=False)
                .first()
            )
            if first is not None:
                return mapper.message_from_model(first), False
        if row is None:  # nothing stored: no such live actor, or its workflow is completed or cancelled
            state = (
                self._actors()
                .filter(pk=actor_id, destroyed=False)
                .values_list("workflow_state", flat=True)
                .first()
            )
            if state in ports.CLOSED_STATES:
                raise errors.workflow_finished(actor_id, state, name)
            raise errors.ActorNotFoundError(f"no actor with id {actor_id!r}", actor_id=actor_id)
        message = ports.MessageRecord(
            id=str(row[0]),
            actor_id=actor_id,
            name=name,
            body=serde.decoded(body if type(body) is serde.Encoded else encoded),
            created_at=mapper.utc(row[1]),
            completable=completable,
            status=ports.MESSAGE_PENDING,
            trace_context=trace_context,
            dedup_id=dedup_id,
        )
        return message, bool(row[3])

    def pending_messages(
        self, actor_id: str, names: list[str] | None, limit: int
    ) -> list[ports.MessageRecord]:
        """``DjangoStore.pending_messages`` as one prepared statement (a queue wait's read, built without
        the ORM): up to ``limit`` not-yet-received messages, oldest first; ``names`` None or containing
        "*" = any."""
        any_name = names is None or "*" in names
        sql = (
            "SELECT id, name, body, created_at, completable, status, response, completed_at, trace_context, "
            f"dedup_id FROM {_MESSAGE} WHERE actor_id = %s AND status = %s"
            + ("" if any_name else " AND name = ANY(%s)")
            + " ORDER BY id LIMIT %s"
        )
        params = [actor_id, ports.MESSAGE_PENDING, *([] if any_name else [list(names or [])]), max(limit, 0)]
        with self._cursor() as cursor:
            cursor.execute(sql, params)
            rows = cursor.fetchall()
        return [self._pending_record(actor_id, row) for row in rows]

    @staticmethod
    def _pending_record(actor_id: str, row: Any) -> ports.MessageRecord:
        """The ``MessageRecord`` of a ``pending_messages`` row, its body's stored JSON kept (``encoded_body``)."""
        body = serde.decode_keeping(mapper.load_json(row[2]))
        record = ports.MessageRecord(
            id=str(row[0]),
            actor_id=actor_id,
            name=row[1],
            body=body.value,
            created_at=mapper.utc(row[3]),
            completable=row[4],
            status=row[5],
            response=serde.from_json(mapper.load_json(row[6])),
            completed_at=mapper.utc(row[7]),
            trace_context=mapper.load_json(row[8]),
            dedup_id=row[9],
        )
        record.encoded_body = body
        return record

    def wait_for_messages(self, actor_id: str, names: list[str], timeout: float) -> bool:
        """A warm queue wait: LISTEN on the actor's channel, look for a pending message, then wait up to
        ``timeout`` seconds for a notification (sent by every delivery to an actor whose lease is held) and
        look again; UNLISTEN before returning.

        Listening starts before the look, so a message committed at any point is either seen by the look
        or announced by a notification that arrives while waiting. Returns True when the look found a
        pending message matching ``names`` (``"*"``: any) or a notification arrived (the caller looks at the
        messages next: a notification may announce a message on another queue), False when the window
        passed, or at once inside a transaction (a notification is only delivered between transactions), or
        when the server closed the connection while it listened (the connection is closed; the next call
        opens a new one).
        """
        connection = connections[self.using]
        if connection.in_atomic_block or not actor_id.isalnum():
            return False
        channel = wake_channel(actor_id)
        deadline = time.monotonic() + max(timeout, 0.0)
        with connection.cursor() as cursor:
            cursor.execute(f'LISTEN "{channel}"')
            pg = connection.connection
            try:
                for _ in pg.notifies(timeout=0):  # drop notifications left from earlier waits
                    pass
                if self._has_pending(cursor, actor_id, list(names)):
                    return True
                remaining = deadline - time.monotonic()
                return remaining > 0 and bool(list(pg.notifies(timeout=remaining, stop_after=1)))
            except connection.Database.OperationalError:
                # The server closed the connection while the run listened (an idle timeout, a restart):
                # the window is over; the run releases as usual, on a new connection.
                connection.close()
                return False
            finally:
                if connection.connection is not None:
                    cursor.execute(f'UNLISTEN "{channel}"')

    def wait_for_wakes(self, timeout: float) -> list[str]:
        """LISTEN on ``WAKES_CHANNEL`` (once per connection; the thread keeps listening between calls) and
        wait up to ``timeout`` seconds for sends that made a released actor due; their actor ids, oldest
        first, each once ([] when the window passed, inside a transaction, or when the server closed the
        connection: it is closed, the next call listens on a new one)."""
        connection = connections[self.using]
        if connection.in_atomic_block:
            return []
        connection.ensure_connection()
        pg = connection.connection
        try:
            if _listening.__dict__.get(self.using) is not pg:
                with connection.cursor() as cursor:
                    cursor.execute(f'LISTEN "{WAKES_CHANNEL}"')
                _listening.__dict__[self.using] = pg
            got = [n.payload for n in pg.notifies(timeout=max(timeout, 0.0), stop_after=1)]
            if got:
                got += [n.payload for n in pg.notifies(timeout=0)]
        except connection.Database.OperationalError:
            connection.close()
            return []
        return list(dict.fromkeys(got))

    @staticmethod
    def _has_pending(cursor: Any, actor_id: str, names: list[str]) -> bool:
        any_name = "*" in names
        cursor.execute(
            f"SELECT EXISTS (SELECT 1 FROM {_MESSAGE} WHERE actor_id = %s AND status = %s"
            + ("" if any_name else " AND name = ANY(%s)")
            + ")",
            [actor_id, ports.MESSAGE_PENDING, *([] if any_name else [list(names)])],
        )
        return bool(cursor.fetchone()[0])
