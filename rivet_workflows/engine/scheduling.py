"""Cron and one-off scheduled actions: ``c.cron``, ``c.schedule``, slot arithmetic and the sweep's firing.

Policy (documented in the README, "Failures and what happens"):

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

import logging
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from croniter import croniter

from . import errors, ports, serde
from .settings import to_seconds

if TYPE_CHECKING:
    from .actor_context import ActorContext
    from .runtime import Runtime

logger = logging.getLogger("rivet_workflows")

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


# --- slot arithmetic ----------------------------------------------------------------------------------


def _zone(name: str) -> ZoneInfo:
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
    zone = _zone(timezone)
    after = after.astimezone(UTC)
    local = after.astimezone(zone).replace(tzinfo=None)
    it = croniter(expression, local - timedelta(seconds=1))
    for _ in range(10_000):
        naive = it.get_next(datetime)
        instant = naive.replace(tzinfo=zone, fold=0).astimezone(UTC)
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


# --- c.cron and c.schedule ----------------------------------------------------------------------------


def _check_action(c: ActorContext, action: str) -> None:
    c.definition.get_action(action)  # ActionNotFoundError


def _encode_args(c: ActorContext, args: Any, where: str) -> list:
    if isinstance(args, (str, bytes)) or not hasattr(args, "__iter__"):
        raise TypeError(f"{where}: args must be a list or tuple, got {type(args).__name__}")
    return serde.roundtrip(list(args), where=where, max_bytes=c.runtime.settings.max_payload_bytes)


class CronApi:
    """``c.cron``: recurring actions of this actor (stored in the database, fired by the sweep)."""

    def __init__(self, c: ActorContext) -> None:
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
        if seconds is None or seconds < MIN_INTERVAL_SECONDS:
            raise ValueError(f"cron interval must be at least {MIN_INTERVAL_SECONDS:g} s, got {interval!r}")
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
        validate_expression(expression)
        _zone(timezone)
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
        record.next_fire_at = next_cron_slot(expression, timezone, c.runtime.store.now())
        return c.runtime.store.cron_upsert(record)

    def remove(self, name: str) -> bool:
        """Delete the entry ``name``; True if it existed."""
        return self._c.runtime.store.cron_delete(self._c.actor_id, name)

    def list(self) -> list[ports.CronRecord]:
        """This actor's schedule entries (recurring and one-off)."""
        return self._c.runtime.store.cron_list(self._c.actor_id)


class ScheduleApi:
    """``c.schedule``: one-off scheduled actions of this actor."""

    def __init__(self, c: ActorContext) -> None:
        self._c = c

    def after(self, delay: float | timedelta, action: str, *args: Any) -> str:
        """Run ``action(c, ScheduledFireInfo, *args)`` once, ``delay`` (seconds or timedelta) from now.

        Returns the entry name (``schedule:<hex>``). Raises ValueError/TypeError (delay),
        ActionNotFoundError, SerializationError.
        """
        seconds = to_seconds(delay)
        return self.at(self._c.runtime.store.now() + timedelta(seconds=seconds or 0.0), action, *args)

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


# --- firing -------------------------------------------------------------------------------------------


def run_scheduled_action(runtime: Runtime, record: ports.CronRecord, fire: ScheduledFireInfo) -> Any:
    """Run ``record.action`` on its actor as an action (serialised with steps): ``fn(c, fire, *args)``.

    Returns the action's result (a serialised copy). Raises ActorNotFoundError, ActionNotFoundError or what
    the action raised (its state changes are then not saved).
    """
    from .actor_context import ActorContext, call_maybe_async, ensure_vars
    from .client import _adopt_state

    actor = runtime.store.get_actor(record.actor_id)
    definition = runtime.registry.get(actor.name)
    fn = definition.get_action(record.action)
    args = serde.from_json(serde.to_json(list(record.args or [])))
    limit = runtime.settings.max_payload_bytes

    def body(state: Any) -> Any:
        c = ActorContext(runtime, definition, actor.actor_id, actor.key, state)
        ensure_vars(c)
        result = call_maybe_async(fn, c, fire, *args)
        _adopt_state(c, state)
        return serde.to_json(result, where=f"scheduled action {record.action!r} result", max_bytes=limit)

    encoded, _ = runtime.store.run_action(actor.actor_id, body, runtime.settings.action_timeout)
    return serde.from_json(encoded)


def run_fire(runtime: Runtime, record: ports.CronRecord, fire: ScheduledFireInfo) -> bool:
    """Run one claimed fire of ``record`` and log it (status ok or error; an action error is logged, never
    raised). Returns False when the actor is gone."""
    log = ports.CronFireRecord(scheduled_at=fire.scheduled_at, fired_at=fire.fired_at)
    try:
        log.result = run_scheduled_action(runtime, record, fire)
    except errors.ActorNotFoundError:
        return False
    except Exception as exc:  # an action error must not stop the sweep
        logger.exception("scheduled action %s of actor %s raised", record.action, record.actor_id)
        log.status, log.error = "error", serde.error_to_dict(exc)
    try:
        runtime.store.cron_record_fire(record.id, log, record.max_history)
    except Exception:
        logger.exception("could not log the fire of schedule %s", record.name)
    return True


def fire_due(
    runtime: Runtime,
    limit: int = 100,
    runner: Callable[[ports.CronRecord, ScheduledFireInfo], Any] | None = None,
) -> int:
    """Claim and fire every due schedule entry once (the sweep and ``drain()`` call this). Returns the
    number of fires claimed.

    Each due entry is claimed with ``cron_advance`` (compare-and-set on ``next_fire_at``), so concurrent
    sweeps never fire a slot twice. ``runner(record, fire)`` runs the claimed fire; the default runs it here
    (``run_fire``); the Celery sweep passes one that queues a task, so an action waiting for a busy actor's
    step lock never holds up the sweep.
    """
    store = runtime.store
    fired = 0
    for record in store.cron_due(limit):
        now = store.now()
        try:
            scheduled, upcoming, missed = plan_fire(record, now)
        except ValueError:
            logger.exception(
                "schedule %s of actor %s cannot be computed; disabled", record.name, record.actor_id
            )
            store.cron_advance(record.id, record.next_fire_at, None)  # type: ignore[arg-type]
            continue
        if not store.cron_advance(record.id, record.next_fire_at, upcoming):  # type: ignore[arg-type]
            continue  # another sweep fired this slot
        fire = ScheduledFireInfo(record.name, scheduled, now, record.kind, missed)
        if runner is None:
            if run_fire(runtime, record, fire):
                fired += 1
        else:
            runner(record, fire)
            fired += 1
    return fired


def next_deadline(store: Any) -> datetime | None:
    """The earliest of the store's actor deadline (``next_deadline``) and schedule deadline."""
    deadlines = [store.next_deadline(), store.cron_next_deadline()]
    present = [d for d in deadlines if d is not None]
    return min(present) if present else None


def sweep_schedules(
    runtime: Runtime,
    limit: int = 100,
    runner: Callable[[ports.CronRecord, ScheduledFireInfo], Any] | None = None,
) -> int:
    """``fire_due``: the schedule sweep of the periodic sweep and of ``drain()``."""
    return fire_due(runtime, limit, runner)


def fire_to_dict(record: ports.CronRecord, fire: ScheduledFireInfo) -> dict:
    """A JSON-safe description of a claimed fire (for a task message); ``fire_from_dict`` reverses it."""
    return {
        "cron_id": record.id,
        "actor_id": record.actor_id,
        "name": fire.name,
        "scheduled_at": fire.scheduled_at.isoformat(),
        "fired_at": fire.fired_at.isoformat(),
        "kind": fire.kind,
        "missed": fire.missed,
    }


def fire_from_dict(runtime: Runtime, data: dict) -> tuple[ports.CronRecord, ScheduledFireInfo] | None:
    """The entry and fire of ``fire_to_dict`` output (None when the entry is gone)."""
    record = next((r for r in runtime.store.cron_list(data["actor_id"]) if r.id == data["cron_id"]), None)
    if record is None:
        return None
    fire = ScheduledFireInfo(
        data["name"],
        datetime.fromisoformat(data["scheduled_at"]),
        datetime.fromisoformat(data["fired_at"]),
        data["kind"],
        int(data["missed"]),
    )
    return record, fire
