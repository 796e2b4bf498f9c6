"""The relay outbox of ``DjangoStore`` (DESIGN.md section 21) on ``RelayMessage``: rows written in the
transaction of the commit whose step sent to an actor on another shard, read pending in id order by the
relay (``engine.runtime.relay``) and marked delivered or failed.

A mixin: the host class provides ``using``, ``now()`` and ``_atomic()``.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Any

from django.db.models import F

from .. import models
from ..engine.model import ports, serde
from . import mapper


class RelayStorage:
    """``relay_pending``/``relay_mark_delivered``/``relay_mark_failed`` of ``ports.Store`` on the ORM, and
    ``_write_relay``, the commit template's step that writes ``Commit.relay``."""

    # provided by the host class (DjangoStore)
    using: str
    now: Callable[[], datetime]
    _atomic: Callable[[], Any]

    def _relay_rows(self) -> Any:
        return models.RelayMessage.objects.using(self.using)

    def _write_relay(self, actor_id: str, relay: list[Any], now: datetime) -> None:
        """Insert one relay row per ``Commit.relay`` entry (a send, or a ``RelayCreate``: kind ``create``),
        in entry order (ids increase with it), inside the caller's transaction (the commit's).
        ``SerializationError`` for a body that does not encode."""
        if not relay:
            return
        self._relay_rows().bulk_create(
            [
                models.RelayMessage(
                    kind=kind,
                    source_actor_id=actor_id,
                    target_actor_id=target,
                    name=name,
                    body=serde.to_json(body, where=f"body of relay {kind} {name!r}"),
                    completable=completable,
                    created_at=now,
                )
                for kind, target, name, body, completable in map(ports.relay_row_values, relay)
            ]
        )

    def relay_pending(self, limit: int, *, after: int = 0) -> list[ports.RelayRecord]:
        """Up to ``limit`` undelivered, not failed rows past id ``after`` in id order
        (``rivet_relay_pending_idx``)."""
        pending = self._relay_rows().filter(delivered_at__isnull=True, failed=False, id__gt=after)
        rows = pending.order_by("id")[:limit]
        return [
            ports.RelayRecord(
                id=row.id,
                source_actor_id=row.source_actor_id,
                target_actor_id=row.target_actor_id,
                name=row.name,
                body=serde.from_json(row.body),
                completable=row.completable,
                created_at=mapper.utc(row.created_at),
                attempts=row.attempts,
                last_error=row.last_error,
                kind=row.kind,
            )
            for row in rows
        ]

    def relay_mark_delivered(self, ids: list[int]) -> None:
        """Set ``delivered_at`` (the database clock) on the rows ``ids`` not delivered yet (one UPDATE)."""
        if ids:
            self._relay_rows().filter(id__in=list(ids), delivered_at__isnull=True).update(
                delivered_at=self.now()
            )

    def relay_mark_failed(self, id: int, error: str, permanent: bool) -> None:
        """``attempts`` + 1, ``last_error``; ``failed`` too when ``permanent`` (one UPDATE)."""
        changes: dict[str, Any] = {"attempts": F("attempts") + 1, "last_error": str(error)}
        if permanent:
            changes["failed"] = True
        self._relay_rows().filter(id=id, delivered_at__isnull=True).update(**changes)
