"""The dispatcher of processes that run work themselves: it records wake-ups for a later ``drain()``."""

from __future__ import annotations

import threading


class LocalDispatcher:
    """``ports.Dispatcher`` that only records wake-ups, for processes that run work with ``drain()`` (and
    ``rivet_workflows.testing.InlineDispatcher``, the same class).

    ``woken`` lists the actor ids in the order they were woken (thread-safe).
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.woken: list[str] = []

    def wake(self, actor_id: str) -> None:
        """Record ``actor_id``; a later ``drain()`` runs it."""
        with self._lock:
            self.woken.append(actor_id)
