"""The schedule records of the storage port (``ports`` re-exports them): cron entries and their fire log."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

# --- cron and one-off schedules (DESIGN.md section 4) ------------------------------------------

#: kinds of a schedule entry
CRON_INTERVAL = "interval"  # every interval_seconds
CRON_EXPRESSION = "cron"  # a cron expression in a timezone
CRON_ONCE = "once"  # a one-off scheduled action (c.schedule.after/at); next_fire_at None once fired


@dataclass
class CronRecord:
    """One schedule entry of an actor: fire ``action(c, ScheduledFireInfo, *args)`` at ``next_fire_at``.

    ``kind`` is derived: ``interval_seconds`` set -> interval, ``expression`` set -> cron, neither -> once.
    ``id`` is the store's id (a str); ``next_fire_at`` and ``last_fired_at`` are store-clock instants.
    """

    actor_id: str
    name: str
    action: str
    args: list = field(default_factory=list)
    interval_seconds: float | None = None
    expression: str | None = None
    timezone: str = "UTC"
    next_fire_at: datetime | None = None
    last_fired_at: datetime | None = None
    max_history: int = 100
    created_at: datetime | None = None
    id: str = ""

    @property
    def kind(self) -> str:
        if self.interval_seconds is not None:
            return CRON_INTERVAL
        if self.expression:
            return CRON_EXPRESSION
        return CRON_ONCE

    def same_schedule(self, other: CronRecord) -> bool:
        """True when ``other`` fires on the same schedule (interval, expression and timezone)."""
        return (self.interval_seconds, self.expression, self.timezone) == (
            other.interval_seconds,
            other.expression,
            other.timezone,
        )


@dataclass
class CronFireRecord:
    """One firing of a schedule entry: the slot it served, when it ran, ``status`` ok|error, result/error."""

    scheduled_at: datetime
    fired_at: datetime
    status: str = "ok"
    result: Any = None
    error: dict | None = None
