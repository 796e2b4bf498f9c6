"""``c.cron`` and ``c.schedule``: an actor's recurring and one-off scheduled actions (DESIGN.md section 4).

Entries are stored with the actor (``Store.cron_upsert``) and fired by the sweep (``engine.firing``); the
firing policy (DST, downtime, at most one fire per slot) is in ``engine.slots``.
"""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from ..model import ports, serde
from ..model.settings import to_offset, to_seconds
from . import slots

if TYPE_CHECKING:
    from ..model.roles import ActorContextRole


def _check_action(c: ActorContextRole, action: str) -> None:
    c.definition.get_action(action)  # ActionNotFoundError


def _encode_args(c: ActorContextRole, args: Any, where: str) -> list:
    if isinstance(args, (str, bytes)) or not hasattr(args, "__iter__"):
        raise TypeError(f"{where}: args must be a list or tuple, got {type(args).__name__}")
    return serde.roundtrip(list(args), where=where, max_bytes=c.runtime.settings.max_payload_bytes)


class CronApi:
    """``c.cron``: recurring actions of this actor (stored in the database, fired by the sweep)."""

    def __init__(self, c: ActorContextRole) -> None:
        self._c = c

    def every(
        self,
        *,
        name: str,
        interval: float | timedelta,
        action: str,
        args: tuple | list = (),
        max_history: int = 100,
    ) -> ports.CronRecord:
        """Fire ``action(c, ScheduledFireInfo, *args)`` every ``interval`` (seconds or timedelta, >= 5 s).

        The first fire is one interval from now. Registering the same name again with the same interval
        keeps the schedule (safe in ``on_wake``); another interval restarts it. Raises ValueError (interval
        below 5 s, bad max_history), ActionNotFoundError, SerializationError (args). Returns the entry.
        """
        c = self._c
        seconds = to_seconds(interval)
        if seconds is None or seconds < slots.MIN_INTERVAL_SECONDS:
            raise ValueError(
                f"cron interval must be at least {slots.MIN_INTERVAL_SECONDS:g} s, got {interval!r}"
            )
        _check_action(c, action)
        record = ports.CronRecord(
            actor_id=c.actor_id,
            name=_check_name(name),
            action=action,
            args=_encode_args(c, args, f"cron {name!r} args"),
            interval_seconds=seconds,
            max_history=_check_history(max_history),
        )
        record.next_fire_at = c.runtime.store.now() + timedelta(seconds=seconds)
        return c.runtime.store.cron_upsert(record)

    def set(
        self,
        *,
        name: str,
        expression: str,
        timezone: str = "UTC",
        action: str,
        args: tuple | list = (),
        max_history: int = 100,
    ) -> ports.CronRecord:
        """Fire ``action(c, ScheduledFireInfo, *args)`` on each slot of the 5-field cron ``expression``
        read as wall-clock time in ``timezone`` (IANA name). DST and downtime policy: module docstring.
        Raises ValueError (expression, timezone), ActionNotFoundError, SerializationError. Returns the entry.
        """
        c = self._c
        slots.validate_expression(expression)
        slots.zone(timezone)
        _check_action(c, action)
        record = ports.CronRecord(
            actor_id=c.actor_id,
            name=_check_name(name),
            action=action,
            args=_encode_args(c, args, f"cron {name!r} args"),
            expression=expression,
            timezone=timezone,
            max_history=_check_history(max_history),
        )
        record.next_fire_at = slots.next_cron_slot(expression, timezone, c.runtime.store.now())
        return c.runtime.store.cron_upsert(record)

    def remove(self, name: str) -> bool:
        """Delete the entry ``name``; True if it existed."""
        return self._c.runtime.store.cron_delete(self._c.actor_id, name)

    def list(self) -> list[ports.CronRecord]:
        """This actor's schedule entries (recurring and one-off)."""
        return self._c.runtime.store.cron_list(self._c.actor_id)


class ScheduleApi:
    """``c.schedule``: one-off scheduled actions of this actor."""

    def __init__(self, c: ActorContextRole) -> None:
        self._c = c

    def after(self, delay: float | timedelta, action: str, *args: Any) -> str:
        """Run ``action(c, ScheduledFireInfo, *args)`` once, ``delay`` (seconds or timedelta) from now.

        Zero or a negative ``delay`` is an instant already passed: it fires on the next sweep, as ``at``
        with a past instant does. Returns the entry name (``schedule:<hex>``). Raises ValueError (NaN or
        infinite delay), TypeError (delay), ActionNotFoundError, SerializationError.
        """
        seconds = to_offset(delay)
        return self.at(self._c.runtime.store.now() + timedelta(seconds=seconds), action, *args)

    def at(self, when: datetime, action: str, *args: Any) -> str:
        """Run ``action(c, ScheduledFireInfo, *args)`` once at ``when`` (an aware datetime; a past instant
        fires on the next sweep). Returns the entry name. Raises ValueError for a naive datetime."""
        c = self._c
        if not isinstance(when, datetime) or when.tzinfo is None:
            raise ValueError("schedule.at needs an aware datetime")
        _check_action(c, action)
        name = f"schedule:{uuid.uuid4().hex[:12]}"
        record = ports.CronRecord(
            actor_id=c.actor_id,
            name=name,
            action=action,
            args=_encode_args(c, args, f"scheduled {action!r} args"),
            next_fire_at=when.astimezone(UTC),
            max_history=1,
        )
        c.runtime.store.cron_upsert(record)
        return name


def _check_name(name: str) -> str:
    if not isinstance(name, str) or not name:
        raise ValueError("a cron entry needs a non-empty name")
    return name


def _check_history(max_history: int) -> int:
    if not isinstance(max_history, int) or isinstance(max_history, bool) or max_history < 1:
        raise ValueError(f"max_history must be an int >= 1, got {max_history!r}")
    return max_history
