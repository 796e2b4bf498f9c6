"""Rollback: run the handlers of completed steps in reverse after an unrecoverable error (ENGINE-SEMANTICS.md 7)."""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING

from ..model import errors, ports, serde
from . import retry
from .step_context import StepContext, run_attempt

if TYPE_CHECKING:
    from .session import RunSession

logger = logging.getLogger("rivet_workflows")

#: failures that end the workflow without running rollback handlers
NO_ROLLBACK = (errors.HistoryDivergedError, errors.RollbackCheckpointError, errors.EntryInProgressError)


def pending_handlers(session: RunSession) -> list[str]:
    """Keys of collected handlers that neither finished nor failed yet, latest step first."""
    history = session.history
    keys = []
    for key in session.rollbacks:
        entry = history.get(key)
        if entry is None or entry.rollback_completed_at is not None or entry.rollback_error is not None:
            continue
        keys.append(key)
    return sorted(keys, key=lambda k: history.get(k).seq, reverse=True)


def uncollected(session: RunSession) -> bool:
    """True when history holds a completed step with a rollback handler whose handler neither ran nor was
    collected by this run (e.g. a step of a join branch or race winner that finished in an earlier run and
    was not replayed): the rollback must then start with a replay in rollback mode."""
    for entry in session.history.entries.values():
        if (
            entry.kind == "step"
            and entry.status == ports.ENTRY_COMPLETED
            and entry.data.get("has_rollback")
            and entry.rollback_completed_at is None
            and entry.rollback_error is None
            and entry.key not in session.rollbacks
        ):
            return True
    return False


async def run(session: RunSession, error: dict) -> None:
    """Enter ``rolling_back`` (recording ``error``) and run every pending handler, latest step first.

    Each handler ``rollback(step, output)`` (sync or async) gets the step context and the step's output; it
    is retried like its step (``max_retries``, backoff capped at the live wait threshold); each failed
    attempt fires an ``on_error`` rollback event. After each handler its entry records
    ``rollback_completed_at`` or ``rollback_error`` in its own commit, so a crash mid-rollback resumes and
    never re-runs a finished handler. Handlers that fail for good do not stop the others.
    """
    await session.begin_rollback(error)
    history = session.history
    for key in pending_handlers(session):
        name, handler, options, output = session.rollbacks[key]
        entry = history.get(key)
        attempt = 0
        while True:
            attempt += 1
            await session.lock.acquire()
            step = StepContext(session, key, attempt, entry.data.get("generation", 0) if entry else 0)
            try:
                await run_attempt(lambda s, h=handler, o=output: h(s, o), step, options.timeout)
            except (asyncio.CancelledError, errors.WorkflowSignal):
                session.lock.abandon()
                raise
            except Exception as exc:
                failure = (
                    serde.error_to_dict(exc)
                    if not isinstance(exc, errors.StepTimeoutError)
                    else {
                        "name": "TimeoutError",
                        "message": f"rollback of step {name!r} timed out",
                    }
                )
                failure = {k: v for k, v in failure.items() if v is not None}
                await session.fire_error(
                    {"rollback": {"workflow_id": session.actor_id, "step_name": name, "error": failure}}
                )
                if attempt <= options.max_retries:
                    await session.lock.release()
                    delay = retry.backoff_delay(
                        attempt, options.retry_backoff_base, options.retry_backoff_max
                    )
                    await asyncio.sleep(min(delay, session.settings.live_wait_threshold))
                    continue
                entry.rollback_error = failure
                logger.warning(
                    "rollback handler of step %r (actor %s) failed: %s", name, session.actor_id, failure
                )
            else:
                entry.rollback_completed_at = session.stamp()
            session.writes.record(entry)
            await session.lock.release()
            await session.flush()
            break
