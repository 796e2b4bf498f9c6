"""Firing due schedule entries: the schedule half of the periodic sweep and of ``drain()``.

Each due entry is claimed with ``Store.cron_advance`` before its action runs, so of several sweeps exactly
one fires a slot (at most once per slot: a crash between the claim and the action loses that fire). The
action runs through the one action runner (``engine.actions``), serialised with the actor's steps.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import datetime
from typing import TYPE_CHECKING, Any

from ..model import errors, ports, serde
from . import actions, data_schedules
from .slots import ScheduledFireInfo, plan_fire

if TYPE_CHECKING:
    from ..model.roles import RuntimeRole

logger = logging.getLogger("rivet_workflows")


def run_scheduled_action(runtime: RuntimeRole, record: ports.CronRecord, fire: ScheduledFireInfo) -> Any:
    """Run ``record.action`` on its actor as an action (serialised with steps): ``fn(c, fire, *args)``.

    Returns the action's result (a serialised copy). Raises ActorNotFoundError, ActionNotFoundError or what
    the action raised (its state changes are then not saved).
    """
    actor = runtime.store.get_actor(record.actor_id)
    definition = runtime.registry.get(actor.name)
    fn = definition.get_action(record.action)
    args = serde.from_json(serde.to_json(list(record.args or [])))
    return actions.run_action(
        runtime,
        definition,
        actor.actor_id,
        actor.key,
        fn,
        [fire, *args],
        label=f"scheduled action {record.action!r}",
    )


def run_fire(runtime: RuntimeRole, record: ports.CronRecord, fire: ScheduledFireInfo) -> bool:
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
    runtime: RuntimeRole,
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
    """The earliest of the store's actor deadline (``next_deadline``) and schedule deadlines (``c.cron``
    entries and schedules stored as data)."""
    deadlines = [store.next_deadline(), store.cron_next_deadline(), store.schedule_next_deadline()]
    present = [d for d in deadlines if d is not None]
    return min(present) if present else None


def sweep_schedules(
    runtime: RuntimeRole,
    limit: int = 100,
    runner: Callable[[ports.CronRecord, ScheduledFireInfo], Any] | None = None,
) -> int:
    """The schedule sweep of the periodic sweep and of ``drain()``: ``fire_due`` (``c.cron`` entries, run by
    ``runner``) then ``data_schedules.fire_due`` (schedules stored as data, fired here: a fire is a
    get_or_create, plus the schedule's action if it has one). Returns the number of fires."""
    fired = fire_due(runtime, limit, runner)
    try:
        fired += data_schedules.fire_due(runtime, limit)
    except Exception:
        logger.exception("firing due schedules failed; the next sweep retries")
    return fired
