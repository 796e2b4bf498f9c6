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

``store_cursor`` is the store's hot path to it: while nothing but the store's own idle-connection
bookkeeping (``connection._note_query``) watches the connection's queries (no other execute wrapper, no
query logging: ``DEBUG``, ``CaptureQueriesContext``), it lends one of the connection's raw prepared cursors
(kept per connection and reused, with their adapter caches) in a thin shell that does what Django's
wrappers do for it: the broken-transaction check, Django's error classes, the note of the connection's
use. Otherwise it returns ``prepared_cursor``'s Django cursor, so every watcher sees every statement.

Prepared statements need a session of their own between statements: behind PgBouncer in transaction
pooling mode older than 1.21 (which does not track protocol-level prepared statements) set the
``PREPARED_STATEMENTS`` setting to False; the statements are then bound on the server but not prepared.
"""

from __future__ import annotations

import time
from typing import Any

from django.core.exceptions import ImproperlyConfigured
from django.db import connections

from .connection import _calls, _note_query

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


#: the attribute of a Django connection wrapper holding its pool: ``(driver connection, [raw cursors])``
_POOL = "_rivet_store_cursors"


class _StoreCursor:
    """A raw ``PreparedCursor`` of the connection's pool with what Django's ``CursorWrapper`` and the
    store's ``_note_query`` wrapper add around a statement (``store_cursor``); a context manager that
    gives the cursor back to the pool on exit (or drops it after an error)."""

    __slots__ = ("_raw", "_db", "_prepare", "_free", "_failed")

    def __init__(self, raw: Any, db: Any, prepare: bool, free: list) -> None:
        self._raw = raw
        self._db = db
        self._prepare = prepare
        self._free = free
        self._failed = False

    def execute(self, sql: Any, params: Any = None) -> Any:
        """Run ``sql`` with ``params`` (server-bound, prepared unless the store says not): Django's
        ``TransactionManagementError`` in a broken atomic block, Django's error classes, the connection
        noted as used (``connection._note_query``). Returns the cursor."""
        db = self._db
        db.validate_no_broken_transaction()
        try:
            with db.wrap_database_errors:
                self._raw.execute(sql, params, prepare=self._prepare)
        except BaseException:
            self._failed = True
            raise
        finally:
            _calls.last[db.alias] = time.monotonic()
        return self

    def fetchone(self) -> Any:
        """The next row (a tuple) or None; Django's error classes."""
        with self._db.wrap_database_errors:
            return self._raw.fetchone()

    def fetchall(self) -> list:
        """The remaining rows (tuples); Django's error classes."""
        with self._db.wrap_database_errors:
            return self._raw.fetchall()

    @property
    def rowcount(self) -> int:
        """Rows the last statement touched (the driver's count)."""
        return self._raw.rowcount

    def __enter__(self) -> _StoreCursor:
        return self

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        if exc_type is None and not self._failed and not self._raw.closed:
            self._free.append(self._raw)
        else:
            try:
                self._raw.close()
            except Exception:  # cleanup after an error: the error is what matters
                pass


def store_cursor(using: str, *, prepare: bool = True, connection: Any = None) -> Any:
    """A cursor for one of the store's own statements on the thread's connection ``using`` (a context
    manager; ``execute``/``fetchone``/``fetchall``/``rowcount``): a pooled raw prepared cursor in a thin
    shell when only the store watches the connection's queries, else ``prepared_cursor`` (see the module
    docstring). Same statements, transaction, errors and bookkeeping either way. ``connection``: the
    Django connection of ``using`` when the caller has it at hand (else it is looked up)."""
    if connection is None:
        connection = connections[using]
    if (
        PreparedCursor is None
        or connection.vendor != "postgresql"
        or connection.queries_logged
        or any(wrapper is not _note_query for wrapper in connection.execute_wrappers)
    ):
        return prepared_cursor(using, prepare=prepare)
    driver = connection.connection
    if driver is None:
        connection.ensure_connection()
        driver = connection.connection
    connection.validate_thread_sharing()
    pool = connection.__dict__.get(_POOL)
    if pool is None or pool[0] is not driver:  # a new connection: the old cursors went with the old one
        pool = (driver, [])
        setattr(connection, _POOL, pool)
    if prepare and driver.prepare_threshold is None:
        driver.prepare_threshold = NEVER_BY_COUNT  # as in prepared_cursor
    free = pool[1]
    if free:
        raw = free.pop()
    else:
        with connection.wrap_database_errors:
            raw = PreparedCursor(driver)
        raw.adapters.register_loader("timestamptz", TimestamptzLoader)  # as in prepared_cursor
    return _StoreCursor(raw, connection, prepare, free)
