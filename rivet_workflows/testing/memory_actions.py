"""Actions of ``MemoryStore`` (``run_action`` of ``ports.Store``): ``fn(state)`` under the actor's row lock,
waiting out a live step lock.

A mixin: the host class (``MemoryStore``) provides ``_lock``, ``_changed``, ``_actors``, ``now()``,
``_row()`` and ``poll_interval``.
"""

from __future__ import annotations

import time as _time
from collections.abc import Callable
from datetime import datetime
from typing import Any

from ..engine.model import errors, ports, serde
from . import memory_rows as rows


class MemoryActionMixin:
    """``run_action`` of ``ports.Store`` in memory (the contract is in ``ports.Store``)."""

    # provided by the host class (MemoryStore)
    _lock: Any
    _changed: Any
    _actors: dict[str, rows.ActorRow]
    poll_interval: float
    now: Callable[[], datetime]
    _row: Callable[[str], rows.ActorRow]

    def _step_lock_live(self, row: rows.ActorRow, now: datetime) -> bool:
        return row.step_lock_until is not None and row.step_lock_until > now and rows.lease_live(row, now)

    def run_action(
        self, actor_id: str, fn: Callable[[Any], Any], timeout: float, *, make_due: bool = False
    ) -> tuple[Any, Any]:
        """Run ``fn(state)`` under the actor's row lock once no live step lock is held; save and return
        ``(result, state)``. ``make_due=True`` also sets ``wake_at`` to now in the same write (unless it is
        earlier, the workflow is finished or ``fn`` destroyed the actor).

        Waits (re-checking every ``poll_interval`` seconds, or at once when a commit lands) for at most
        ``timeout`` seconds, then raises ``WorkflowInFlightError``. ``ActorNotFoundError`` for an unknown
        actor; ``SerializationError`` (state not saved) if ``fn`` leaves an unserializable state. An
        exception from ``fn`` propagates and the state is not saved; an action that changed neither the
        state nor the wake-up leaves the row (and ``updated_at``) as it was.
        """
        deadline = _time.monotonic() + timeout
        while True:
            with self._lock:
                row = self._row(actor_id)
            row.row_lock.acquire()
            try:
                with self._lock:
                    if self._actors.get(actor_id) is not row:
                        raise errors.ActorNotFoundError(f"no actor with id {actor_id!r}", actor_id=actor_id)
                    busy = self._step_lock_live(row, self.now())
                    state = None if busy else serde.from_json(row.state)
                if not busy:
                    result = fn(state)
                    encoded = serde.to_json(state, where="actor state")
                    with self._lock:
                        if self._actors.get(actor_id) is row:  # not destroyed by the action itself
                            now = self.now()
                            wakes = (
                                make_due
                                and row.workflow_state not in ports.FINISHED_STATES
                                and (row.wake_at is None or row.wake_at > now)
                            )
                            if wakes or not rows.same_json(encoded, row.state):  # else: nothing changed
                                row.state = encoded
                                row.updated_at = now
                            if wakes:
                                row.wake_at = now
                        self._changed.notify_all()
                    return result, serde.from_json(encoded)
            finally:
                row.row_lock.release()
            remaining = deadline - _time.monotonic()
            if remaining <= 0:
                raise errors.WorkflowInFlightError(
                    f"actor {actor_id} is running a step; the action gave up after {timeout} s",
                    actor_id=actor_id,
                    timeout=timeout,
                )
            with self._changed:
                self._changed.wait(min(self.poll_interval, remaining))
