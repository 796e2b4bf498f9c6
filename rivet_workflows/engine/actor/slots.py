"""Schedule slot arithmetic: when a cron, interval or one-off entry fires, and what a fire tells its action.

Policy (documented in the manual, "Failures and what happens": docs/explanation/failures.md):

* An entry fires its action as ``action(c, fire, *args)`` where ``fire`` is a ``ScheduledFireInfo``.
* Interval entries (``c.cron.every``) fire every ``interval`` seconds of real time, anchored at the first
  slot; cron entries (``c.cron.set``) fire on the wall-clock slots of ``expression`` in ``timezone``.
* Daylight saving: a wall-clock slot that happens twice (autumn) fires once, at its first occurrence; a
  slot inside the spring gap fires once, shifted by the gap (02:30 -> 03:30), and merges with the slot it
  lands on if there is one.
* Downtime: however many slots passed while no sweep ran, the entry fires ONCE on recovery (for the most
  recent missed slot; ``fire.missed`` says how many slots were skipped) and then keeps its cadence.
* Exactly one sweep fires a slot: the store's ``cron_advance`` compare-and-set decides. The slot is
  claimed before the action runs, so a crash in between loses that fire (at most once per slot).
* The fire log keeps the newest ``max_history`` fires per entry.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from croniter import croniter

from ..model import ports

#: the smallest interval ``c.cron.every`` accepts (seconds)
MIN_INTERVAL_SECONDS = 5.0


@dataclass(frozen=True)
class ScheduledFireInfo:
    """What a scheduled action receives: ``name`` of the entry, ``scheduled_at`` (the slot it serves, aware
    UTC datetime), ``fired_at`` (when the sweep ran it, store clock), ``kind`` (interval | cron | once) and
    ``missed`` (slots skipped by the catch-up policy after downtime; 0 normally)."""

    name: str
    scheduled_at: datetime
    fired_at: datetime
    kind: str = ports.CRON_INTERVAL
    missed: int = 0

    @property
    def lateness(self) -> float:
        """Seconds between the slot and the fire."""
        return (self.fired_at - self.scheduled_at).total_seconds()


def zone(name: str) -> ZoneInfo:
    """The IANA time zone ``name``; ``ValueError`` for an unknown one."""
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError) as exc:
        raise ValueError(f"unknown timezone {name!r}") from exc


def validate_expression(expression: str) -> None:
    """Raise ValueError unless ``expression`` is a valid 5-field cron expression."""
    if not isinstance(expression, str) or not croniter.is_valid(expression):
        raise ValueError(f"invalid cron expression {expression!r}")


def next_cron_slot(expression: str, timezone: str, after: datetime) -> datetime:
    """The first slot of ``expression`` in ``timezone`` strictly after ``after`` (aware), as aware UTC.

    Slots are computed on naive wall-clock times and then placed on the timeline with ``fold=0``: an
    ambiguous (repeated) wall time maps to its first occurrence, a wall time in a spring gap maps to the
    instant the pre-gap offset gives (shifted by the gap). Candidates not after ``after`` are skipped,
    which is what makes both DST cases fire once per slot.
    """
    tz = zone(timezone)
    after = after.astimezone(UTC)
    local = after.astimezone(tz).replace(tzinfo=None)
    it = croniter(expression, local - timedelta(seconds=1))
    for _ in range(10_000):
        naive = it.get_next(datetime)
        instant = naive.replace(tzinfo=tz, fold=0).astimezone(UTC)
        if instant > after:
            return instant
    raise ValueError(f"cron expression {expression!r} has no slot after {after.isoformat()}")


def next_slot(record: ports.CronRecord, after: datetime) -> datetime | None:
    """The entry's first slot strictly after ``after`` (None for a one-off).

    Interval entries keep their phase: slots are ``next_fire_at + k * interval``.
    """
    if record.kind == ports.CRON_ONCE:
        return None
    if record.kind == ports.CRON_INTERVAL:
        interval = float(record.interval_seconds or MIN_INTERVAL_SECONDS)
        base = record.next_fire_at or after
        if base > after:
            return base
        steps = int((after - base).total_seconds() // interval) + 1
        return base + timedelta(seconds=steps * interval)
    return next_cron_slot(record.expression or "", record.timezone, after)


def plan_fire(record: ports.CronRecord, now: datetime) -> tuple[datetime, datetime | None, int]:
    """For a due entry (``next_fire_at <= now``): ``(scheduled_at, next_fire_at, missed)``.

    ``scheduled_at`` is the most recent slot not after ``now`` (one catch-up fire for any downtime),
    ``next_fire_at`` the first slot after ``now`` (None for a one-off), ``missed`` the slots skipped.
    """
    due = record.next_fire_at
    assert due is not None
    if record.kind == ports.CRON_ONCE:
        return due, None, 0
    scheduled, missed = due, 0
    upcoming = next_slot(record, due)
    while upcoming is not None and upcoming <= now:
        if record.kind == ports.CRON_INTERVAL:  # closed form, no loop over thousands of slots
            interval = float(record.interval_seconds or MIN_INTERVAL_SECONDS)
            skipped = int((now - due).total_seconds() // interval)
            scheduled = due + timedelta(seconds=skipped * interval)
            return scheduled, scheduled + timedelta(seconds=interval), skipped
        scheduled, missed = upcoming, missed + 1
        upcoming = next_slot(record, upcoming)
        if missed > 100_000:  # pragma: no cover - a guard against a pathological expression
            break
    return scheduled, upcoming if upcoming is not None else next_slot(record, now), missed
