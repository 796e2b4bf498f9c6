"""Records of the storage port that carry no store rule: an actor's flow controls and schedule entries.

``engine.ports`` re-exports every name here (``ports.Flow``, ``ports.CronRecord``...); import them from there.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any


@dataclass(frozen=True)
class Flow:
    """The flow controls of one actor, recorded on its row at creation (DESIGN.md section 12).

    ``concurrency_key``: the group whose members share the limits (the text of ``Concurrency.key(c)``, or
    ``""`` for the whole type); None = the actor has no concurrency or rate limit. ``concurrency_limit``:
    at most this many actors of ``(name, concurrency_key)`` hold a lease at once (None: no limit).
    ``rate_count``/``rate_per``: at most ``rate_count`` claims (run starts) of the group in any window of
    ``rate_per`` seconds (None: no rate limit). ``priority``: among due actors, higher is claimed first.
    ``timeout``: seconds from creation to the workflow's deadline (``ActorRecord.deadline_at``).
    """

    concurrency_key: str | None = None
    concurrency_limit: int | None = None
    rate_count: int | None = None
    rate_per: float | None = None
    priority: int = 0
    timeout: float | None = None


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
