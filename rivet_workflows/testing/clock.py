"""ManualClock: a store clock for tests that moves only when told."""

from __future__ import annotations

import threading
from datetime import UTC, datetime, timedelta


def utcnow() -> datetime:
    """The real current time as an aware UTC datetime (``MemoryStore``'s default clock)."""
    return datetime.now(UTC)


class ManualClock:
    """A clock for ``MemoryStore(clock=...)`` that moves only when told: ``clock.advance(seconds)``.

    Calling it returns the current aware UTC datetime. ``start`` defaults to the real current time.
    """

    def __init__(self, start: datetime | None = None) -> None:
        self._now = start or utcnow()
        self._lock = threading.Lock()

    def __call__(self) -> datetime:
        with self._lock:
            return self._now

    def advance(self, seconds: float | timedelta) -> datetime:
        """Move forward by ``seconds`` (float or timedelta) and return the new time."""
        delta = seconds if isinstance(seconds, timedelta) else timedelta(seconds=seconds)
        with self._lock:
            self._now += delta
            return self._now

    def set(self, when: datetime) -> None:
        """Jump to ``when`` (an aware datetime)."""
        with self._lock:
            self._now = when
