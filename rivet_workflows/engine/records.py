"""Port records kept apart from ``ports`` for size: actors, history entries, queue messages, schedule entries
and their fires, operator audit rows (``ports`` re-exports each: use ``ports.ActorRecord``,
``ports.CronRecord``, ``ports.OperatorActionRecord``)."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any


@dataclass
class ActorRecord:
    """One actor row: identity, state, workflow status, the last commit's and the awaited code version."""

    actor_id: str
    name: str
    key: list
    state: Any = None
    input: Any = None
    output: Any = None
    error: dict | None = None
    workflow_state: str = "pending"  # ports.PENDING
    wake_at: datetime | None = None
    waiting_for: list[str] = field(default_factory=list)
    created_at: datetime | None = None
    updated_at: datetime | None = None
    destroyed: bool = False
    lease_owner: str | None = None
    lease_expires_at: datetime | None = None
    lease_token: int = 0
    code_version: str | None = None
    awaiting_code_version: str | None = None
    trace_context: dict | None = None  # W3C trace context of the creation: its runs join that trace
    replay_generation: int = 0  # bumped by each replay: steps recorded after it get new idempotency keys


@dataclass
class EntryRecord:
    """One history entry with its metadata (ENGINE-SEMANTICS.md section 1).

    ``key`` is the location string (``outer/~3/inner``, ``wait:count``); ``location`` the same path as a
    list of names and iteration ints. ``seq`` orders entries by creation (replay-from-step uses it);
    ``code_version``: the code version of the process that last wrote it (None: unversioned).
    """

    key: str
    location: list
    kind: str
    data: dict = field(default_factory=dict)
    status: str = "pending"  # ports.ENTRY_PENDING
    attempts: int = 0
    error: dict | None = None
    seq: int = 0
    last_attempt_at: datetime | None = None
    created_at: datetime | None = None
    completed_at: datetime | None = None
    rollback_completed_at: datetime | None = None
    rollback_error: dict | None = None
    code_version: str | None = None

    def copy(self) -> EntryRecord:
        return dataclasses.replace(self, location=list(self.location), data=dict(self.data))


@dataclass
class MessageRecord:
    """One queue message."""

    id: str
    actor_id: str
    name: str
    body: Any
    created_at: datetime
    completable: bool = False
    status: str = "pending"  # ports.MESSAGE_PENDING
    response: Any = None
    completed_at: datetime | None = None
    trace_context: dict | None = None  # W3C trace context of the send: the receiving run links to it


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


@dataclass
class OperatorActionRecord:
    """One audit row: an operator action on an actor (DESIGN.md section 12).

    ``action``: ``replay``, ``replay_all``, ``recover``, ``cancel``, ``pause``, ``resume`` (``bulk_*`` when
    it was one of a bulk action); ``who``: the user name, ``"token"`` (the inspector token), ``"python"``
    (the Python API) or ``"command"`` (``manage.py rivet``); ``reason``: what the operator said, or None;
    ``archived_entries``: the history entries the action deleted or reset, as they were, each the tagged
    JSON (``serde.to_json``) of its ``EntryRecord`` fields (``engine.audit.archived_records`` decodes them);
    ``at``: the store-clock instant it was written (the store sets it); ``id``: the store's id (a str).
    """

    actor_id: str
    action: str
    who: str
    reason: str | None = None
    archived_entries: list = field(default_factory=list)
    at: datetime | None = None
    id: str = ""
