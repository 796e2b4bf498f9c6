"""The operator audit of ``MemoryStore`` (``Store.record_operator_action``, ``operator_actions``)."""

from __future__ import annotations

import dataclasses
import itertools
import json
import threading
from datetime import datetime
from typing import Any

from ..engine.model import errors, ports


def encode_action(action: ports.OperatorActionRecord) -> ports.OperatorActionRecord:
    """A stored copy of ``action`` (its archive checked to be JSON, as a database column would);
    ``SerializationError`` when it is not."""
    try:
        archived = json.loads(json.dumps(action.archived_entries))
    except (TypeError, ValueError) as exc:
        raise errors.SerializationError(
            f"archived entries of operator action {action.action!r} are not JSON: {exc}",
            where="operator action",
        ) from exc
    return dataclasses.replace(action, archived_entries=archived)


class MemoryAuditMixin:
    """Audit rows of ``MemoryStore``, kept per actor (dropped with it, like the Django foreign key)."""

    _lock: threading.RLock
    _actors: dict[str, Any]
    now: Any  # MemoryStore.now

    def _init_audit(self) -> None:
        self._audit: dict[str, list[ports.OperatorActionRecord]] = {}
        self._audit_ids = itertools.count(1)

    def _write_audit(
        self, actor_id: str, stored: ports.OperatorActionRecord, now: datetime
    ) -> ports.OperatorActionRecord:
        """Append an already encoded row (caller holds the lock); returns a copy with ``at`` and ``id``."""
        row = dataclasses.replace(stored, actor_id=actor_id, at=now, id=str(next(self._audit_ids)))
        self._audit.setdefault(actor_id, []).append(row)
        return dataclasses.replace(row, archived_entries=json.loads(json.dumps(row.archived_entries)))

    def _drop_audit(self, actor_id: str) -> None:
        self._audit.pop(actor_id, None)

    def record_operator_action(self, action: ports.OperatorActionRecord) -> ports.OperatorActionRecord:
        """Write ``action`` on its own (see ``ports.Store``); ``ActorNotFoundError``, ``SerializationError``."""
        stored = encode_action(action)
        with self._lock:
            if action.actor_id not in self._actors:
                raise errors.ActorNotFoundError(
                    f"no actor with id {action.actor_id!r}", actor_id=action.actor_id
                )
            return self._write_audit(action.actor_id, stored, self.now())

    def operator_actions(
        self, actor_id: str, *, limit: int | None = None
    ) -> list[ports.OperatorActionRecord]:
        """The actor's audit rows, newest first, at most ``limit`` (decoded copies)."""
        with self._lock:
            rows = list(reversed(self._audit.get(actor_id, [])))
        if limit is not None:
            rows = rows[:limit]
        return [
            dataclasses.replace(r, archived_entries=json.loads(json.dumps(r.archived_entries))) for r in rows
        ]
