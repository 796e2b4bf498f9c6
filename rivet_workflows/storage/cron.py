"""Schedule storage of ``DjangoStore`` (the ``cron_*`` members of ``ports.Store``) on CronEntry and CronFire.

A mixin: the host class provides ``using``, ``now()`` (the database clock) and ``_atomic()``. Firing is
claimed by ``cron_advance``, one conditional UPDATE on ``next_fire_at`` whose row count decides, so two
sweeps never fire the same slot. ``cron_due`` uses the ``next_fire_at`` index.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Any

from .. import models
from ..engine.model import errors, ports, serde
from . import mapper


class CronStorage:
    """The ``cron_*`` members of ``ports.Store`` on the ORM (the contract is in ``ports.Store``)."""

    # provided by the host class (DjangoStore): its alias, the database clock, a transaction
    using: str
    now: Callable[[], datetime]
    _atomic: Callable[[], Any]

    def _crons(self) -> Any:
        return models.CronEntry.objects.using(self.using)

    def cron_upsert(self, record: ports.CronRecord) -> ports.CronRecord:
        """Create or replace ``(actor_id, name)``; the same schedule keeps its stored ``next_fire_at``."""
        args = serde.to_json(list(record.args), where=f"cron {record.name!r} args")
        with self._atomic():
            actor = (
                models.Actor.objects.using(self.using)
                .select_for_update()
                .filter(pk=record.actor_id, destroyed=False)
                .first()
            )
            if actor is None:
                raise errors.ActorNotFoundError(
                    f"no actor with id {record.actor_id!r}", actor_id=record.actor_id
                )
            row = self._crons().filter(actor_id=record.actor_id, name=record.name).first()
            if row is None:
                row = models.CronEntry(actor_id=record.actor_id, name=record.name, created_at=self.now())
                keep_next = False
            else:
                keep_next = mapper.cron_from_model(row).same_schedule(record)
            row.interval_seconds = record.interval_seconds
            row.expression = record.expression
            row.timezone = record.timezone
            row.action = record.action
            row.args = args
            row.max_history = record.max_history
            if not keep_next:
                row.next_fire_at = record.next_fire_at
            row.save(using=self.using)
            return mapper.cron_from_model(row)

    def cron_list(self, actor_id: str | None = None) -> list[ports.CronRecord]:
        """Entries (of ``actor_id``, or all) in creation order."""
        rows = self._crons().order_by("id")
        if actor_id is not None:
            rows = rows.filter(actor_id=actor_id)
        return [mapper.cron_from_model(row) for row in rows]

    def cron_delete(self, actor_id: str, name: str) -> bool:
        """Delete the entry ``name`` of ``actor_id`` (and its fire log); True if it existed."""
        deleted, _ = self._crons().filter(actor_id=actor_id, name=name).delete()
        return bool(deleted)

    def cron_due(self, limit: int) -> list[ports.CronRecord]:
        """Entries with ``next_fire_at <= now`` (database clock) of live actors, earliest first."""
        if limit <= 0:
            return []
        now = self.now()
        rows = (
            self._crons()
            .filter(next_fire_at__isnull=False, next_fire_at__lte=now, actor__destroyed=False)
            .order_by("next_fire_at", "id")[:limit]
        )
        return [mapper.cron_from_model(row) for row in rows]

    def cron_advance(self, cron_id: str, expected: datetime, next_fire_at: datetime | None) -> bool:
        """One conditional UPDATE: ``next_fire_at`` ``expected`` -> ``next_fire_at``; True = this caller won."""
        with self._atomic():
            now = self.now()
            return (
                self._crons()
                .filter(pk=mapper.row_id(cron_id), next_fire_at=expected)
                .update(next_fire_at=next_fire_at, last_fired_at=now)
                == 1
            )

    def cron_record_fire(self, cron_id: str, fire: ports.CronFireRecord, max_history: int) -> None:
        """Append a CronFire row and delete the oldest beyond ``max_history``; no-op for a deleted entry."""
        result = serde.to_json(fire.result, where="scheduled action result")
        with self._atomic():
            if not self._crons().filter(pk=mapper.row_id(cron_id)).exists():
                return
            fires = models.CronFire.objects.using(self.using)
            fires.create(
                cron_id=mapper.row_id(cron_id),
                scheduled_at=fire.scheduled_at,
                fired_at=fire.fired_at,
                status=fire.status,
                result=result,
                error=serde.to_json(fire.error) if fire.error is not None else None,
            )
            keep = list(
                fires.filter(cron_id=mapper.row_id(cron_id))
                .order_by("-id")
                .values_list("id", flat=True)[: max(max_history, 1)]
            )
            fires.filter(cron_id=mapper.row_id(cron_id)).exclude(id__in=keep).delete()

    def cron_fires(self, cron_id: str) -> list[ports.CronFireRecord]:
        """The fire log of ``cron_id``, oldest first."""
        rows = models.CronFire.objects.using(self.using).filter(cron_id=mapper.row_id(cron_id)).order_by("id")
        return [mapper.fire_from_model(row) for row in rows]

    def cron_next_deadline(self) -> datetime | None:
        """The earliest ``next_fire_at`` of any entry of a live actor, or None."""
        row = (
            self._crons()
            .filter(next_fire_at__isnull=False, actor__destroyed=False)
            .order_by("next_fire_at")
            .values_list("next_fire_at", flat=True)
            .first()
        )
        return row
