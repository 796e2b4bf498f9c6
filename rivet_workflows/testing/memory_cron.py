"""The schedule part of ``MemoryStore`` (the ``cron_*`` members of ``ports.Store``), a mixin sharing its RLock.

The host class provides ``_lock`` (an RLock), ``_actors`` (actor_id -> row) and ``now()``, and calls
``_init_schedules()`` from its ``__init__``. Entries of a
destroyed actor vanish with it (they are filtered out and dropped on the next access).
"""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Callable
from datetime import datetime
from typing import Any

from ..engine.model import errors, ports, serde


class MemoryCronMixin:
    """In-memory ``cron_*`` members of ``ports.Store`` (the contract is in ``ports.Store``)."""

    # provided by the host class (MemoryStore)
    _lock: Any
    _actors: dict
    now: Callable[[], datetime]

    def _init_schedules(self) -> None:
        """Create the schedule tables (the host's ``__init__`` calls this)."""
        self._cron_entries: dict[str, ports.CronRecord] = {}
        self._cron_log: dict[str, list[ports.CronFireRecord]] = {}
        self._cron_ids = itertools.count(1)

    def _cron_state(self) -> tuple[dict[str, ports.CronRecord], dict[str, list[ports.CronFireRecord]], Any]:
        live = set(self._actors)
        for cron_id in [k for k, r in self._cron_entries.items() if r.actor_id not in live]:
            del self._cron_entries[cron_id]
            self._cron_log.pop(cron_id, None)
        return self._cron_entries, self._cron_log, self._cron_ids

    @staticmethod
    def _cron_copy(record: ports.CronRecord) -> ports.CronRecord:
        return dataclasses.replace(record, args=serde.from_json(serde.to_json(list(record.args))))

    def cron_upsert(self, record: ports.CronRecord) -> ports.CronRecord:
        """Create or replace ``(actor_id, name)``; the same schedule keeps its ``next_fire_at``."""
        with self._lock:
            if record.actor_id not in self._actors:
                raise errors.ActorNotFoundError(
                    f"no actor with id {record.actor_id!r}", actor_id=record.actor_id
                )
            entries, _, ids = self._cron_state()
            stored = self._cron_copy(record)
            for existing in entries.values():
                if existing.actor_id == record.actor_id and existing.name == record.name:
                    stored.id, stored.created_at = existing.id, existing.created_at
                    stored.last_fired_at = existing.last_fired_at
                    if existing.same_schedule(record):
                        stored.next_fire_at = existing.next_fire_at
                    break
            else:
                stored.id, stored.created_at = str(next(ids)), self.now()
            entries[stored.id] = stored
            return self._cron_copy(stored)

    def cron_list(self, actor_id: str | None = None) -> list[ports.CronRecord]:
        """Entries (of ``actor_id``, or all) in creation order."""
        with self._lock:
            entries, _, _ = self._cron_state()
            rows = [r for r in entries.values() if actor_id is None or r.actor_id == actor_id]
            return [self._cron_copy(r) for r in sorted(rows, key=lambda r: int(r.id))]

    def cron_delete(self, actor_id: str, name: str) -> bool:
        """Delete the entry ``name`` of ``actor_id``; True if it existed."""
        with self._lock:
            entries, log, _ = self._cron_state()
            for cron_id, r in list(entries.items()):
                if r.actor_id == actor_id and r.name == name:
                    del entries[cron_id]
                    log.pop(cron_id, None)
                    return True
            return False

    def cron_due(self, limit: int) -> list[ports.CronRecord]:
        """Entries with ``next_fire_at <= now``, earliest first (at most ``limit``)."""
        with self._lock:
            entries, _, _ = self._cron_state()
            now = self.now()
            due = [r for r in entries.values() if r.next_fire_at is not None and r.next_fire_at <= now]
            due.sort(key=lambda r: (r.next_fire_at, int(r.id)))
            return [self._cron_copy(r) for r in due[: max(limit, 0)]]

    def cron_advance(self, cron_id: str, expected: datetime, next_fire_at: datetime | None) -> bool:
        """Compare-and-set ``next_fire_at`` (``expected`` -> ``next_fire_at``) and stamp ``last_fired_at``."""
        with self._lock:
            entries, _, _ = self._cron_state()
            record = entries.get(cron_id)
            if record is None or record.next_fire_at != expected:
                return False
            record.next_fire_at = next_fire_at
            record.last_fired_at = self.now()
            return True

    def cron_record_fire(self, cron_id: str, fire: ports.CronFireRecord, max_history: int) -> None:
        """Append ``fire`` to the log of ``cron_id``, keeping the newest ``max_history``."""
        with self._lock:
            entries, log, _ = self._cron_state()
            if cron_id not in entries:
                return
            fires = log.setdefault(cron_id, [])
            fires.append(dataclasses.replace(fire, result=serde.from_json(serde.to_json(fire.result))))
            del fires[: max(len(fires) - max(max_history, 1), 0)]

    def cron_fires(self, cron_id: str) -> list[ports.CronFireRecord]:
        """The fire log of ``cron_id``, oldest first."""
        with self._lock:
            _, log, _ = self._cron_state()
            return [dataclasses.replace(f) for f in log.get(cron_id, [])]

    def cron_next_deadline(self) -> datetime | None:
        """The earliest ``next_fire_at`` of any entry, or None."""
        with self._lock:
            entries, _, _ = self._cron_state()
            times = [r.next_fire_at for r in entries.values() if r.next_fire_at is not None]
            return min(times) if times else None
