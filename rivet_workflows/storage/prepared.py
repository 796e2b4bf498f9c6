"""Cursors for PostgresStore's own statements: parameters bound on the server, statements prepared.

Django's psycopg 3 cursors bind parameters on the client (the statement travels as text with the values
quoted in) and never prepare, so PostgreSQL parses and plans every statement anew. The store's hot
statements are few and always the same text (a step's commit, the claim, the history load, a send), and
planning the commit statement costs more than running it (0.55 ms against 0.18 ms measured with
``EXPLAIN (ANALYZE, SUMMARY)``). ``prepared_cursor`` opens a server-binding cursor on the thread's Django
connection whose statements are prepared on their first run and reused from psycopg's per-connection
cache afterwards (at most ``prepared_max``, 100 by default, least recently used first out).

It is still a Django cursor: the connection's execute wrappers run (the idle-connection bookkeeping,
``CaptureQueriesContext``), errors are Django's, and it runs inside the caller's transaction like any
other. Only the store's own statements use it; the application's ORM queries are untouched.

Prepared statements need a session of their own between statements: behind PgBouncer in transaction
pooling mode older than 1.21 (which does not track protocol-level prepared statements) set the
``PREPARED_STATEMENTS`` setting to False; the statements are then bound on the server but not prepared.
"""

from __future__ import annotations

from typing import Any

from django.core.exceptions import ImproperlyConfigured
from django.db import connections

try:  # the server-binding cursor of Django's psycopg 3 backend (absent with psycopg2 or without a driver)
    from django.db.backends.postgresql.base import ServerBindingCursor
    from psycopg.types.datetime import TimestamptzLoader
except (ImportError, ImproperlyConfigured):  # no PostgreSQL driver installed (SQLite projects), psycopg2
    ServerBindingCursor = None


#: the connection's automatic-preparing threshold set where Django left it off: no count reaches it
NEVER_BY_COUNT = 2**31 - 1

if ServerBindingCursor is not None:

    class PreparedCursor(ServerBindingCursor):
        """Django's server-binding cursor whose statements are prepared (``prepare=True``) unless the
        caller says otherwise or ``PreparedCursor.prepare`` is False."""

        prepare = True

        def execute(
            self, query: Any, params: Any = None, *, prepare: bool | None = None, **kwargs: Any
        ) -> Any:
            """psycopg's ``Cursor.execute``, prepared by default (``prepare``: True/False/None as psycopg)."""
            return super().execute(
                query, params, prepare=self.prepare if prepare is None else prepare, **kwargs
            )

else:  # pragma: no cover - no driver, or psycopg2
    PreparedCursor = None


def prepared_cursor(using: str, *, prepare: bool = True) -> Any:
    """A Django cursor (use it as a context manager) on the thread's connection ``using`` that binds
    parameters on the server and, with ``prepare``, prepares its statements (see the module docstring).
    Falls back to the connection's ordinary cursor on a driver without server-side binding (psycopg2)."""
    connection = connections[using]
    if PreparedCursor is None or connection.vendor != "postgresql":
        return connection.cursor()
    connection.ensure_connection()
    connection.validate_thread_sharing()
    driver = connection.connection
    if prepare and driver.prepare_threshold is None:
        # Django turns psycopg's automatic preparing off (prepare_threshold None), which also makes psycopg
        # ignore prepare=True; a threshold no statement reaches prepares only what asks for it (ours):
        # Django's own cursors bind on the client and never prepare whatever the threshold.
        driver.prepare_threshold = NEVER_BY_COUNT
    with connection.wrap_database_errors:
        raw = PreparedCursor(driver)
    raw.prepare = prepare
    # psycopg's own timestamptz loader (its C implementation) instead of Django's, a Python subclass that
    # also converts every value to the current time zone: the store reads instants and makes them UTC
    # itself (mapper.utc), and the session's time zone is UTC under USE_TZ.
    raw.adapters.register_loader("timestamptz", TimestamptzLoader)
    return connection.make_debug_cursor(raw) if connection.queries_logged else connection.make_cursor(raw)
