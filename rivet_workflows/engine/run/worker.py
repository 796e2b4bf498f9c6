"""The executor's loop for one actor: claim it, run it (``engine.run``) until it waits or ends, release it."""

from __future__ import annotations

import logging
import threading
import time
from collections import OrderedDict
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import TYPE_CHECKING

from ..actor import bridge, cancel
from ..model import errors, ports, serde
from . import run

if TYPE_CHECKING:
    from ..model.roles import RuntimeRole

logger = logging.getLogger("rivet_workflows")


@dataclass
class RunSummary:
    """What ``run_actor`` did: ``ran`` (False when another executor held the lease or nothing was due),
    ``runs`` (replays performed), ``steps_executed`` (step attempts that ran a body), the final
    ``workflow_state`` and ``wake_at``; ``left_for_other_version`` when the replay diverged on entries of
    another code version and the actor was left, unchanged, for it (``awaiting_code_version``)."""

    actor_id: str
    ran: bool = False
    runs: int = 0
    steps_executed: int = 0
    workflow_state: str | None = None
    wake_at: datetime | None = None
    #: True when the run was left for another code version (``awaiting_code_version`` names it)
    left_for_other_version: bool = False
    awaiting_code_version: str | None = None


#: errors of a store write that retrying cannot fix (``StoreRejectedError``: a database DataError)
REFUSED_WRITES = (errors.SerializationError, errors.PayloadTooLargeError, errors.StoreRejectedError)

#: (actor type name) unknown types already logged by this process (logged once, not every sweep)
_UNREGISTERED_LOGGED: set[str] = set()

#: how long an actor of an unregistered type is left alone before an executor looks at it again (seconds)
UNREGISTERED_RETRY_SECONDS = 300.0


#: a run left for another code version is due again after BASE * 2**(n-1) seconds, n = how many times this
#: process left it in a row, at most MAX: a worker of the wrong version backs off instead of spinning on it,
#: while a worker of the right version (any worker once the deploy is done) takes it within seconds
OTHER_VERSION_RETRY_BASE_SECONDS = 1.0
OTHER_VERSION_RETRY_MAX_SECONDS = 15.0


class _LeftRuns:
    """The runs this process left for another code version: ``actor_id -> (version, times in a row)``, the
    newest ``limit`` kept. Says when a leave is the first (logged as a warning) and how long to back off."""

    def __init__(self, limit: int = 10_000) -> None:
        self._limit = limit
        self._runs: OrderedDict[str, tuple[str | None, int]] = OrderedDict()
        self._lock = threading.Lock()

    def leave(self, actor_id: str, version: str | None) -> int:
        """Count one more leave of ``actor_id`` for ``version``; returns how many in a row (1 = first)."""
        with self._lock:
            previous = self._runs.pop(actor_id, None)
            times = previous[1] + 1 if previous is not None and previous[0] == version else 1
            self._runs[actor_id] = (version, times)
            while len(self._runs) > self._limit:
                self._runs.popitem(last=False)
            return times

    def forget(self, actor_id: str) -> None:
        """``actor_id`` ran here (or is gone): a later leave is a first one again."""
        if self._runs:
            with self._lock:
                self._runs.pop(actor_id, None)


_LEFT = _LeftRuns()


def _leave_for_version(
    runtime: RuntimeRole, actor: ports.ActorRecord, token: int, report: run.RunReport
) -> ports.CommitResult:
    """Release ``actor``, whose replay diverged on entries another code version wrote (``report``), without
    changing its workflow: no pending write of the run is committed, the workflow stays as it is, due again
    after a backoff (``OTHER_VERSION_RETRY_*``; a send wakes it at once as usual) and marked as awaiting that
    version. Logged as a WARNING once per run and version across every process: by the leave that marks it
    (the actor's ``awaiting_code_version``, read with the lease, is not that version yet); later leaves, by
    this process or another, are DEBUG lines (docs/howto/deploys.md)."""
    signal = report.other_version
    assert signal is not None
    ours = runtime.settings.code_version
    times = _LEFT.leave(actor.actor_id, signal.code_version)
    delay = min(OTHER_VERSION_RETRY_MAX_SECONDS, OTHER_VERSION_RETRY_BASE_SECONDS * 2 ** (times - 1))
    if actor.awaiting_code_version != signal.code_version:
        logger.warning(
            "actor %s (%s, key %r): the replay on code version %r diverged on history entries written by "
            "code version %r; the run is left unchanged for a worker of that version (or a newer one once the "
            "deploy is done), not failed%s. Divergence: %s",
            actor.actor_id,
            actor.name,
            actor.key,
            ours,
            signal.code_version,
            " (commits of concurrent branches made before the divergence was found are kept)"
            if report.commits
            else "",
            signal.divergence,
        )
    else:
        logger.debug(
            "actor %s left again for code version %r (retry in %gs)",
            actor.actor_id,
            signal.code_version,
            delay,
        )
    commit = ports.Commit(
        release=True,
        step_lock_until=None,
        defer_until=runtime.store.now() + timedelta(seconds=delay),
    )
    if actor.awaiting_code_version != signal.code_version:
        commit.awaiting_code_version = signal.code_version
    return runtime.store.commit(actor.actor_id, token, commit)


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


def _log_suspension(actor: ports.ActorRecord, error: dict | None) -> None:
    error = error or {}
    logger.error(
        "workflow of actor %s (%s, key %r) suspended by a code error at %s: %s: %s; it keeps its state and "
        "history and goes on after a fix: a deploy with another CODE_VERSION retries it, or rivet retry",
        actor.actor_id,
        actor.name,
        actor.key,
        error.get("location") or "?",
        error.get("name", "error"),
        error.get("message", ""),
    )


def _fail_refused(runtime: RuntimeRole, actor: ports.ActorRecord, token: int, exc: BaseException) -> bool:
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
        code_version=runtime.settings.code_version,
    )
    return bool(runtime.store.commit(actor.actor_id, token, commit).ok)


def _leave_unregistered(runtime: RuntimeRole, actor: ports.ActorRecord, token: int) -> None:
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
    runtime: RuntimeRole,
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
        if actor.destroyed or actor.workflow_state in ports.HALTED_STATES or definition.run is None:
            # a suspended run made due by something else (an action's wake) is left as it is, not due
            halted = actor.workflow_state == ports.SUSPENDED and actor.wake_at is not None
            store.commit(actor_id, token, ports.Commit(release=True, **({"wake_at": None} if halted else {})))
            summary.workflow_state = actor.workflow_state
            return summary
        try:
            report = bridge.run_sync(
                run.execute,
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
                cancel.close_children(runtime, actor_id, reason="its workflow failed")
            return summary
        summary.ran = True
        summary.runs += 1
        summary.steps_executed += report.steps_executed
        if report.other_version is not None:
            left = _leave_for_version(runtime, actor, token, report)
            summary.left_for_other_version = True
            summary.awaiting_code_version = report.other_version.code_version
            summary.workflow_state = actor.workflow_state
            summary.wake_at = left.wake_at if left.ok else None
            return summary
        _LEFT.forget(actor_id)
        result, outcome = report.released, report.outcome
        if result is None or outcome is None:  # evicted: the lease is someone else's now
            return summary
        summary.workflow_state = outcome.workflow_state
        summary.wake_at = result.wake_at
        if outcome.workflow_state == ports.FAILED:
            _log_failure(actor, outcome.error)
            cancel.close_children(runtime, actor_id, reason="its workflow failed")
        elif outcome.workflow_state == ports.SUSPENDED:
            _log_suspension(actor, outcome.error)
        again = actor_id in result.woken or (
            outcome.workflow_state in (ports.SLEEPING, ports.ROLLING_BACK)
            and result.wake_at is not None
            and result.wake_at <= (report.anchored_now() or store.now())
        )
        if not again or (stop_at is not None and time.monotonic() >= stop_at):
            return summary
        token = None
