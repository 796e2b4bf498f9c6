"""The Django implementations of the engine's storage port (``engine.ports.Store``, DESIGN.md section 11).

* ``orm.DjangoStore``: the portable store on the Django ORM (SQLite and any backend);
* ``postgres.PostgresStore``: its PostgreSQL subclass, the hot paths in raw SQL (``postgres_queues``: sends
  and warm waits on LISTEN/NOTIFY);
* ``mapper``: the one row <-> record mapping both use; ``cron``, ``queues``: their schedule and queue
  parts; ``connection``: transactions, retries and the check of idle connections; ``locks``: per-actor
  file locks where the database has no row locks (SQLite).

``store_for(using)`` picks the class for a database alias; the runtime and the tests build stores with it.
"""

from __future__ import annotations

from typing import Any

from django.db import connections

from .mapper import key_text
from .orm import DjangoStore
from .postgres import PostgresStore

__all__ = ["DjangoStore", "PostgresStore", "key_text", "store_for"]


def store_for(using: str = "default", **options: Any) -> DjangoStore:
    """The store for the database alias ``using``: a ``PostgresStore`` on PostgreSQL, else a
    ``DjangoStore`` (the dialect is the class; nothing else switches on the database vendor).

    ``options`` are the constructor's keywords (``poll_interval``, ``lock_timeout``, ``idle_check``:
    seconds; ``prepared_statements``: bool, PostgreSQL only, ignored elsewhere). Raises Django's
    ``ConnectionDoesNotExist`` for an alias that is not in ``settings.DATABASES``.
    """
    if connections[using].vendor == "postgresql":
        return PostgresStore(using, **options)
    options.pop("prepared_statements", None)
    return DjangoStore(using, **options)
