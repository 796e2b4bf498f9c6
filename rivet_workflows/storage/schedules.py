"""Schedules-as-data storage of ``DjangoStore`` (the ``schedule_*`` members of ``ports.Store``) on Schedule and ScheduleFire.

A mixin: the host class provides ``using``, ``now()`` (the database clock) and ``_atomic()``. A tick is
claimed by inserting its ScheduleFire row: the unique (schedule, tick) index decides, so of concurrent
sweeps, triggers and backfills on any database exactly one fires a tick. ``schedule_advance`` is one
conditional UPDATE on ``next_fire_at``.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Any

from django.db import IntegrityError

from .. import models
from ..engine.model import errors, ports, records, serde


def _record(row: models.Schedule) -> ports.ScheduleRecord:
    return ports.ScheduleRecord(
        schedule_id=row.schedule_id,
        actor=row.actor,
        key=list(row.key) if row.key is not None else None,
        cron=row.cron or None,
        every=row.every,
        timezone=row.timezone,
        input=serde.from_json(row.input),
        action=row.action or None,
        args=list(serde.from_json(row.args) or []),
        catchup=row.catchup,
        paused=row.paused,
        next_fire_at=row.next_fire_at,
        last_fired_at=row.last_fired_at,
        created_at=row.created_at,
    )


def _fire(row: models.ScheduleFire) -> ports.ScheduleFireRecord:
    return ports.ScheduleFireRecord(
        schedule_id=row.schedule_id,
        tick=row.tick,
        fired_at=row.fired_at,
        how=row.how,
        status=row.status,
        actor_id=row.actor_id,
        error=serde.from_json(row.error),
        missed=row.missed,
    )


class ScheduleStorage:
    """The ``schedule_*`` members of ``ports.Store`` on the ORM (the contract is in ``ports.Store``)."""

    # provided by the host class (DjangoStore): its alias, the database clock, a transaction
    using: str
    now: Callable[[], datetime]
    _atomic: Callable[[], Any]

    def _schedules(self) -> Any:
        return models.Schedule.objects.using(self.using)

    def _schedule_fires(self) -> Any:
        return models.ScheduleFire.objects.using(self.using)

    def schedule_create(self, record: ports.ScheduleRecord) -> ports.ScheduleRecord:
        """Insert ``record``; ScheduleAlreadyExistsError if the id is taken."""
        where = f"schedule {record.schedule_id!r}"
        row = models.Schedule(
            schedule_id=record.schedule_id,
            actor=record.actor,
            key=list(record.key) if record.key is not None else None,
            cron=record.cron,
            every=record.every,
            timezone=record.timezone,
            input=serde.to_json(record.input, where=f"{where} input"),
            action=record.action,
            args=serde.to_json(list(record.args), where=f"{where} args"),
            catchup=record.catchup,
            paused=record.paused,
            next_fire_at=record.next_fire_at,
        )
        try:
            with self._atomic():
                row.created_at = self.now()
                row.save(using=self.using, force_insert=True)
        except IntegrityError:
            raise errors.ScheduleAlreadyExistsError(
                f"a schedule {record.schedule_id!r} already exists", schedule_id=record.schedule_id
            ) from None
        return _record(row)

    def schedule_get(self, schedule_id: str) -> ports.ScheduleRecord | None:
        """The schedule or None."""
        row = self._schedules().filter(pk=schedule_id).first()
        return None if row is None else _record(row)

    def schedule_list(self) -> list[ports.ScheduleRecord]:
        """Every schedule by id."""
        return [_record(row) for row in self._schedules().order_by("schedule_id")]

    def schedule_set_paused(
        self, schedule_id: str, paused: bool, next_fire_at: datetime | None
    ) -> ports.ScheduleRecord | None:
        """Set ``paused`` and ``next_fire_at``; the record or None."""
        with self._atomic():
            if not self._schedules().filter(pk=schedule_id).update(paused=paused, next_fire_at=next_fire_at):
                return None
            return self.schedule_get(schedule_id)

    def schedule_delete(self, schedule_id: str) -> bool:
        """Delete the schedule and (cascade) its fire log."""
        with self._atomic():
            deleted, _ = self._schedules().filter(pk=schedule_id).delete()
        return bool(deleted)

    def schedule_due(self, limit: int) -> list[ports.ScheduleRecord]:
        """Unpaused schedules with ``next_fire_at <= now`` (database clock), earliest first."""
        if limit <= 0:
            return []
        rows = self._schedules().filter(
            paused=False, next_fire_at__isnull=False, next_fire_at__lte=self.now()
        )
        return [_record(row) for row in rows.order_by("next_fire_at", "schedule_id")[:limit]]

    def schedule_advance(self, schedule_id: str, expected: datetime, next_fire_at: datetime | None) -> bool:
        """One conditional UPDATE on an unpaused schedule's ``next_fire_at``; True = this caller won."""
        with self._atomic():
            rows = self._schedules().filter(pk=schedule_id, paused=False, next_fire_at=expected)
            return rows.update(next_fire_at=next_fire_at) == 1

    def schedule_claim_tick(self, fire: ports.ScheduleFireRecord) -> bool:
        """Insert the fire log row (the unique index refuses a tick already there) and stamp
        ``last_fired_at`` in one transaction; a sweep fire also needs the schedule unpaused."""
        try:
            with self._atomic():
                rows = self._schedules().filter(pk=fire.schedule_id)
                if fire.how == records.FIRE_SWEEP:
                    rows = rows.filter(paused=False)
                # the UPDATE first: it locks the schedule row, so a concurrent pause or delete waits for
                # this claim (or this claim sees it) instead of racing it
                if not rows.update(last_fired_at=fire.fired_at):
                    return False
                self._schedule_fires().create(
                    schedule_id=fire.schedule_id,
                    tick=fire.tick,
                    fired_at=fire.fired_at,
                    how=fire.how,
                    status=records.FIRE_CLAIMED,
                    missed=fire.missed,
                )
        except IntegrityError:  # the tick is in the log: another caller fired it
            return False
        return True

    def schedule_fire_done(
        self, schedule_id: str, tick: datetime, status: str, actor_id: str | None, error: dict | None
    ) -> None:
        """Record a claimed fire's outcome."""
        self._schedule_fires().filter(schedule_id=schedule_id, tick=tick).update(
            status=status, actor_id=actor_id, error=serde.to_json(error) if error is not None else None
        )

    def schedule_stale_fires(self, before: datetime, limit: int) -> list[ports.ScheduleFireRecord]:
        """Claimed fires older than ``before`` of schedules without an action, oldest first."""
        if limit <= 0:
            return []
        rows = self._schedule_fires().filter(
            status=records.FIRE_CLAIMED, fired_at__lt=before, schedule__action__isnull=True
        )
        return [_fire(row) for row in rows.order_by("fired_at", "id")[:limit]]

    def schedule_retake_fire(
        self, schedule_id: str, tick: datetime, expected_fired_at: datetime, fired_at: datetime
    ) -> bool:
        """One conditional UPDATE on a claimed fire's ``fired_at``; True = this caller won."""
        with self._atomic():
            rows = self._schedule_fires().filter(
                schedule_id=schedule_id, tick=tick, status=records.FIRE_CLAIMED, fired_at=expected_fired_at
            )
            return rows.update(fired_at=fired_at) == 1

    def schedule_fires(self, schedule_id: str, limit: int | None = None) -> list[ports.ScheduleFireRecord]:
        """The fire log by tick (the newest ``limit``)."""
        rows = self._schedule_fires().filter(schedule_id=schedule_id)
        if limit is None:
            return [_fire(row) for row in rows.order_by("tick")]
        newest = list(rows.order_by("-tick")[: max(limit, 0)])
        return [_fire(row) for row in reversed(newest)]

    def schedule_next_deadline(self) -> datetime | None:
        """The earliest ``next_fire_at`` of an unpaused schedule."""
        return (
            self._schedules()
            .filter(paused=False, next_fire_at__isnull=False)
            .order_by("next_fire_at")
            .values_list("next_fire_at", flat=True)
            .first()
        )
