"""Per-actor exclusive locks for SQLite, where the database has no row locks (a single writer for all rows).

On PostgreSQL an action holds its actor's row lock (``select_for_update``) while it runs, so steps and
actions on ONE actor are serialised and other actors are untouched. SQLite can only lock the whole
database, so an action running for half a second inside a write transaction would stall every other
actor. There, ``DjangoStore`` runs the action outside the transaction and serialises it with the
executor's commits on the same actor through an advisory file lock per actor (``fcntl.flock``), which
works across the threads and processes of one machine, the only place a SQLite file can be shared.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import time
from collections.abc import Iterator
from pathlib import Path

from ..engine.model import errors


class ActorLocks:
    """Advisory exclusive locks, one file per actor under ``directory`` (created on first use)."""

    def __init__(self, directory: str | os.PathLike[str]) -> None:
        self.directory = Path(directory)

    def _path(self, actor_id: str) -> Path:
        if not actor_id.isalnum():
            raise ValueError(f"not an actor id: {actor_id!r}")
        return self.directory / f"{actor_id}.lock"

    @contextlib.contextmanager
    def hold(self, actor_id: str, timeout: float) -> Iterator[None]:
        """Hold ``actor_id``'s lock for the ``with`` body; WorkflowInFlightError after ``timeout`` seconds.

        Not re-entrant: taking the same actor's lock again in the same thread waits for the timeout.
        """
        self.directory.mkdir(parents=True, exist_ok=True)
        fd = os.open(self._path(actor_id), os.O_CREAT | os.O_RDWR, 0o600)
        try:
            deadline = time.monotonic() + timeout
            delay = 0.001
            while True:
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    break
                except BlockingIOError:
                    if time.monotonic() >= deadline:
                        raise errors.WorkflowInFlightError(
                            f"actor {actor_id} is busy (an action or a commit held it for {timeout}s)",
                            actor_id=actor_id,
                        ) from None
                    time.sleep(delay)
                    delay = min(delay * 2, 0.02)
            try:
                yield
            finally:
                fcntl.flock(fd, fcntl.LOCK_UN)
        finally:
            os.close(fd)

    def discard(self, actor_id: str) -> None:
        """Remove the lock file of a destroyed actor (missing files are fine)."""
        with contextlib.suppress(FileNotFoundError, ValueError):
            self._path(actor_id).unlink()
