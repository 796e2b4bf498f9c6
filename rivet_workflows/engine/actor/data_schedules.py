"""Schedules as data: ``client().schedules`` and the sweep that fires them (DESIGN.md section 20).

A schedule names an actor type, a key (or none: a new actor per tick) and a cadence (``cron`` in a
timezone, or ``every`` seconds). Each fire get_or_creates the actor and, with ``action``, runs
``action(c, fire, *args)`` on it as ``c.cron`` does (``engine.firing``).

Invariants:

* A tick fires at most once, whoever reaches it (sweeps on several workers, ``trigger``, ``backfill``): the
  fire log row ``(schedule, tick)`` is unique and is inserted (``Store.schedule_claim_tick``) before the fire
  runs. A crash between the claim and the fire: a schedule without an action gets the fire finished by a
  later sweep (``refire_stale``: its get_or_create key is fixed by the tick, so no second actor); with an
  action that one fire is lost (the action may have run) and its row stays ``claimed``.
* ``every`` ticks are aligned to multiples of ``every`` seconds since 1970-01-01 UTC (``every=3600`` fires
  on the hour); cron ticks are wall-clock slots of the expression in ``timezone`` (``engine.slots`` rules
  for daylight saving).
* Catch-up after downtime (``catchup``): ``"one"`` fires the most recent missed tick once (``fire.missed``
  counts the ticks skipped), ``"all"`` fires every missed tick in order (at most ``MAX_CATCHUP_TICKS`` per
  sweep pass; the next pass goes on), ``"none"`` fires a tick only when the sweep reaches it before the next
  tick and within ``CATCHUP_GRACE_SECONDS`` (after downtime nothing fires until the next tick).
* A sweep fires the ticks it planned in tick order; two sweeps may serve neighbouring ticks at the same time
  (a backlog and the live tick), so the order of service across workers is not guaranteed. ``backfill``
  fires its ticks in order.
* A paused schedule has no ``next_fire_at``; resuming plans the first tick after now (ticks that passed
  while paused are not fired: ``backfill`` them if wanted).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from ..model import errors, ports, records, serde
from ..model.keys import normalize_key
from ..model.settings import to_seconds
from . import actions, bridge, slots

if TYPE_CHECKING:
    from ..model.roles import RuntimeRole

logger = logging.getLogger("rivet_workflows")

#: the smallest ``every`` (seconds)
MIN_EVERY_SECONDS = 1.0
#: the largest ``every`` (seconds): 100 years, far inside ``datetime``'s range for the tick arithmetic
MAX_EVERY_SECONDS = 100 * 365 * 86400.0
#: catchup="none": a tick reached at most this many seconds late (and before the next tick) still fires
CATCHUP_GRACE_SECONDS = 60.0
#: catchup="all": ticks fired per schedule per sweep pass (a longer backlog goes on at the next pass)
MAX_CATCHUP_TICKS = 1000
#: the most ticks one ``backfill`` call may fire
MAX_BACKFILL_TICKS = 10_000
#: a fire of a schedule without an action still ``claimed`` after this many seconds is run again
STALE_FIRE_SECONDS = 60.0

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_MICRO = timedelta(microseconds=1)


@dataclass(frozen=True)
class ScheduleInfo:
    """What ``client().schedules.get``/``list`` return: the schedule's definition and its fire times.

    ``key`` is the actor key (a list) or None (a new actor ``[schedule_id, tick ISO]`` per fire); ``cron``
    or ``every`` (seconds) is set; ``next_fire_at`` (None while paused) and ``last_fired_at`` are aware UTC
    datetimes (store clock). ``action``/``args``/``input``/``catchup`` repeat what ``create`` was given.
    """

    schedule_id: str
    actor: str
    key: list | None
    cron: str | None
    every: float | None
    timezone: str
    paused: bool
    next_fire_at: datetime | None
    last_fired_at: datetime | None
    action: str | None = None
    args: tuple = ()
    input: Any = None
    catchup: str = records.CATCHUP_ONE
    created_at: datetime | None = None

    @classmethod
    def of(cls, record: ports.ScheduleRecord) -> ScheduleInfo:
        """The ``ScheduleInfo`` of a stored ``ScheduleRecord``."""
        return cls(
            schedule_id=record.schedule_id,
            actor=record.actor,
            key=list(record.key) if record.key is not None else None,
            cron=record.cron,
            every=record.every,
            timezone=record.timezone,
            paused=record.paused,
            next_fire_at=record.next_fire_at,
            last_fired_at=record.last_fired_at,
            action=record.action,
            args=tuple(record.args or ()),
            input=record.input,
            catchup=record.catchup,
            created_at=record.created_at,
        )


# --- ticks ------------------------------------------------------------------------------------------


def next_tick(record: ports.ScheduleRecord, after: datetime) -> datetime:
    """The schedule's first tick strictly after ``after`` (aware), as an aware UTC datetime."""
    if record.every is not None:
        step = max(round(record.every * 1_000_000), 1)
        elapsed = (after.astimezone(UTC) - _EPOCH) // _MICRO
        return _EPOCH + _MICRO * ((elapsed // step + 1) * step)
    return slots.next_cron_slot(record.cron or "", record.timezone, after)


def ticks_between(record: ports.ScheduleRecord, start: datetime, end: datetime) -> Iterator[datetime]:
    """The schedule's ticks in ``[start, end)``, in order."""
    tick = next_tick(record, start - _MICRO)
    while tick < end:
        yield tick
        tick = next_tick(record, tick)


def plan(record: ports.ScheduleRecord, now: datetime) -> tuple[list[datetime], datetime, int]:
    """For a due schedule (``next_fire_at <= now``): ``(ticks to fire, next next_fire_at, missed)``.

    The catch-up policy (module docstring) picks the ticks among those in ``[next_fire_at, now]``;
    ``missed`` counts the passed ticks it does not fire.
    """
    due = record.next_fire_at
    assert due is not None
    if record.catchup == records.CATCHUP_ALL:
        ticks: list[datetime] = []
        tick = due
        while tick <= now and len(ticks) < MAX_CATCHUP_TICKS:
            ticks.append(tick)
            tick = next_tick(record, tick)
        return ticks, tick, 0
    latest, passed = _latest_tick(record, due, now)
    upcoming = next_tick(record, latest)
    if record.catchup == records.CATCHUP_NONE:
        on_time = passed == 1 and (now - latest).total_seconds() <= CATCHUP_GRACE_SECONDS
        return ([latest] if on_time else []), upcoming, passed - (1 if on_time else 0)
    return [latest], upcoming, passed - 1


def _latest_tick(record: ports.ScheduleRecord, due: datetime, now: datetime) -> tuple[datetime, int]:
    """The last tick not after ``now`` (from ``due``, a tick) and the number of ticks in ``[due, now]``."""
    if record.every is not None:  # closed form: no walk over a long downtime
        step = timedelta(microseconds=max(round(record.every * 1_000_000), 1))
        count = (now - due) // step
        return due + step * count, count + 1
    latest, count = due, 1
    tick = next_tick(record, due)
    while tick <= now and count < 1_000_000:
        latest, count = tick, count + 1
        tick = next_tick(record, tick)
    return latest, count


# --- definitions ------------------------------------------------------------------------------------


def build_record(
    runtime: RuntimeRole,
    schedule_id: str,
    *,
    actor: str,
    key: Any = None,
    cron: str | None = None,
    every: float | timedelta | None = None,
    timezone: str = "UTC",
    input: Any = None,
    action: str | None = None,
    args: tuple | list = (),
    catchup: str = "one",
    paused: bool = False,
) -> ports.ScheduleRecord:
    """Check a schedule definition and return its record (``next_fire_at`` unset).

    Raises InvalidScheduleError (id, cron/every, timezone, catchup, args), ActorNotFoundError (``actor`` is
    not a registered type; metadata ``name``), ActionNotFoundError, InvalidKeyError, SerializationError.
    """
    if not isinstance(schedule_id, str) or not schedule_id or len(schedule_id) > 200 or "/" in schedule_id:
        raise errors.InvalidScheduleError(
            "a schedule id must be a non-empty string of at most 200 characters without '/' (it is a URL "
            "path segment: /schedules/{id})",
            field="schedule_id",
        )
    definition = runtime.registry.get(actor)
    if action is not None:
        definition.get_action(action)
    if (cron is None) == (every is None):
        raise errors.InvalidScheduleError("a schedule needs exactly one of cron= and every=", field="cron")
    seconds: float | None = None
    if every is not None:
        try:
            seconds = to_seconds(every)
        except (TypeError, ValueError) as exc:
            raise errors.InvalidScheduleError(str(exc), field="every") from None
        if seconds is None or not MIN_EVERY_SECONDS <= seconds <= MAX_EVERY_SECONDS:
            raise errors.InvalidScheduleError(
                f"every must be between {MIN_EVERY_SECONDS:g} s and {MAX_EVERY_SECONDS:g} s (100 years), "
                f"got {every!r}",
                field="every",
            )
    try:
        slots.zone(timezone)
    except ValueError as exc:
        raise errors.InvalidScheduleError(str(exc), field="timezone") from None
    if every is None:
        try:
            if not isinstance(cron, str) or len(cron.split()) != 5:
                raise ValueError(
                    f"invalid cron expression {cron!r}: it takes 5 fields (minute hour day-of-month month "
                    "day-of-week)"
                )
            slots.validate_expression(cron)
            # an expression can be valid and never fire (Feb 30): croniter finds no next date
            slots.next_cron_slot(cron, timezone, runtime.store.now())
        except (ValueError, ArithmeticError) as exc:
            raise errors.InvalidScheduleError(str(exc), field="cron") from None
    if catchup not in records.CATCHUP_POLICIES:
        raise errors.InvalidScheduleError(
            f"catchup must be one of {list(records.CATCHUP_POLICIES)}, got {catchup!r}", field="catchup"
        )
    if isinstance(args, (str, bytes)) or not hasattr(args, "__iter__"):
        raise errors.InvalidScheduleError(
            f"args must be a list or tuple, got {type(args).__name__}", field="args"
        )
    limit = runtime.settings.max_payload_bytes
    return ports.ScheduleRecord(
        schedule_id=schedule_id,
        actor=actor,
        key=normalize_key(key) if key is not None else None,
        cron=cron if every is None else None,
        every=seconds,
        timezone=timezone,
        input=serde.roundtrip(input, where=f"schedule {schedule_id!r} input", max_bytes=limit),
        action=action,
        args=serde.roundtrip(list(args), where=f"schedule {schedule_id!r} args", max_bytes=limit),
        catchup=catchup,
        paused=bool(paused),
    )


# --- firing -----------------------------------------------------------------------------------------


def fire_key(record: ports.ScheduleRecord, tick: datetime) -> list:
    """The key a fire of ``tick`` starts: the schedule's key, or ``[schedule_id, tick ISO (UTC)]``."""
    if record.key is not None:
        return list(record.key)
    return [record.schedule_id, tick.astimezone(UTC).isoformat()]


def fire(
    runtime: RuntimeRole, record: ports.ScheduleRecord, tick: datetime, how: str, missed: int = 0
) -> ports.ScheduleFireRecord | None:
    """Claim ``tick`` in the fire log and, if this caller won it, fire it; None when the tick was taken.

    The fire get_or_creates ``runtime.client()[record.actor]`` at ``fire_key`` with the schedule's input, then runs
    ``action(c, ScheduledFireInfo, *args)`` when the schedule has an action. Never raises for the fire
    itself: an error is logged and recorded in the fire log (status ``error``). Returns the fire log row.
    """
    store = runtime.store
    log = ports.ScheduleFireRecord(
        schedule_id=record.schedule_id, tick=tick, fired_at=store.now(), how=how, missed=missed
    )
    if not store.schedule_claim_tick(log):
        return None
    return _run_fire(runtime, record, log)


def _run_fire(
    runtime: RuntimeRole, record: ports.ScheduleRecord, log: ports.ScheduleFireRecord
) -> ports.ScheduleFireRecord:
    """Run the claimed fire ``log`` of ``record`` and record its outcome (``fire``'s second half)."""
    store, tick, missed = runtime.store, log.tick, log.missed
    try:
        handle = runtime.client()[record.actor].get_or_create(fire_key(record, tick), record.input)
        log.actor_id = handle.actor_id
        if record.action is not None:
            info = slots.ScheduledFireInfo(
                record.schedule_id,
                tick,
                log.fired_at,
                ports.CRON_INTERVAL if record.every is not None else ports.CRON_EXPRESSION,
                missed,
            )
            args = serde.from_json(serde.to_json(list(record.args or [])))
            fn = handle.definition.get_action(record.action)
            actions.run_action(
                runtime,
                handle.definition,
                handle.actor_id,
                handle.key,
                fn,
                [info, *args],
                label=f"scheduled action {record.action!r}",
            )
        log.status = records.FIRE_OK
    except Exception as exc:  # a fire's error must not stop the sweep
        logger.exception("schedule %s could not fire its tick %s", record.schedule_id, tick.isoformat())
        log.status, log.error = records.FIRE_ERROR, serde.error_to_dict(exc)
    try:
        store.schedule_fire_done(record.schedule_id, tick, log.status, log.actor_id, log.error)
    except Exception:
        logger.exception("could not log the fire of schedule %s", record.schedule_id)
    return log


def fire_due(runtime: RuntimeRole, limit: int = 100) -> int:
    """Fire the due ticks of every due, unpaused schedule (the sweep and ``drain()`` call this).

    ``schedule_advance`` (compare-and-set on ``next_fire_at``) decides which sweep plans a schedule's
    ticks; ``schedule_claim_tick`` makes each tick fire at most once whatever else reaches it. Returns the
    number of fires made.
    """
    store = runtime.store
    fired = 0
    for record in store.schedule_due(limit):
        now = store.now()
        try:
            ticks, upcoming, missed = plan(record, now)
        except ValueError:
            logger.exception("schedule %s cannot be computed; paused", record.schedule_id)
            store.schedule_set_paused(record.schedule_id, True, None)
            continue
        if not store.schedule_advance(record.schedule_id, record.next_fire_at, upcoming):  # type: ignore[arg-type]
            continue  # another sweep planned these ticks
        for tick in ticks:
            if fire(runtime, record, tick, records.FIRE_SWEEP, missed) is not None:
                fired += 1
    return fired + refire_stale(runtime, limit)


def refire_stale(runtime: RuntimeRole, limit: int = 100) -> int:
    """Finish the fires of schedules without an action that stayed ``claimed`` for more than
    ``STALE_FIRE_SECONDS`` (the worker that claimed them died before it started the actor).

    Such a fire is a get_or_create of a key fixed by the tick, so running it again cannot start a second
    actor: it is taken over (``schedule_retake_fire``, a compare-and-set, one taker) and run. A fire with an
    action is never run again (the action may have run): it stays ``claimed``. Returns the fires finished.
    """
    store = runtime.store
    now = store.now()
    done = 0
    for row in store.schedule_stale_fires(now - timedelta(seconds=STALE_FIRE_SECONDS), limit):
        record = store.schedule_get(row.schedule_id)
        if record is None or record.action is not None:
            continue
        if not store.schedule_retake_fire(row.schedule_id, row.tick, row.fired_at, now):
            continue  # another sweep took it over
        row.fired_at = now
        _run_fire(runtime, record, row)
        done += 1
    return done


# --- the client -------------------------------------------------------------------------------------


def _twin(method: Callable[..., Any]) -> Callable[..., Any]:
    """The ``a``-prefixed async twin of a ``SchedulesClient`` method (``bridge.call``)."""

    async def twin(self: Any, *args: Any, **kwargs: Any) -> Any:
        return await bridge.call(method, self, *args, **kwargs)

    twin.__name__ = f"a{method.__name__}"
    twin.__doc__ = f"Async twin of ``{method.__name__}``."
    return twin


class SchedulesClient:
    """``client().schedules``: create and operate schedules stored as data (DESIGN.md section 20).

    Every method takes the schedule id; an unknown id raises ``ScheduleNotFoundError``. Each has an
    ``a``-prefixed async twin (``await schedules.atrigger("nightly")``).
    """

    def __init__(self, runtime: RuntimeRole) -> None:
        self.runtime = runtime

    def _record(self, schedule_id: str) -> ports.ScheduleRecord:
        record = self.runtime.store.schedule_get(schedule_id)
        if record is None:
            raise errors.ScheduleNotFoundError(f"no schedule {schedule_id!r}", schedule_id=schedule_id)
        return record

    def create(
        self,
        schedule_id: str,
        *,
        actor: str,
        key: Any = None,
        cron: str | None = None,
        every: float | timedelta | None = None,
        timezone: str = "UTC",
        input: Any = None,
        action: str | None = None,
        args: tuple | list = (),
        catchup: str = "one",
        paused: bool = False,
    ) -> ScheduleInfo:
        """Create the schedule ``schedule_id`` firing actor type ``actor`` on ``cron`` (a 5-field expression
        read in ``timezone``, an IANA name) or ``every`` seconds (float or timedelta, at least 1 s).

        ``key``: the actor key every fire uses (get_or_create), or None for a new actor
        ``[schedule_id, tick ISO]`` per tick, created with ``input``. ``action``: run
        ``action(c, ScheduledFireInfo, *args)`` on the actor at each fire. ``catchup``: "one" | "all" |
        "none" (module docstring). The first tick is the first after now. Returns its ``ScheduleInfo``.
        Raises InvalidScheduleError, ActorNotFoundError (unknown actor type), ActionNotFoundError,
        InvalidKeyError, SerializationError, ScheduleAlreadyExistsError.
        """
        record = build_record(
            self.runtime,
            schedule_id,
            actor=actor,
            key=key,
            cron=cron,
            every=every,
            timezone=timezone,
            input=input,
            action=action,
            args=args,
            catchup=catchup,
            paused=paused,
        )
        store = self.runtime.store
        record.next_fire_at = None if record.paused else next_tick(record, store.now())
        return ScheduleInfo.of(store.schedule_create(record))

    def get(self, schedule_id: str) -> ScheduleInfo:
        """The schedule ``schedule_id``; ScheduleNotFoundError."""
        return ScheduleInfo.of(self._record(schedule_id))

    def list(self) -> list[ScheduleInfo]:
        """Every schedule, ordered by id."""
        return [ScheduleInfo.of(r) for r in self.runtime.store.schedule_list()]

    def pause(self, schedule_id: str) -> ScheduleInfo:
        """Stop the sweep firing ``schedule_id`` (``trigger`` and ``backfill`` still fire). Idempotent."""
        self._record(schedule_id)
        record = self.runtime.store.schedule_set_paused(schedule_id, True, None)
        return ScheduleInfo.of(record or self._record(schedule_id))

    def resume(self, schedule_id: str) -> ScheduleInfo:
        """Fire ``schedule_id`` again from its first tick after now (ticks passed while paused are not
        fired). A running schedule keeps its ``next_fire_at``."""
        current = self._record(schedule_id)
        if not current.paused:
            return ScheduleInfo.of(current)
        store = self.runtime.store
        record = store.schedule_set_paused(schedule_id, False, next_tick(current, store.now()))
        return ScheduleInfo.of(record or self._record(schedule_id))

    def trigger(self, schedule_id: str) -> ports.ScheduleFireRecord:
        """Fire ``schedule_id`` once now (also when paused), for the tick "now" (store clock); the fire log
        row is returned (``status`` ok | error, ``actor_id``, ``error``)."""
        record = self._record(schedule_id)
        store = self.runtime.store
        for _ in range(3):  # the tick is unique: a trigger in the same microsecond takes the next one
            done = fire(self.runtime, record, store.now(), records.FIRE_TRIGGER)
            if done is not None:
                return done
        raise errors.StoreRejectedError(f"could not claim a trigger tick of schedule {schedule_id!r}")

    def backfill(self, schedule_id: str, start: datetime, end: datetime) -> list[ports.ScheduleFireRecord]:
        """Fire each tick of ``schedule_id`` in ``[start, end)`` (aware datetimes) once, in tick order; a tick
        already in the fire log (fired by the sweep, a trigger or another backfill) is skipped. Returns the
        fires made. Raises InvalidScheduleError (naive datetimes, ``end < start``, more than
        ``MAX_BACKFILL_TICKS`` ticks)."""
        record = self._record(schedule_id)
        for name, value in (("start", start), ("end", end)):
            if not isinstance(value, datetime) or value.tzinfo is None:
                raise errors.InvalidScheduleError(f"backfill {name} must be an aware datetime", field=name)
            try:
                value.astimezone(UTC) - _MICRO
            except OverflowError:
                raise errors.InvalidScheduleError(f"backfill {name} is out of range", field=name) from None
        if end < start:
            raise errors.InvalidScheduleError("backfill end is before its start", field="end")
        # a backfill fires missed ticks: the ticks to come are the sweep's (end capped at now)
        end = min(end, self.runtime.store.now())
        ticks = []
        for tick in ticks_between(record, start, end):
            ticks.append(tick)
            if len(ticks) > MAX_BACKFILL_TICKS:
                raise errors.InvalidScheduleError(
                    f"a backfill fires at most {MAX_BACKFILL_TICKS} ticks", field="end"
                )
        fires = []
        for tick in ticks:
            done = fire(self.runtime, record, tick, records.FIRE_BACKFILL)
            if done is not None:
                fires.append(done)
        return fires

    def delete(self, schedule_id: str) -> None:
        """Delete ``schedule_id`` and its fire log (the actors it started stay); ScheduleNotFoundError."""
        if not self.runtime.store.schedule_delete(schedule_id):
            raise errors.ScheduleNotFoundError(f"no schedule {schedule_id!r}", schedule_id=schedule_id)

    def fires(self, schedule_id: str, limit: int | None = None) -> list[ports.ScheduleFireRecord]:
        """The fire log of ``schedule_id`` in tick order (the newest ``limit``); ScheduleNotFoundError."""
        self._record(schedule_id)
        return self.runtime.store.schedule_fires(schedule_id, limit)

    acreate = _twin(create)
    aget = _twin(get)
    alist = _twin(list)
    apause = _twin(pause)
    aresume = _twin(resume)
    atrigger = _twin(trigger)
    abackfill = _twin(backfill)
    adelete = _twin(delete)
    afires = _twin(fires)
