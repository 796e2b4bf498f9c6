"""Celery tasks: run one actor, and the periodic sweep that wakes due actors and recovers expired leases."""

from __future__ import annotations

import heapq
import logging
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime, timedelta
from typing import Any

from celery import shared_task, signals

from ..engine.actor.slots import ScheduledFireInfo
from ..engine.model import ports

logger = logging.getLogger("rivet_workflows")

SWEEP_TASK = "rivet_workflows.sweep"
#: the relay of messages to actors on another shard (DESIGN.md section 21)
RELAY_TASK = "rivet_workflows.relay"
#: Celery's loggers of the lines every task run writes at INFO: beat's "Sending due task", the worker's
#: "Task ... received" and "Task ... succeeded in ...s: <return value>"
_CELERY_TASK_LOGGERS = ("celery.beat", "celery.worker.strategy", "celery.app.trace")


class QuietSweepFilter(logging.Filter):
    """Demote Celery's per-run lines about the sweep to DEBUG (manual: Run workers).

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


@signals.worker_init.connect
def apply_worker_concurrency(sender: Any = None, **kwargs: Any) -> None:
    """``WORKER_CONCURRENCY`` > 1: the starting Celery worker runs a thread pool of that many threads
    (``--pool threads --concurrency N``, whatever its command line chose): that many actors at once, each
    on its own thread, database connection and lease, a step body of one never waiting for another's.
    1 (the default) leaves the worker's pool as configured. Connected to Celery's ``worker_init``."""
    from ..conf import rivet_settings

    concurrency = rivet_settings.WORKER_CONCURRENCY
    if sender is None or concurrency <= 1:
        return
    sender.pool_cls = "threads"
    sender.concurrency = concurrency
    logger.info(
        "WORKER_CONCURRENCY=%d: this worker runs %d actors at once (thread pool)", concurrency, concurrency
    )


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
    from ..django_runtime import get_runtime

    if token is None and _local_runs is not None and _local_runs.covers(actor_id):
        # A run of this actor started by this process (the wake listener heard the same send) has not
        # finished: it claims after the send committed, or holds the lease and its release finds the
        # message and runs again. Claiming here too would only find the lease taken (two transactions, and
        # without CELERY_DB_REUSE_MAX a new connection: Celery's Django fix-up closes it around every task).
        return
    runtime = get_runtime()
    if token is not None:
        # Take the sweep's claim over with one conditional UPDATE: a redelivered copy of this task (broker
        # visibility timeout, at-least-once delivery) then finds the token moved on and does nothing.
        token = runtime.store.handoff(actor_id, token, runtime.owner, runtime.settings.lease_seconds)
        if token is None:
            return
    _run(runtime, actor_id, token)


def _run(runtime: Any, actor_id: str, token: int | None, ran: Any = None) -> None:
    """One worker run of ``actor_id`` (``token``: a lease already held, or None to claim it), then keep
    its wake-up when it is near (``LocalRuns``). ``ran`` (no arguments) is called as soon as the run
    returned (it released the lease, or did not get it)."""
    from ..engine.runtime import executor

    # A live budget lets waits shorter than LIVE_WAIT_THRESHOLD (a short sleep, a race's timeout branch,
    # a retry backoff) finish in memory instead of a round trip through the sweep; longer waits release
    # the worker (waiting costs nothing, DESIGN.md section 5).
    budget = max(runtime.settings.live_wait_threshold, runtime.settings.lease_seconds / 3)
    live_until = datetime.now(UTC) + timedelta(seconds=budget)
    # A queue wait with no message keeps the lease for WARM_WAIT seconds, listening for a send, so a reply
    # that comes right away is taken by this run without a release, a broker hop and a replay. Not when
    # eager: the task then runs inside the sender's call, which would only be held up.
    warm = 0.0 if run_actor.app.conf.task_always_eager else runtime.settings.warm_wait
    try:
        summary = executor.run_actor(runtime, actor_id, token=token, live_until=live_until, warm_wait=warm)
    finally:
        if ran is not None:
            ran()
    if summary.left_for_other_version:
        # Left for a worker of another code version (a rolling deploy): this process must not keep the
        # wake-up, or it would always be the one to run it again; the sweep hands it to any worker.
        return
    wake_at = summary.wake_at
    if not summary.ran and token is None:
        # Not claimed: another executor holds it, or its flow limits held it back. A rate limit frees a
        # slot at its window's end: queue the run for then (a concurrency slot wakes it on release).
        wake_at = runtime.store.flow_retry_at(actor_id)
    _wake_soon(actor_id, wake_at)


#: a run that ends waiting until at most this many seconds from now keeps the wake-up in this worker
#: process (``LocalRuns``), which runs the actor at that instant, so a short timer fires on time
#: instead of at the next sweep; later wake-ups are the sweep's (it is the safety net for these too)
SHORT_ETA_SECONDS = 5.0

#: ``LocalRuns`` starts a timed run this many seconds before the deadline: the claim, the history load
#: and the replay happen before it, and the run waits out the rest in memory (under
#: LIVE_WAIT_THRESHOLD), so the step after the timer starts at the deadline; the lease it holds
#: meanwhile keeps the sweep from handing the actor to another worker
TIMER_LEAD_SECONDS = 0.05


class LocalRuns:
    """Runs a worker process starts itself, beside its Celery pool: the near wake-ups of the actors it
    released (``add``), and released actors a send made due while a runner thread is idle (``run_now``,
    from the ``listen_for_wakes`` thread).

    ``add(actor_id, wake_at)`` keeps the deadline; a timer thread waits for the earliest one and, when
    it is due, runs the actor on one of ``threads`` runner threads through the normal claim path
    (``executor.run_actor`` claims the lease, fenced as every run is). If another executor got there
    first (the sweep claimed it, a message woke it elsewhere) the claim fails and nothing happens; if
    the process dies, the sweep finds the actor due. A timer fired early or twice is harmless (the run
    replays to the wait and waits again). Runner threads are not the Celery pool's: a due timer does
    not queue behind the broker's backlog of new work. One instance per process (``local_runs()``).

    ``covers(actor_id)`` says whether a run it submitted for the actor has not returned yet: the
    broker's hint for the send the listener heard then does nothing (``run_actor``).
    """

    def __init__(self, threads: int = 1) -> None:
        self._threads = max(1, threads)
        self._lock = threading.Condition()
        self._heap: list[tuple[float, str]] = []
        self._due: dict[str, float] = {}  # actor id -> the deadline kept for it (newest add wins)
        self._pool: ThreadPoolExecutor | None = None
        self._thread: threading.Thread | None = None
        self._busy = 0  # runs submitted and not finished
        self._running: dict[str, int] = {}  # actor id -> runs submitted whose executor run has not returned

    def add(self, actor_id: str, wake_at: datetime) -> None:
        """Keep ``actor_id``'s wake-up at ``wake_at`` (an aware datetime; the run starts
        ``TIMER_LEAD_SECONDS`` before it); replaces an earlier one."""
        at = wake_at.timestamp() - TIMER_LEAD_SECONDS
        with self._lock:
            if self._due.get(actor_id) == at:
                return
            self._due[actor_id] = at
            heapq.heappush(self._heap, (at, actor_id))
            self._start()
            self._lock.notify()

    def run_now(self, actor_id: str, token: int | None = None) -> bool:
        """Run ``actor_id`` on a runner thread if one is idle: claiming it, or with ``token`` on the lease
        this process's owner holds already (the sweep's takeover); False when all are busy (the caller's
        message through the broker brings the actor to a worker instead)."""
        with self._lock:
            if self._busy >= self._threads:
                return False
            self._start()
            self._busy += 1
            self._running[actor_id] = self._running.get(actor_id, 0) + 1
        assert self._pool is not None
        self._pool.submit(self._fire, actor_id, token)
        return True

    def covers(self, actor_id: str) -> bool:
        """True while a run of ``actor_id`` submitted here has not returned from its executor run: it
        claims the lease later (and so sees every message committed before now), or holds it (its release
        finds such a message and runs the actor again), or found it held by another executor, whose release
        does the same. A send committed after that release wakes the actor again by itself (the listener
        hears it; the sweep finds it due)."""
        with self._lock:
            return actor_id in self._running

    def _ran(self, actor_id: str) -> None:
        with self._lock:
            left = self._running.pop(actor_id, 1) - 1
            if left > 0:
                self._running[actor_id] = left

    def _start(self) -> None:  # under self._lock
        if self._thread is None:
            self._pool = ThreadPoolExecutor(self._threads, thread_name_prefix="rivet-local-run")
            self._thread = threading.Thread(target=self._loop, name="rivet-timers", daemon=True)
            self._thread.start()

    def pending(self) -> int:
        """How many wake-ups this process keeps."""
        with self._lock:
            return len(self._due)

    def _loop(self) -> None:
        while True:
            with self._lock:
                while not self._heap or self._heap[0][0] > time.time():
                    self._lock.wait(None if not self._heap else self._heap[0][0] - time.time())
                at, actor_id = heapq.heappop(self._heap)
                if self._due.get(actor_id) != at:  # superseded by a later add
                    continue
                del self._due[actor_id]
                self._busy += 1
                self._running[actor_id] = self._running.get(actor_id, 0) + 1
            assert self._pool is not None
            self._pool.submit(self._fire, actor_id)

    def _fire(self, actor_id: str, token: int | None = None) -> None:
        from django.db import close_old_connections

        from ..django_runtime import get_runtime

        # As Celery's Django fixup does around a task: drop a connection past CONN_MAX_AGE or broken.
        done = False

        def ran() -> None:
            nonlocal done
            if not done:
                done = True
                self._ran(actor_id)

        close_old_connections()
        try:
            _run(get_runtime(), actor_id, token, ran)
        except Exception:  # the sweep is the safety net: it finds the actor due
            logger.exception("local run of actor %s failed; the sweep will retry it", actor_id)
        finally:
            ran()  # when the run never started (get_runtime failed)
            close_old_connections()
            with self._lock:
                self._busy -= 1


#: fewest runner threads of ``LocalRuns``: timed runs wait out their last TIMER_LEAD_SECONDS on them
LOCAL_RUN_THREADS = 4

_local_runs: LocalRuns | None = None
_local_runs_lock = threading.Lock()


def local_runs() -> LocalRuns:
    """This process's ``LocalRuns`` (created on first use, with ``WORKER_CONCURRENCY`` runner threads,
    at least ``LOCAL_RUN_THREADS``)."""
    global _local_runs
    with _local_runs_lock:
        if _local_runs is None:
            from ..conf import rivet_settings

            _local_runs = LocalRuns(threads=max(LOCAL_RUN_THREADS, rivet_settings.WORKER_CONCURRENCY))
        return _local_runs


#: seconds one ``wait_for_wakes`` call of the listener blocks (it then checks its connection and listens on)
WAKES_POLL_SECONDS = 5.0


def listen_for_wakes(stop: threading.Event | None = None) -> None:
    """The loop of a worker's wake listener thread: hear sends that make a released actor due
    (``Store.wait_for_wakes``: PostgreSQL LISTEN/NOTIFY) and start each on an idle ``LocalRuns`` thread,
    without the broker's round trip. The hint still goes through the broker; whoever claims the actor
    first runs it, the other finds the lease taken. Returns when ``stop`` is set (checked between waits)
    or when the store has no notifications."""
    from ..django_runtime import get_runtime

    runs = local_runs()
    while stop is None or not stop.is_set():
        store = get_runtime().store
        if not store.notifies_wakes:
            return
        try:
            woken = store.wait_for_wakes(WAKES_POLL_SECONDS)
        except Exception:  # the database is away: the broker's hints still work; listen again later
            logger.exception("listening for wakes failed; retrying in 1 s")
            time.sleep(1.0)
            continue
        for actor_id in woken:
            runs.run_now(actor_id)
    get_runtime().store.close_thread_connection()


@signals.worker_ready.connect
def start_wake_listener(sender: Any = None, **kwargs: Any) -> None:
    """Start the wake listener thread (``listen_for_wakes``) in a worker whose tasks run in its own
    process (solo or threads pool; a prefork worker's tasks run in its children). Connected to Celery's
    ``worker_ready``."""
    pool = getattr(getattr(sender, "controller", None), "pool_cls", None)
    name = f"{getattr(pool, '__module__', '')}.{getattr(pool, '__name__', '')}".lower()
    if "solo" not in name and "thread" not in name:
        return
    threading.Thread(target=listen_for_wakes, name="rivet-wakes", daemon=True).start()


def _wake_soon(actor_id: str, wake_at: datetime | None) -> None:
    """Keep ``actor_id``'s wake-up in this process (``LocalRuns``) when ``wake_at`` is within
    SHORT_ETA_SECONDS; the sweep wakes it otherwise (and when this process dies first)."""
    if wake_at is None or run_actor.app.conf.task_always_eager:  # eager: no worker process to keep it
        return
    if (wake_at - datetime.now(UTC)).total_seconds() > SHORT_ETA_SECONDS:
        return
    local_runs().add(actor_id, wake_at)


def queued_runs() -> int | None:
    """How many messages wait in the broker queue ``run_actor`` is routed to (not yet taken by a worker;
    prefetched ones are not counted), or None when it cannot be told (eager mode, a broker without queue
    sizes, the broker away). One passive ``queue_declare`` on a pooled connection."""
    app = run_actor.app
    if app.conf.task_always_eager:
        return None
    try:
        queue = app.amqp.router.route({}, run_actor.name)["queue"]
        with app.pool.acquire(block=True, timeout=1.0) as connection:
            try:
                return int(
                    connection.default_channel.queue_declare(queue=queue.name, passive=True).message_count
                )
            except connection.channel_errors:  # a virtual transport drops an empty queue: nothing waits
                return 0
    except Exception:  # the broker cannot tell: no backpressure, the sweep claims as before
        logger.debug("could not read the broker's queue size", exc_info=True)
        return None


@shared_task(name=SWEEP_TASK, ignore_result=True)
def sweep() -> int:
    """Retry the runs suspended on another code version (``retrying.retry_on_new_code``; a deploy with a
    fix), fire due cron/scheduled actions, run a relay pass when sharded (``relay``: to other shards), take
    over actors whose lease expired, then claim due actors (wake_at <= now, lease free) and queue a run
    for each.

    Sent by Celery beat every SWEEP_INTERVAL seconds (``celery -A project worker -B``). Claiming first
    means two overlapping sweeps never queue the same actor twice. An actor whose executor died (or
    stalled) is taken over once its lease expires, every sweep, at most SWEEP_BATCH at a time whatever
    the broker's backlog: such a takeover runs on a runner thread of the sweeping worker
    (``LocalRuns.run_now``), not behind the queued new work, when one is idle (docs/howto/production.md:
    a takeover within LEASE_SECONDS + a few sweep intervals). New work is held back by the backlog: the
    sweep claims at most SWEEP_BATCH minus the run messages already waiting in the broker
    (``queued_runs``) minus its takeovers. Returns the number of actors claimed (both kinds). Logs one
    INFO line when it took over or queued actors or fired schedules, and nothing above DEBUG otherwise
    (``QuietSweepFilter``). Under ``SHARDS`` a shard that cannot be reached is skipped for the pass (one
    WARNING naming it, ``ShardedStore.new_pass``); the other shards' part of the sweep goes on.
    """
    from ..conf import rivet_settings
    from ..django_runtime import get_runtime
    from ..engine.actor import firing
    from ..engine.operate import retrying

    runtime = get_runtime()
    new_pass = getattr(runtime.store, "new_pass", None)
    if new_pass is not None:  # a ShardedStore: a shard still down is warned about once in this pass
        new_pass()
    try:  # runs a code error suspended under another code version: retried once by this (newer) code
        retrying.retry_on_new_code(runtime, rivet_settings.SWEEP_BATCH)
    except Exception:
        logger.exception("retrying suspended runs failed; the next sweep retries")
    batch, lease = rivet_settings.SWEEP_BATCH, runtime.settings.lease_seconds

    def queue_fire(record, fire) -> None:
        fire_schedule.delay(fire_to_dict(record, fire))

    fired = 0
    try:  # due cron / scheduled actions: claimed here, run by fire_schedule tasks
        fired = firing.sweep_schedules(runtime, batch, queue_fire)
    except Exception:
        logger.exception("firing due schedules failed; the next sweep retries")
    if len(runtime.store.relay_sources()) > 1:  # sharded: what a lost relay task or a crash left behind
        _relay(runtime)  # (one database writes no relay row: no query for them)
    # Expired leases first and never held back: their executor is gone, nothing in the broker will run
    # them, and the queued new work says nothing about them. A worker (not a direct call) runs them on its
    # own runner threads, so they do not wait behind the backlog either.
    takeovers = runtime.store.claim_due(runtime.owner, batch, lease, expired_only=True)
    local = not sweep.request.called_directly and not run_actor.app.conf.task_always_eager
    for actor_id, token in takeovers:
        if not (local and local_runs().run_now(actor_id, token)):
            _queue_run(runtime, actor_id, token)
    # Backpressure on new work: run messages already waiting in the broker are, mostly, the hints of actors
    # that are due (a burst of creations or sends the workers have not reached). Claiming those again would
    # queue a second task per actor behind the first and make the hint's own run find the lease taken,
    # doubling the work exactly when the workers are behind. The sweep tops the queue up to SWEEP_BATCH
    # instead; a lost hint is still found as soon as the workers catch up.
    backlog = queued_runs()
    limit = batch - (backlog or 0) - len(takeovers)
    claimed = runtime.store.claim_due(runtime.owner, limit, lease) if limit > 0 else []
    if limit <= 0:
        logger.debug("sweep: %d run messages wait in the broker; claiming no new work", backlog)
    for actor_id, token in claimed:
        _queue_run(runtime, actor_id, token)
    if takeovers:
        logger.info(
            "sweep took over %d actor(s) whose lease expired (%s)%s",
            len(takeovers),
            _shown(takeovers),
            f"; {backlog} run messages wait in the broker" if backlog else "",
        )
    if claimed or fired:
        logger.info(
            "sweep queued %d due actor(s)%s and %d schedule fire(s)",
            len(claimed),
            f" ({_shown(claimed)})" if claimed else "",
            fired,
        )
    elif not takeovers:
        logger.debug("sweep: nothing due")
    return len(takeovers) + len(claimed)


@shared_task(name=RELAY_TASK, ignore_result=True)
def relay() -> int:
    """Deliver the messages steps sent to actors on another shard (DESIGN.md section 21): one relay pass
    (``engine.runtime.relay.relay_runtime``) over every shard's pending relay rows, in id order, each to its
    target's shard once (deduplicated there), then marked delivered; a target shard that cannot be reached
    keeps its rows for a later pass. Queued after a commit that wrote relay rows (``CeleryDispatcher.relay``)
    and run by every sweep. Returns the number of rows delivered; never raises for an unreachable shard."""
    from ..django_runtime import get_runtime

    return _relay(get_runtime())


def _relay(runtime: Any) -> int:
    """One relay pass for ``relay`` and the sweep; logs one INFO line when it delivered or failed rows."""
    from ..engine.runtime.relay import relay_runtime

    try:
        report = relay_runtime(runtime)
    except Exception:
        logger.exception("relaying messages to other shards failed; the next sweep retries")
        return 0
    if report.delivered or report.failed:
        logger.info(
            "relay delivered %d message(s) to other shards, %d refused for good, %d waiting",
            report.delivered,
            report.failed,
            report.deferred,
        )
    return report.delivered


def _shown(claimed: list[tuple[str, int]]) -> str:
    """The first few actor ids of ``claimed`` for a log line."""
    return ", ".join(actor_id for actor_id, _ in claimed[:5]) + (", ..." if len(claimed) > 5 else "")


def _queue_run(runtime: Any, actor_id: str, token: int) -> None:
    """Send ``run_actor`` for an actor the sweep claimed (``token``); when the broker cannot take it, give
    the claim back so the next sweep can retry at once."""
    try:
        run_actor.delay(actor_id, token)
    except Exception:  # broker unreachable
        logger.exception("could not queue actor %s; releasing its claim", actor_id)
        try:
            runtime.store.commit(actor_id, token, ports.Commit(release=True))
        except Exception:
            logger.exception("could not release the claim of actor %s; its lease will expire", actor_id)


# acks_late=False: acknowledged on receipt, so a worker crash or a broker redelivery can never run a fire
# twice (the slot policy is at most once; CELERY_TASK_ACKS_LATE stays on for the idempotent tasks above).
@shared_task(name="rivet_workflows.fire_schedule", ignore_result=True, acks_late=False)
def fire_schedule(data: dict) -> None:
    """Run one cron/scheduled action fire claimed by the sweep (``fire_to_dict`` data).

    Runs the action as ``action(c, ScheduledFireInfo, *args)`` (serialised with steps) and logs the fire;
    a vanished entry or actor is ignored. The slot was claimed before this task was queued, so a lost
    task loses that one fire (at most once per slot).
    """
    from ..django_runtime import get_runtime
    from ..engine.actor import firing

    runtime = get_runtime()
    found = fire_from_dict(runtime, data)
    if found is not None:
        firing.run_fire(runtime, *found)
