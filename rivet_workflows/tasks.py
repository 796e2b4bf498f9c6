"""Celery tasks: run one actor, and the periodic sweep that wakes due actors and recovers expired leases."""

from __future__ import annotations

import logging
from datetime import UTC, datetime, timedelta
from typing import Any

from celery import shared_task

from .engine import ports
from .engine.slots import ScheduledFireInfo

logger = logging.getLogger("rivet_workflows")

SWEEP_TASK = "rivet_workflows.sweep"
#: Celery's loggers of the lines every task run writes at INFO: beat's "Sending due task", the worker's
#: "Task ... received" and "Task ... succeeded in ...s: <return value>"
_CELERY_TASK_LOGGERS = ("celery.beat", "celery.worker.strategy", "celery.app.trace")


class QuietSweepFilter(logging.Filter):
    """Demote Celery's per-run lines about the sweep to DEBUG (case C64).

    The sweep runs every SWEEP_INTERVAL seconds (1 s), so with ``-l info`` Celery's own lines about it
    (beat sending it, the worker receiving it and its success) filled the log at two or three lines a
    second while nothing happened. The sweep logs one INFO line itself when it queues actors or fires
    schedules (``sweep``); Celery's lines about it are DEBUG records: dropped unless the logger is at DEBUG.
    Failures are untouched (they are logged as errors, not by these lines). Installed on Celery's loggers
    when this module is imported (``install_quiet_sweep_logs``)."""

    def filter(self, record: logging.LogRecord) -> bool:
        """False (drop) or True with the record relabelled DEBUG for a line about the sweep; True otherwise."""
        if record.levelno != logging.INFO or not _about_sweep(record):
            return True
        if not logging.getLogger(record.name).isEnabledFor(logging.DEBUG):
            return False
        record.levelno, record.levelname = logging.DEBUG, logging.getLevelName(logging.DEBUG)
        return True


def _about_sweep(record: logging.LogRecord) -> bool:
    args = record.args
    if isinstance(args, dict):  # the worker's received/succeeded lines: a context dict
        return args.get("name") == SWEEP_TASK
    return isinstance(args, tuple) and SWEEP_TASK in args  # beat: (entry name, task name)


def install_quiet_sweep_logs() -> None:
    """Add ``QuietSweepFilter`` to Celery's task loggers (once; Celery's logging set-up keeps logger filters)."""
    for name in _CELERY_TASK_LOGGERS:
        celery_logger = logging.getLogger(name)
        if not any(isinstance(f, QuietSweepFilter) for f in celery_logger.filters):
            celery_logger.addFilter(QuietSweepFilter())


install_quiet_sweep_logs()


def fire_to_dict(record: ports.CronRecord, fire: ScheduledFireInfo) -> dict:
    """A JSON-safe description of a fire the sweep claimed, the ``fire_schedule`` task's message;
    ``fire_from_dict`` reverses it."""
    return {
        "cron_id": record.id,
        "actor_id": record.actor_id,
        "name": fire.name,
        "scheduled_at": fire.scheduled_at.isoformat(),
        "fired_at": fire.fired_at.isoformat(),
        "kind": fire.kind,
        "missed": fire.missed,
    }


def fire_from_dict(runtime: Any, data: dict) -> tuple[ports.CronRecord, ScheduledFireInfo] | None:
    """The entry and fire of ``fire_to_dict`` output on ``runtime`` (an engine ``Runtime``); None when the
    entry is gone."""
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


@shared_task(name="rivet_workflows.run_actor", ignore_result=True)
def run_actor(actor_id: str, token: int | None = None) -> None:
    """Run ``actor_id`` until it completes, fails or waits (engine.executor.run_actor, DESIGN.md section 5).

    With ``token`` (handed over by the sweep, which claimed the lease) the task takes that lease over
    with ``store.handoff`` (so a redelivered copy of the task does nothing); without it, it claims the
    lease itself and returns at once if another executor holds it. Duplicate or stale hints are
    harmless: a stale token's writes are fenced off.
    """
    from .django_runtime import get_runtime
    from .engine import executor

    runtime = get_runtime()
    if token is not None:
        # Take the sweep's claim over with one conditional UPDATE: a redelivered copy of this task (broker
        # visibility timeout, at-least-once delivery) then finds the token moved on and does nothing.
        token = runtime.store.handoff(actor_id, token, runtime.owner, runtime.settings.lease_seconds)
        if token is None:
            return
    # A live budget lets waits shorter than LIVE_WAIT_THRESHOLD (a short sleep, a race's timeout branch,
    # a retry backoff) finish in memory instead of a round trip through the sweep; longer waits release
    # the worker (waiting costs nothing, DESIGN.md section 5).
    budget = max(runtime.settings.live_wait_threshold, runtime.settings.lease_seconds / 3)
    live_until = datetime.now(UTC) + timedelta(seconds=budget)
    # A queue wait with no message keeps the lease for WARM_WAIT seconds, listening for a send, so a reply
    # that comes right away is taken by this run without a release, a broker hop and a replay. Not when
    # eager: the task then runs inside the sender's call, which would only be held up.
    warm = 0.0 if run_actor.app.conf.task_always_eager else runtime.settings.warm_wait
    summary = executor.run_actor(runtime, actor_id, token=token, live_until=live_until, warm_wait=warm)
    wake_at = summary.wake_at
    if not summary.ran and token is None:
        # Not claimed: another executor holds it, or its flow limits held it back. A rate limit frees a
        # slot at its window's end: queue the run for then (a concurrency slot wakes it on release).
        wake_at = runtime.store.flow_retry_at(actor_id)
    _wake_soon(actor_id, wake_at)


#: a run that ends waiting until at most this many seconds from now queues its next run with a Celery
#: countdown, so a short timer fires on time instead of at the next sweep; later wake-ups are the sweep's
#: (long broker ETAs are fragile: the sweep is the backstop either way)
SHORT_ETA_SECONDS = 5.0


def _wake_soon(actor_id: str, wake_at: datetime | None) -> None:
    """Queue ``run_actor(actor_id)`` to arrive at ``wake_at`` when that is within SHORT_ETA_SECONDS.

    An early or duplicate arrival is harmless (the run replays to the wait and waits or unwinds again; a
    held lease makes it return at once); a lost one is caught by the sweep.
    """
    if wake_at is None or run_actor.app.conf.task_always_eager:  # eager: a countdown would run at once
        return
    delay = (wake_at - datetime.now(UTC)).total_seconds()
    if delay > SHORT_ETA_SECONDS:
        return
    try:
        run_actor.apply_async((actor_id,), countdown=max(delay, 0.0))
    except Exception:  # the broker is away: the sweep wakes the actor
        logger.exception("could not queue the timed run of actor %s; the sweep will", actor_id)


@shared_task(name=SWEEP_TASK, ignore_result=True)
def sweep() -> int:
    """Fire due cron/scheduled actions, then claim due actors (wake_at <= now, lease free or expired) and
    queue a run for each.

    Sent by Celery beat every SWEEP_INTERVAL seconds (``celery -A project worker -B``). Claiming first
    means two overlapping sweeps never queue the same actor twice, and an actor whose executor died is
    taken over once its lease expires. Returns the number of actors queued. Logs one INFO line when it
    queued actors or fired schedules, and nothing above DEBUG otherwise (``QuietSweepFilter``).
    """
    from .conf import rivet_settings
    from .django_runtime import get_runtime
    from .engine import firing

    runtime = get_runtime()

    def queue_fire(record, fire) -> None:
        fire_schedule.delay(fire_to_dict(record, fire))

    fired = 0
    try:  # due cron / scheduled actions: claimed here, run by fire_schedule tasks
        fired = firing.sweep_schedules(runtime, rivet_settings.SWEEP_BATCH, queue_fire)
    except Exception:
        logger.exception("firing due schedules failed; the next sweep retries")
    claimed = runtime.store.claim_due(
        runtime.owner, rivet_settings.SWEEP_BATCH, runtime.settings.lease_seconds
    )
    for actor_id, token in claimed:
        try:
            run_actor.delay(actor_id, token)
        except Exception:  # broker unreachable: give the claim back so the next sweep can retry at once
            logger.exception("could not queue actor %s; releasing its claim", actor_id)
            try:
                runtime.store.commit(actor_id, token, ports.Commit(release=True))
            except Exception:
                logger.exception("could not release the claim of actor %s; its lease will expire", actor_id)
    if claimed or fired:
        shown = ", ".join(actor_id for actor_id, _ in claimed[:5]) + (", ..." if len(claimed) > 5 else "")
        logger.info(
            "sweep queued %d due actor(s)%s and %d schedule fire(s)",
            len(claimed),
            f" ({shown})" if claimed else "",
            fired,
        )
    else:
        logger.debug("sweep: nothing due")
    return len(claimed)


# acks_late=False: acknowledged on receipt, so a worker crash or a broker redelivery can never run a fire
# twice (the slot policy is at most once; CELERY_TASK_ACKS_LATE stays on for the idempotent tasks above).
@shared_task(name="rivet_workflows.fire_schedule", ignore_result=True, acks_late=False)
def fire_schedule(data: dict) -> None:
    """Run one cron/scheduled action fire claimed by the sweep (``fire_to_dict`` data).

    Runs the action as ``action(c, ScheduledFireInfo, *args)`` (serialised with steps) and logs the fire;
    a vanished entry or actor is ignored. The slot was claimed before this task was queued, so a lost
    task loses that one fire (at most once per slot).
    """
    from .django_runtime import get_runtime
    from .engine import firing

    runtime = get_runtime()
    found = fire_from_dict(runtime, data)
    if found is not None:
        firing.run_fire(runtime, *found)
