"""The durable streams of ``PostgresStore``: readers wait on LISTEN/NOTIFY (DESIGN.md section 17).

Every write, close or discard NOTIFYs ``stream_channel(actor_id)`` inside its transaction (delivered at
commit); a waiting reader holds a ``NotifiedWatch`` of the process's one listening connection
(``postgres_listener``), taken before it reads, so it holds no database connection while it waits and
never polls.
"""

from __future__ import annotations

from typing import Any

from django.db import connections

from ..engine import watches
from .postgres_listener import listener_for
from .streams import stream_channel


class PostgresStreams:
    """``_notify_stream`` and ``watch_stream`` of ``PostgresStore``."""

    using: str
    _cursor: Any  # PostgresQueues._cursor

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
