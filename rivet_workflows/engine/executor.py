"""The executor: claim an actor, replay its workflow to the next wait or the end, commit, release; and drain()."""

from __future__ import annotations

import asyncio
import inspect
import logging
import threading
import time
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from asgiref.sync import async_to_sync, sync_to_async

from . import actions, errors, firing, ports, rollback, serde
from .context import WorkflowContext
from .errors import StoreUnavailableError
from .history import ROOT, History
from .session import RunSession, maybe_await, was_reported

if TYPE_CHECKING:
    from .runtime import Runtime

logger = logging.getLogger("rivet_workflows")


@dataclass
class RunSummary:
    """What ``run_actor`` did: ``ran`` (False when another executor held the lease or nothing was due),
    ``runs`` (replays performed), ``steps_executed`` (step attempts that ran a body), the final
    ``workflow_state`` and ``wake_at``."""

    actor_id: str
    ran: bool = False
    runs: int = 0
    steps_executed: int = 0
    workflow_state: str | None = None
    wake_at: datetime | None = None


@dataclass
class DrainSummary:
    """What ``drain`` did: ``actors_run`` (distinct actors), ``steps_executed`` and ``still_waiting`` (ids of
    run actors that were neither completed, failed nor cancelled when drain returned)."""

    actors_run: int = 0
    steps_executed: int = 0
    still_waiting: list[str] = field(default_factory=list)


async def _call_hook(hook: Any, c: Any) -> None:
    if inspect.iscoroutinefunction(hook):
        await hook(c)
    else:
        await maybe_await(await sync_to_async(hook, thread_sensitive=False)(c))


class _Run:
    """One replay of one actor's run function under a held lease (one wake-up)."""

    def __init__(
        self,
        runtime: Runtime,
        actor: ports.ActorRecord,
        token: int,
        live_until: datetime | None,
        loaded: tuple[list[ports.EntryRecord], datetime] | None = None,
    ):
        self.runtime = runtime
        self.actor = actor
        self.token = token
        self.live_until = live_until
        #: (history, store-clock instant) already read with the actor (a store's claim_and_load/load_for_run)
        self.loaded = loaded
        self.session: RunSession | None = None
        self.result: ports.CommitResult | None = None
        self.final_state: str | None = None
        self.final_error: dict | None = None
        #: ``time.monotonic()`` instant after which no new step starts (drain's timeout); None: no limit
        self.stop_at: float | None = None
        #: seconds a queue wait with no message listens before unwinding (``RunSession.warm_wait``)
        self.warm_wait = 0.0

    async def execute(self) -> None:
        runtime, actor = self.runtime, self.actor
        store = runtime.store
        definition = runtime.registry.get(actor.name)
        if self.loaded is not None:
            entries, now = self.loaded
        else:
            entries, now = await runtime.call(store.load_history, actor.actor_id), None
        session = RunSession(
            runtime, actor, definition, self.token, History(entries), live_until=self.live_until
        )
        session.warm_wait = self.warm_wait
        self.session = session
        session.stop_at = self.stop_at  # type: ignore[attr-defined]  # read by the step primitive
        if now is not None:
            session.anchor(now)
        else:
            await session.now()  # anchors session.stamp() to the store clock
        c = session.actor_context()
        session.vars = definition.initial_vars(c)
        if definition.on_wake is not None:
            await _call_hook(definition.on_wake, c)
        if hasattr(runtime, "vars"):
            runtime.vars[actor.actor_id] = session.vars

        main = asyncio.ensure_future(self._run_workflow(session))
        beat = _Heartbeat(session, asyncio.get_running_loop(), main)
        beat.start()
        try:
            fields = await main
        except asyncio.CancelledError:
            if session.evicted:
                return
            raise
        except errors.EvictedSignal:
            return
        finally:
            beat.stop()  # joins: no renew may land after the release below
        if session.evicted:
            return
        if session.lock_count > 0 or session.holds_lock:  # a step was abandoned: clear the lock now
            session.lock_count = 0
            fields["step_lock_until"] = None
        try:
            self.result = await session.flush(release=True, **fields)
        except errors.EvictedSignal:
            return
        self.final_state = fields["workflow_state"]
        self.final_error = fields.get("error")
        if definition.on_sleep is not None:
            try:
                await _call_hook(definition.on_sleep, c)
            except Exception:
                logger.exception("on_sleep hook of actor %s raised; ignored", actor.actor_id)
        if session.destroy_requested:
            await sync_to_async(actions.destroy, thread_sensitive=True)(
                runtime, definition, actor.actor_id, actor.key
            )

    async def _run_workflow(self, session: RunSession) -> dict:
        """Run the workflow function; returns the Commit fields of the run's final commit.

        An unrecoverable error runs the collected rollback handlers first (unless it is a divergence or
        checkpoint error); a replay of an interrupted rollback resumes it with the stored error. When history
        holds handlers this run did not collect (steps of join branches or race winners finished in an earlier
        run), the run ends ``rolling_back`` and due at once; the next run replays in rollback mode, which
        re-enters finished branches and so collects every handler (ENGINE-SEMANTICS.md section 7).
        """
        settings = session.settings
        ctx = WorkflowContext(session, ROOT)
        handler = session.definition.run
        failed = {"workflow_state": ports.FAILED, "wake_at": None, "waiting_for": []}
        try:
            output = await maybe_await(handler.fn(ctx))
            ctx.end_scope()
            output = serde.roundtrip(output, where="workflow output", max_bytes=settings.max_payload_bytes)
        except (errors.WaitSignal, errors.RollbackStop) as signal:
            if session.rolling_back:
                error = session.actor.error or {"name": "RollbackError", "message": "rolling back"}
                await rollback.run(session, error)
                return {**failed, "error": error}
            assert isinstance(signal, errors.WaitSignal)
            return {
                "workflow_state": ports.SLEEPING,
                "wake_at": signal.wake_at,
                "waiting_for": sorted(signal.queue_names),
            }
        except errors.EvictedSignal:
            raise
        except Exception as exc:
            error = serde.error_to_dict(exc)
            if session.rolling_back:  # the replay reached the original failure again
                error = session.actor.error or error
            elif not was_reported(exc):
                await session.fire_error(
                    {
                        "workflow": {
                            "workflow_id": session.actor_id,
                            "error": {k: v for k, v in error.items() if v is not None},
                        }
                    }
                )
            if not isinstance(exc, rollback.NO_ROLLBACK):
                if not session.rolling_back and rollback.uncollected(session):
                    # Some handlers belong to steps this run did not replay: record rolling_back and run
                    # again at once; that replay (rollback mode) collects every handler, then runs them.
                    return {
                        "workflow_state": ports.ROLLING_BACK,
                        "error": error,
                        "wake_at": await session.now(),
                        "waiting_for": [],
                    }
                if session.rolling_back or rollback.pending_handlers(session):
                    await rollback.run(session, error)
            return {**failed, "error": error}
        if session.rolling_back:
            error = session.actor.error or {"name": "RollbackError", "message": "rolling back"}
            await rollback.run(session, error)
            return {**failed, "error": error}
        return {
            "workflow_state": ports.COMPLETED,
            "output": output,
            "error": None,
            "wake_at": None,
            "waiting_for": [],
        }


class _Heartbeat(threading.Thread):
    """Renews a run's lease every lease_seconds/3 from its own thread, so a workflow that blocks its event
    loop (an async step body calling ``time.sleep``) still keeps its lease. A failed renew means the lease
    is lost: the run is marked evicted and its workflow task cancelled. A store error is logged and retried
    at the next beat (the database may come back while the step runs)."""

    def __init__(self, session: RunSession, loop: asyncio.AbstractEventLoop, main: asyncio.Future) -> None:
        super().__init__(name=f"rivet-heartbeat-{session.actor_id}", daemon=True)
        self.session = session
        self.loop = loop
        self.main = main
        self._stopped = threading.Event()
        self._used_store = False

    def stop(self) -> None:
        """Stop beating and wait for a renew in flight (so none lands after the run released the lease)."""
        self._stopped.set()
        if self.is_alive():
            self.join()

    def run(self) -> None:
        session = self.session
        store = session.store
        lease = session.settings.lease_seconds
        try:
            while not self._stopped.wait(max(lease / 3.0, 0.01)):
                self._used_store = True
                try:
                    ok = store.renew(session.actor_id, session.token, lease)
                except Exception:  # the database is away: keep trying while the step runs
                    logger.exception("lease renewal of actor %s failed; retrying", session.actor_id)
                    continue
                if not ok and not self._stopped.is_set():
                    session.evicted = True
                    try:
                        self.loop.call_soon_threadsafe(self.main.cancel)
                    except RuntimeError:  # the loop already closed: the run is over anyway
                        pass
                    return
        finally:
            if self._used_store:
                store.close_thread_connection()


#: errors of a store write that retrying cannot fix (``StoreRejectedError``: a database DataError)
REFUSED_WRITES = (errors.SerializationError, errors.PayloadTooLargeError, errors.StoreRejectedError)

#: (actor type name) unknown types already logged by this process (logged once, not every sweep)
_UNREGISTERED_LOGGED: set[str] = set()

#: how long an actor of an unregistered type is left alone before an executor looks at it again (seconds)
UNREGISTERED_RETRY_SECONDS = 300.0


def _log_failure(actor: ports.ActorRecord, error: dict | None) -> None:
    error = error or {}
    logger.error(
        "workflow of actor %s (%s, key %r) failed: %s: %s",
        actor.actor_id,
        actor.name,
        actor.key,
        error.get("name", "error"),
        error.get("message", ""),
    )


def _fail_refused(runtime: Runtime, actor: ports.ActorRecord, token: int, exc: BaseException) -> bool:
    """Record the workflow failed with ``exc`` (the store's refusal) in a fresh commit holding none of the
    run's pending writes; returns False when the lease was lost meanwhile."""
    error = serde.error_to_dict(exc)
    error["stack"] = None
    _log_failure(actor, error)
    commit = ports.Commit(
        workflow_state=ports.FAILED,
        error=error,
        wake_at=None,
        waiting_for=[],
        step_lock_until=None,
        release=True,
    )
    return bool(runtime.store.commit(actor.actor_id, token, commit).ok)


def _leave_unregistered(runtime: Runtime, actor: ports.ActorRecord, token: int) -> None:
    """An actor whose type this process does not know (removed, renamed, or a worker running older code):
    release the claim without touching its workflow and look again in ``UNREGISTERED_RETRY_SECONDS``."""
    if actor.name not in _UNREGISTERED_LOGGED:
        _UNREGISTERED_LOGGED.add(actor.name)
        logger.warning(
            "actor %s has type %r, which is not registered in this process; left alone (retried every %gs)",
            actor.actor_id,
            actor.name,
            UNREGISTERED_RETRY_SECONDS,
        )
    commit = ports.Commit(release=True)
    if actor.wake_at is not None and actor.workflow_state not in ports.FINISHED_STATES:
        commit.wake_at = runtime.store.now() + timedelta(seconds=UNREGISTERED_RETRY_SECONDS)
    runtime.store.commit(actor.actor_id, token, commit)


def run_actor(
    runtime: Runtime,
    actor_id: str,
    *,
    owner: str | None = None,
    token: int | None = None,
    live_until: datetime | None = None,
    stop_at: float | None = None,
    warm_wait: float = 0.0,
) -> RunSummary:
    """Run ``actor_id``'s workflow until it completes, fails or waits, then release the lease (DESIGN.md 5).

    Claims the lease unless ``token`` (an already claimed lease) is given; returns ``ran=False`` at once
    when another executor holds it. ``live_until`` (store-clock instant) bounds in-memory waiting: short
    waits ending before it are done in memory; None means every wait unwinds the run. If a message
    arrived during the run (the release finds the actor due again) it runs again. A rejected (fenced)
    commit stops the run without further writes. ``stop_at`` (a ``time.monotonic()`` instant, for drain)
    stops starting new steps after it: the run commits what it did and leaves the workflow due.
    ``warm_wait`` (seconds, within ``live_until``): a queue wait that finds no message keeps the lease and
    listens this long for one before the run releases (``RunSession._warm_wait``; 0, the default for
    drain, releases at once). Sync; call it from a worker thread, not an event loop.
    """
    store, settings = runtime.store, runtime.settings
    owner = owner or runtime.owner
    summary = RunSummary(actor_id)
    while True:
        try:
            if token is None:
                got = store.claim_and_load(actor_id, owner, settings.lease_seconds)
                if got is None:
                    return summary
                token, actor, entries, now = got
            else:
                actor, entries, now = store.load_for_run(actor_id)
            loaded = (entries, now)
        except errors.ActorNotFoundError:
            return summary
        if actor.name not in runtime.registry:
            _leave_unregistered(runtime, actor, token)
            return summary
        definition = runtime.registry.get(actor.name)
        if actor.destroyed or actor.workflow_state in ports.FINISHED_STATES or definition.run is None:
            result = store.commit(actor_id, token, ports.Commit(release=True))
            summary.workflow_state = actor.workflow_state
            return summary
        run = _Run(runtime, actor, token, live_until, loaded)
        run.stop_at = stop_at
        run.warm_wait = warm_wait
        try:
            async_to_sync(run.execute)()
        except errors.StoreUnavailable as exc:  # the database went away mid-run: nothing more was written
            raise StoreUnavailableError(
                f"store unavailable while running actor {actor_id}; its lease expires and the sweep "
                "resumes it"
            ) from exc.__cause__
        except REFUSED_WRITES as exc:
            # The store refused a write of this run (a value it cannot hold): the same write would fail on
            # every retry, so fail the workflow, keeping what was stored before this run's refused commit.
            summary.ran = True
            summary.runs += 1
            if _fail_refused(runtime, actor, token, exc):
                summary.workflow_state = ports.FAILED
            return summary
        summary.ran = True
        summary.runs += 1
        if run.session is not None:
            summary.steps_executed += run.session.steps_executed
        result = run.result
        if result is None:  # evicted: the lease is someone else's now
            return summary
        summary.workflow_state = run.final_state
        summary.wake_at = result.wake_at
        if run.final_state == ports.FAILED:
            _log_failure(actor, run.final_error)
        again = actor_id in result.woken or (
            run.final_state in (ports.SLEEPING, ports.ROLLING_BACK)
            and result.wake_at is not None
            and result.wake_at <= ((run.session and run.session.anchored_now()) or store.now())
        )
        if not again or (stop_at is not None and time.monotonic() >= stop_at):
            return summary
        token = None


def drain(runtime: Runtime, timeout: float = 10.0, *, limit: int = 32) -> DrainSummary:
    """Run every due actor in this process until none has work due within ``timeout`` seconds (DESIGN.md 9).

    Claims due actors (``store.claim_due``) and runs them with ``run_actor`` (same leases as workers); while
    the earliest deadline (``store.next_deadline``) falls within the timeout it sleeps until then and goes
    on. Starts no step, live wait or actor after ``timeout``: a step already running cannot be interrupted,
    so drain returns within ``timeout`` plus the time of the step running at the deadline (a workflow with
    more to do stays due and the next drain or a worker goes on). Returns a ``DrainSummary``.
    """
    store, settings = runtime.store, runtime.settings
    owner = runtime.owner
    end = time.monotonic() + timeout
    summary = DrainSummary()
    seen: dict[str, str | None] = {}
    while True:
        remaining = end - time.monotonic()
        if remaining <= 0:
            break
        fired = firing.sweep_schedules(runtime, limit)  # due cron and scheduled actions
        claimed = store.claim_due(owner, limit, settings.lease_seconds)
        if claimed:  # the timeout's end as a store-clock instant, read once per batch (not per actor)
            end_on_store_clock = store.now() + timedelta(seconds=end - time.monotonic())
        for actor_id, token in claimed:
            remaining = end - time.monotonic()
            if remaining <= 0:  # past the timeout: start nothing more; hand the claim back (still due)
                store.commit(actor_id, token, ports.Commit(release=True))
                continue
            live_until = end_on_store_clock
            result = run_actor(
                runtime, actor_id, owner=owner, token=token, live_until=live_until, stop_at=end
            )
            summary.steps_executed += result.steps_executed
            seen[actor_id] = result.workflow_state
        if claimed or fired:
            continue
        deadline = firing.next_deadline(store)
        if deadline is None:
            break
        wait = (deadline - store.now()).total_seconds()
        remaining = end - time.monotonic()
        if wait > remaining:
            break
        time.sleep(min(max(wait, settings.poll_interval), max(remaining, 0.0)))
    summary.actors_run = len(seen)
    summary.still_waiting = [a for a, s in seen.items() if s not in ports.FINISHED_STATES]
    return summary
