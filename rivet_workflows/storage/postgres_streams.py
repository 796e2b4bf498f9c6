"""The durable streams of ``PostgresStore``: readers wait on LISTEN/NOTIFY (DESIGN.md section 17).

Every write, close or discard NOTIFYs ``stream_channel(actor_id)`` inside its transaction (delivered at
commit); a waiting reader holds a ``NotifiedWatch`` of the process's one listening connection
(``postgres_listener``), taken before it reads, so it holds no database connection while it waits and
never polls.
"""

from __future__ import annotations

from typing import Any

from django.db import IntegrityError, connections

from .. import models
from ..engine.model import errors, jsontext, ports, serde, watches
from . import mapper
from .postgres_listener import listener_for
from .streams import stream_channel

_ITEM = models.StreamItem._meta.db_table
_ACTOR = models.Actor._meta.db_table
_FINISHED = ", ".join(f"'{s}'" for s in sorted(ports.FINISHED_STATES))

#: a step's write as ONE autocommit statement: lock the actor row, take the offset after the stream's last
#: row, insert unless the stream is closed or the workflow finished, and NOTIFY the readers. No row back:
#: ``stream_write`` asks the portable path why (an unknown actor, a closed stream). The offset read may be
#: stale when another writer of the same stream commits first (the statement's snapshot predates the lock):
#: the unique offset refuses it, and the portable path (lock, then read the offset) writes it.
_WRITE_SQL = f"""
WITH a AS (
    SELECT actor_id, workflow_state FROM {_ACTOR} WHERE actor_id = %s AND NOT destroyed FOR UPDATE
), last AS (
    SELECT "offset", closes FROM {_ITEM} WHERE actor_id = %s AND name = %s ORDER BY "offset" DESC LIMIT 1
), ins AS (
    INSERT INTO {_ITEM} (actor_id, name, "offset", value, attempt, step_key, write_key, discarded, closes, at)
    SELECT a.actor_id, %s, COALESCE((SELECT "offset" FROM last) + 1, 0), %s::jsonb, %s, %s, NULL, false,
           false, clock_timestamp()
    FROM a
    WHERE a.workflow_state NOT IN ({_FINISHED}) AND NOT COALESCE((SELECT closes FROM last), false)
    RETURNING "offset", at
)
SELECT ins."offset", ins.at, pg_notify(%s, '') FROM ins
"""

#: a page read as ONE statement: the actor's workflow state (no row: no such actor) and up to ``limit + 1``
#: rows from the offset on (NULLs when there are none)
_READ_SQL = f"""
SELECT a.workflow_state, i."offset", i.value, i.attempt, i.discarded, i.closes, i.at
FROM {_ACTOR} a LEFT JOIN LATERAL (
    SELECT "offset", value, attempt, discarded, closes, at FROM {_ITEM}
    WHERE actor_id = a.actor_id AND name = %s AND "offset" >= %s ORDER BY "offset" LIMIT %s
) i ON true
WHERE a.actor_id = %s AND NOT a.destroyed
"""


class PostgresStreams:
    """``_notify_stream`` and ``watch_stream`` of ``PostgresStore``."""

    using: str
    _cursor: Any  # PostgresQueues._cursor

    def stream_write(
        self,
        actor_id: str,
        name: str,
        value: Any,
        *,
        attempt: int | None = None,
        step_key: str | None = None,
        write_key: str | None = None,
    ) -> ports.StreamItem:
        """``StreamStorage.stream_write`` with a step's write (no ``write_key``) as one statement
        (``_WRITE_SQL``); a recorded write, or a refused one (to raise the right error), takes the
        portable path."""
        if write_key is not None or connections[self.using].in_atomic_block:
            return super().stream_write(  # type: ignore[misc]
                actor_id, name, value, attempt=attempt, step_key=step_key, write_key=write_key
            )
        encoded = jsontext.dumps(serde.to_json(value, where=f"stream {name!r} item"))  # null for None
        params = [actor_id, actor_id, name, name, encoded, attempt, step_key, stream_channel(actor_id)]
        try:
            with self._cursor() as cursor:
                cursor.execute(_WRITE_SQL, params)
                row = cursor.fetchone()
        except IntegrityError:  # another writer of the stream took the offset: the locking path
            row = None
        if row is None:
            return super().stream_write(actor_id, name, value, attempt=attempt, step_key=step_key)  # type: ignore[misc]
        return ports.StreamItem(int(row[0]), value, attempt, False, mapper.utc(row[1]))

    def stream_read(
        self, actor_id: str, name: str, offset: int, limit: int, *, include_discarded: bool = False
    ) -> ports.StreamPage:
        """``StreamStorage.stream_read`` as one statement (``_READ_SQL``): a waiting reader's look is one
        round trip."""
        offset, limit = max(int(offset), 0), max(int(limit), 0)
        with self._cursor() as cursor:
            cursor.execute(_READ_SQL, [name, offset, limit + 1, actor_id])
            rows = cursor.fetchall()
        if not rows:
            raise errors.ActorNotFoundError(f"no actor with id {actor_id!r}", actor_id=actor_id)
        closed = rows[0][0] in ports.FINISHED_STATES
        found = [r for r in rows if r[1] is not None]
        if found and found[-1][5]:  # the closing row
            closed = True
            found.pop()
        more = len(found) > limit
        found = found[:limit]
        items = [
            ports.StreamItem(
                int(r[1]),
                serde.from_json(mapper.load_json(r[2])),
                r[3],
                bool(r[4]),
                mapper.utc(r[6]),
            )
            for r in found
            if include_discarded or not r[4]
        ]
        next_offset = int(found[-1][1]) + 1 if found else offset
        return ports.StreamPage(items, closed and not more, next_offset)

    def _notify_stream(self, actor_id: str) -> None:
        """NOTIFY the readers of ``actor_id``'s streams (delivered when the transaction commits)."""
        with self._cursor() as cursor:
            cursor.execute("SELECT pg_notify(%s, '')", [stream_channel(actor_id)])

    def watch_stream(self, actor_id: str) -> watches.SendWatch:
        """A ``NotifiedWatch`` on the actor's stream channel (the polling watch inside a transaction, where
        nothing committed elsewhere would be seen, or for an id that is no actor's)."""
        if connections[self.using].in_atomic_block or not actor_id.isalnum():
            return watches.SendWatch()
        return listener_for(self.using).watch(stream_channel(actor_id))
