"""The schedules-as-data part of ``MemoryStore`` (the ``schedule_*`` members of ``ports.Store``), sharing its RLock.

The host class provides ``_lock`` (an RLock) and ``now()``, and calls ``_init_data_schedules()`` from its
``__init__``. The fire log is a dict keyed by (schedule, tick), the twin of the database's unique index.
"""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Callable
from datetime import datetime
from typing import Any

from ..engine.model import errors, ports, records


class MemoryScheduleMixin:
    """In-memory ``schedule_*`` members of ``ports.Store`` (the contract is in ``ports.Store``)."""

    # provided by the host class (MemoryStore)
    _lock: Any
    now: Callable[[], datetime]

    def _init_data_schedules(self) -> None:
        """Create the schedule tables (the host's ``__init__`` calls this)."""
        self._schedules: dict[str, ports.ScheduleRecord] = {}
        self._schedule_fires: dict[tuple[str, datetime], ports.ScheduleFireRecord] = {}

    def schedule_create(self, record: ports.ScheduleRecord) -> ports.ScheduleRecord:
        """Insert ``record``; ScheduleAlreadyExistsError if the id is taken."""
        with self._lock:
            if record.schedule_id in self._schedules:
                raise errors.ScheduleAlreadyExistsError(
                    f"a schedule {record.schedule_id!r} already exists", schedule_id=record.schedule_id
                )
            stored = copy.deepcopy(record)
            stored.created_at, stored.last_fired_at = self.now(), None
            self._schedules[record.schedule_id] = stored
            return copy.deepcopy(stored)

    def schedule_get(self, schedule_id: str) -> ports.ScheduleRecord | None:
        """The schedule or None."""
        with self._lock:
            record = self._schedules.get(schedule_id)
            return None if record is None else copy.deepcopy(record)

    def schedule_list(self) -> list[ports.ScheduleRecord]:
        """Every schedule by id."""
        with self._lock:
            return [copy.deepcopy(self._schedules[k]) for k in sorted(self._schedules)]

    def schedule_set_paused(
        self, schedule_id: str, paused: bool, next_fire_at: datetime | None
    ) -> ports.ScheduleRecord | None:
        """Set ``paused`` and ``next_fire_at``; the record or None."""
        with self._lock:
            record = self._schedules.get(schedule_id)
            if record is None:
                return None
            record.paused, record.next_fire_at = paused, next_fire_at
            return copy.deepcopy(record)

    def schedule_delete(self, schedule_id: str) -> bool:
        """Delete the schedule and its fire log."""
        with self._lock:
            if self._schedules.pop(schedule_id, None) is None:
                return False
            for k in [k for k in self._schedule_fires if k[0] == schedule_id]:
                del self._schedule_fires[k]
            return True

    def schedule_due(self, limit: int) -> list[ports.ScheduleRecord]:
        """Unpaused schedules with ``next_fire_at <= now``, earliest first."""
        with self._lock:
            now = self.now()
            due = [
                r
                for r in self._schedules.values()
                if not r.paused and r.next_fire_at is not None and r.next_fire_at <= now
            ]
            due.sort(key=lambda r: (r.next_fire_at, r.schedule_id))
            return [copy.deepcopy(r) for r in due[: max(limit, 0)]]

    def schedule_advance(self, schedule_id: str, expected: datetime, next_fire_at: datetime | None) -> bool:
        """Compare-and-set ``next_fire_at`` of an unpaused schedule."""
        with self._lock:
            record = self._schedules.get(schedule_id)
            if record is None or record.paused or record.next_fire_at != expected:
                return False
            record.next_fire_at = next_fire_at
            return True

    def schedule_claim_tick(self, fire: ports.ScheduleFireRecord) -> bool:
        """Insert the fire log row unless (schedule, tick) is taken or the schedule refuses it."""
        with self._lock:
            record = self._schedules.get(fire.schedule_id)
            if record is None or (fire.how == records.FIRE_SWEEP and record.paused):
                return False
            key = (fire.schedule_id, fire.tick)
            if key in self._schedule_fires:
                return False
            self._schedule_fires[key] = dataclasses.replace(fire, status=records.FIRE_CLAIMED)
            record.last_fired_at = fire.fired_at
            return True

    def schedule_fire_done(
        self, schedule_id: str, tick: datetime, status: str, actor_id: str | None, error: dict | None
    ) -> None:
        """Record a claimed fire's outcome."""
        with self._lock:
            row = self._schedule_fires.get((schedule_id, tick))
            if row is not None:
                row.status, row.actor_id, row.error = status, actor_id, copy.deepcopy(error)

    def schedule_stale_fires(self, before: datetime, limit: int) -> list[ports.ScheduleFireRecord]:
        """Claimed fires older than ``before`` of schedules without an action, oldest first."""
        with self._lock:
            rows = [
                r
                for (schedule_id, _), r in self._schedule_fires.items()
                if r.status == records.FIRE_CLAIMED
                and r.fired_at < before
                and schedule_id in self._schedules
                and self._schedules[schedule_id].action is None
            ]
            rows.sort(key=lambda r: (r.fired_at, r.schedule_id, r.tick))
            return [copy.deepcopy(r) for r in rows[: max(limit, 0)]]

    def schedule_retake_fire(
        self, schedule_id: str, tick: datetime, expected_fired_at: datetime, fired_at: datetime
    ) -> bool:
        """Compare-and-set ``fired_at`` of a claimed fire."""
        with self._lock:
            row = self._schedule_fires.get((schedule_id, tick))
            if row is None or row.status != records.FIRE_CLAIMED or row.fired_at != expected_fired_at:
                return False
            row.fired_at = fired_at
            return True

    def schedule_fires(self, schedule_id: str, limit: int | None = None) -> list[ports.ScheduleFireRecord]:
        """The fire log by tick (the newest ``limit``)."""
        with self._lock:
            rows = sorted(
                (r for k, r in self._schedule_fires.items() if k[0] == schedule_id), key=lambda r: r.tick
            )
            if limit is not None:
                rows = rows[-limit:] if limit > 0 else []
            return [copy.deepcopy(r) for r in rows]

    def schedule_next_deadline(self) -> datetime | None:
        """The earliest ``next_fire_at`` of an unpaused schedule."""
        with self._lock:
            times = [r.next_fire_at for r in self._schedules.values() if not r.paused and r.next_fire_at]
            return min(times) if times else None
