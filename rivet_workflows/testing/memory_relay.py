"""The relay outbox of ``MemoryStore`` (``Commit.relay``, ``Store.relay_pending``, ``relay_mark_delivered``,
``relay_mark_failed``; DESIGN.md section 21): rows kept in id order, written in the commit's critical
section, outliving their sender (no foreign key, as in the database)."""

from __future__ import annotations

import dataclasses
import itertools
import threading
from datetime import datetime
from typing import Any

from ..engine.model import ports, serde


@dataclasses.dataclass
class RelayRow:
    """A stored relay row: the record (body kept as ``serde.to_json`` output) and its delivery columns."""

    record: ports.RelayRecord
    delivered_at: datetime | None = None
    failed: bool = False


class MemoryRelayMixin:
    """Relay rows of ``MemoryStore``; the host class provides ``_lock`` and ``now()``."""

    _lock: threading.RLock
    now: Any  # MemoryStore.now

    def _init_relay(self) -> None:
        self._relay: dict[int, RelayRow] = {}
        self._relay_ids = itertools.count(1)

    @staticmethod
    def _encode_relay(relay: list[Any]) -> list[tuple[str, str, str, Any, bool]]:
        """``(kind, target, name, encoded body, completable)`` per entry (a send or a ``RelayCreate``),
        before anything is written; ``SerializationError``."""
        return [
            (kind, target, name, serde.to_json(body, where=f"relay {kind} {name!r} body"), completable)
            for kind, target, name, body, completable in map(ports.relay_row_values, relay)
        ]

    def _write_relay(
        self, actor_id: str, encoded: list[tuple[str, str, str, Any, bool]], now: datetime
    ) -> None:
        """Append one row per encoded entry (caller holds the lock, inside the commit)."""
        for kind, target, name, body, completable in encoded:
            row_id = next(self._relay_ids)
            self._relay[row_id] = RelayRow(
                ports.RelayRecord(
                    id=row_id,
                    source_actor_id=actor_id,
                    target_actor_id=target,
                    name=name,
                    body=body,
                    completable=completable,
                    created_at=now,
                    kind=kind,
                )
            )

    def relay_pending(self, limit: int, *, after: int = 0) -> list[ports.RelayRecord]:
        """Up to ``limit`` undelivered, not failed rows past id ``after`` in id order (bodies decoded, copies)."""
        with self._lock:
            rows = [
                row
                for row_id, row in self._relay.items()
                if row_id > after and row.delivered_at is None and not row.failed
            ]
            return [
                dataclasses.replace(row.record, body=serde.from_json(row.record.body)) for row in rows[:limit]
            ]

    def relay_mark_delivered(self, ids: list[int]) -> None:
        """Set ``delivered_at`` on the rows ``ids`` not delivered yet; unknown ids are ignored."""
        with self._lock:
            now = self.now()
            for row_id in ids:
                row = self._relay.get(row_id)
                if row is not None and row.delivered_at is None:
                    row.delivered_at = now

    def relay_mark_failed(self, id: int, error: str, permanent: bool) -> None:
        """``attempts`` + 1 and ``last_error``; ``failed`` too when ``permanent``; an unknown id is ignored."""
        with self._lock:
            row = self._relay.get(id)
            if row is None or row.delivered_at is not None:
                return
            row.record.attempts += 1
            row.record.last_error = str(error)
            if permanent:
                row.failed = True

    def relay_rows(self) -> list[RelayRow]:
        """Every relay row in id order, delivered and failed ones too (for tests; copies)."""
        with self._lock:
            return [
                dataclasses.replace(row, record=dataclasses.replace(row.record))
                for row in self._relay.values()
            ]
