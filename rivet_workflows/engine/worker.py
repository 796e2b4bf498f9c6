"""The executor's loop for one actor: claim it, run it (``engine.run``) until it waits or ends, release it."""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import TYPE_CHECKING

from asgiref.sync import async_to_sync

from . import errors, ports, run, serde

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
    listens this long for one before the run releases (``waiting.Waits``; 0, the default for
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
        if actor.paused:  # paused after a sweep claimed it: hand the lease back, the workflow stays as it is
            store.commit(actor_id, token, ports.Commit(release=True))
            summary.workflow_state = actor.workflow_state
            return summary
        if actor.destroyed or actor.workflow_state in ports.FINISHED_STATES or definition.run is None:
            result = store.commit(actor_id, token, ports.Commit(release=True))
            summary.workflow_state = actor.workflow_state
            return summary
        try:
            report = async_to_sync(run.execute)(
                runtime,
                actor,
                token,
                live_until=live_until,
                loaded=loaded,
                stop_at=stop_at,
                warm_wait=warm_wait,
            )
        except errors.StoreUnavailable as exc:  # the database went away mid-run: nothing more was written
            raise errors.StoreUnavailableError(
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
        summary.steps_executed += report.steps_executed
        result, outcome = report.released, report.outcome
        if result is None or outcome is None:  # evicted: the lease is someone else's now
            return summary
        summary.workflow_state = outcome.workflow_state
        summary.wake_at = result.wake_at
        if outcome.workflow_state == ports.FAILED:
            _log_failure(actor, outcome.error)
        again = actor_id in result.woken or (
            outcome.workflow_state in (ports.SLEEPING, ports.ROLLING_BACK)
            and result.wake_at is not None
            and result.wake_at <= (report.anchored_now() or store.now())
        )
        if not again or (stop_at is not None and time.monotonic() >= stop_at):
            return summary
        token = None
