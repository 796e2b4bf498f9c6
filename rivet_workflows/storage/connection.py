"""How the Django stores use a database connection: transactions, deadlock retries, per-actor file locks.

A mixin of ``DjangoStore``: the host class provides ``using`` (the alias), ``poll_interval`` and
``lock_timeout`` (seconds). Every call uses the calling thread's connection (Django keeps one per thread
and alias).
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator
from typing import Any

from django.db import OperationalError, connections, transaction

from .locks import ActorLocks


class Connections:
    """Connection handling of ``DjangoStore`` (see the module docstring)."""

    using: str
    poll_interval: float
    lock_timeout: float
    #: the per-actor file locks (``_actor_locks``); False until decided on first use
    _locks: ActorLocks | None | bool

    def _atomic(self) -> Any:
        return transaction.atomic(using=self.using)

    def _actor_locks(self) -> ActorLocks | None:
        """Per-actor file locks when the database is a file without row locks (SQLite), else None."""
        if self._locks is False:
            connection = connections[self.using]
            name = str(connection.settings_dict.get("NAME") or "")
            file_backed = bool(name) and ":memory:" not in name and "mode=memory" not in name
            if not connection.features.has_select_for_update and file_backed:
                self._locks = ActorLocks(f"{name}.locks")
            else:
                self._locks = None
        return self._locks

    @contextlib.contextmanager
    def _serialised(self, actor_id: str, timeout: float | None = None) -> Iterator[None]:
        """Hold the actor's file lock where the database has no row locks (see ``locks``); else nothing."""
        locks = self._actor_locks()
        if locks is None or not actor_id.isalnum():  # no such actor can exist: the query says so
            yield
            return
        with locks.hold(actor_id, self.lock_timeout if timeout is None else timeout):
            yield

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

    def close_thread_connection(self) -> None:
        """Close this thread's database connections (called by the executor's heartbeat thread on exit)."""
        for conn in connections.all(initialized_only=True):
            conn.close()
