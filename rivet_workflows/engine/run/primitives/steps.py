"""Durable steps: attempts, retries with durable backoff, timeouts, replay of outcomes (ENGINE-SEMANTICS.md 3)."""

from __future__ import annotations

import asyncio
import inspect
import logging
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from ...model import errors, observe, ports, serde
from ...model.settings import to_seconds
from .. import retry, streams
from ..reentrancy import RUNNING_STEP_OF
from ..results import StepResult
from ..session import RunSession, mark_reported
from ..step_context import StepContext, is_async, run_attempt

if TYPE_CHECKING:
    from .scope import WorkflowContextRole

RUNNING = ports.ENTRY_RUNNING

logger = logging.getLogger("rivet_workflows")


class _DefaultTimeout(float):
    """The default step timeout, 30 s: told apart from an explicit ``timeout=30`` (``atomic=True`` refuses
    a timeout but not the default)."""

    def __repr__(self) -> str:
        return "30.0"


#: ``ctx.step``'s default ``timeout`` (seconds)
DEFAULT_TIMEOUT: float = _DefaultTimeout(30.0)


def make_options(
    max_retries: int,
    base: float | timedelta,
    maximum: float | timedelta,
    timeout: float | timedelta | None,
    retry_on_timeout: bool,
    ephemeral: bool,
    atomic: bool = False,
    fn: Callable[..., Any] | None = None,
) -> retry.StepOptions:
    """Validate step options into ``StepOptions`` (seconds); ``ValueError``/``TypeError`` on bad values.

    ``atomic=True`` (DESIGN.md section 13) raises ``TypeError`` with an ``async`` body ``fn``, a
    ``timeout`` other than the default (or None/0), ``retry_on_timeout`` or ``ephemeral``; the step then
    has no timeout (its body runs inside a database transaction, which cannot be cancelled)."""
    if not isinstance(max_retries, int) or isinstance(max_retries, bool) or max_retries < 0:
        raise ValueError(f"max_retries must be an int >= 0, got {max_retries!r}")
    if atomic:
        if fn is not None and is_async(fn):
            raise TypeError(
                "an atomic step needs a sync body (it runs inside the database transaction that records "
                "the step, on the store's connection): make it a plain def"
            )
        if timeout is not DEFAULT_TIMEOUT and to_seconds(timeout):
            raise TypeError(
                "an atomic step takes no timeout: its body runs inside a database transaction, which "
                "cannot be cancelled (keep the body short; use a plain step for slow work)"
            )
        if retry_on_timeout or ephemeral:
            raise TypeError("an atomic step cannot be ephemeral or use retry_on_timeout")
        timeout = None
    t = to_seconds(timeout)
    return retry.StepOptions(
        max_retries=max_retries,
        retry_backoff_base=to_seconds(base) or 0.0,
        retry_backoff_max=to_seconds(maximum) or 0.0,
        timeout=t if t else None,
        retry_on_timeout=bool(retry_on_timeout),
        ephemeral=bool(ephemeral),
        atomic=bool(atomic),
    )


STATE_WHERE = "actor state"
STATE_ERRORS = (errors.SerializationError, errors.PayloadTooLargeError)


def _check_state(session: RunSession, name: str) -> None:
    """Check the state a step body left like the store will (``SerializationError``/
    ``PayloadTooLargeError`` over ``settings.max_payload_bytes``), so it fails the step, not the commit."""
    if session.state is not None:
        serde.to_json(session.state, where=STATE_WHERE, max_bytes=session.settings.max_payload_bytes)


def _stored_error(entry: ports.EntryRecord, name: str) -> BaseException:
    failure = entry.data.get("failure") or {}
    exc = retry.exhausted_error(
        failure.get("kind", retry.EXHAUSTED),
        failure.get("raised", retry.EXHAUSTED),
        name,
        entry.error or {},
        entry.attempts,
    )
    return mark_reported(exc)


def _backoff_at(entry: ports.EntryRecord, options: retry.StepOptions):
    delay = retry.backoff_delay(entry.attempts, options.retry_backoff_base, options.retry_backoff_max)
    return entry.last_attempt_at + timedelta(seconds=delay), delay


async def _worker_lost(
    session: RunSession, entry: ports.EntryRecord, name: str, options: retry.StepOptions
) -> bool:
    """Count an interrupted attempt as failed ("worker lost"); returns True when that exhausted the step.

    So a step that kills its worker every time ends exhausted after ``max_retries`` instead of looping;
    only the exhaustion fires an ``on_error`` step event (the lost attempts had no one to report them).
    """
    session.runtime.observer.lease_taken_over(session.actor.name)
    entry.error = {
        "name": "WorkerLostError",
        "message": f"the executor running step {name!r} was lost during attempt {entry.attempts}",
        "metadata": {"attempt": entry.attempts},
    }
    # started, never finished: it has no finish time (manual: HTTP API, Attempts)
    entry.data = retry.finish_attempt(
        entry.data, entry.attempts, retry.ATTEMPT_WORKER_LOST, None, entry.error, entry.last_attempt_at
    )
    if entry.attempts <= options.max_retries:
        entry.status = ports.ENTRY_FAILED
        session.writes.record(entry)
        return False
    entry.status = ports.ENTRY_EXHAUSTED
    entry.data["failure"] = {"kind": retry.EXHAUSTED, "raised": retry.EXHAUSTED}
    session.writes.record(entry)
    await streams.discard_attempts(session, entry.key, entry.attempts + 1)  # the lost attempt's items
    logger.warning(
        "step %r of actor %s (%s) exhausted: %s",
        name,
        session.actor_id,
        session.actor.name,
        entry.error["message"],
    )
    await session.fire_error(
        {
            "step": {
                "workflow_id": session.actor_id,
                "step_name": name,
                "attempt": entry.attempts,
                "max_retries": options.max_retries,
                "remaining_retries": max(0, options.max_retries - entry.attempts + 1),
                "will_retry": False,
                "error": dict(entry.error),
            }
        }
    )
    await session.flush()
    return True


def _complete(entry: ports.EntryRecord, output: serde.Encoded, now: Any) -> None:
    """Record a completed attempt; ``output``: the step's output encoded once (``serde.roundtrip_encoded``),
    whose copy the entry holds and whose encoding the store writes."""
    entry.status = ports.ENTRY_COMPLETED
    entry.data = {k: v for k, v in entry.data.items() if k != "failure"}
    entry.data["output"] = output.value
    entry.reused = {"output": output}
    entry.completed_at = now
    entry.data = retry.finish_attempt(entry.data, entry.attempts, retry.ATTEMPT_COMPLETED, now)


async def _atomic_attempt(
    session: RunSession, entry: ports.EntryRecord, name: str, fn: Callable[..., Any], step: StepContext
) -> Any:
    """One attempt of an atomic step: the body runs inside the transaction of the commit that records its
    outcome (``RunSession.commit_in_transaction``); returns the output. A failed attempt leaves nothing:
    its database writes and sends are rolled back and the run goes on from the state before it."""
    before = serde.to_json(session.state, where=STATE_WHERE)
    step.outbox = []
    done: list[ports.EntryRecord] = []

    def body(commit: ports.Commit) -> None:
        try:
            output = fn(step)
            if inspect.isawaitable(output):
                if inspect.iscoroutine(output):
                    output.close()
                raise TypeError(f"atomic step {name!r}: the body returned an awaitable; it must be sync")
            output = serde.roundtrip_encoded(
                output, where=f"step {name!r}", max_bytes=session.settings.max_payload_bytes
            )
            _check_state(session, name)
        except Exception as exc:
            raise errors.AtomicBodyFailed() from exc
        record = entry.copy()
        _complete(record, output, session.stamp())
        commit.upserts[:] = [*(u for u in commit.upserts if u.key != record.key), record]  # one row per key
        commit.outbox.extend(step.outbox or [])
        done.append(record)

    async def attempt() -> None:
        RUNNING_STEP_OF.set(session.actor_id)  # in this task's own context: a step body runs
        await session.commit_in_transaction(body)

    try:
        with session.bodies.guard(step):  # a lost lease sets step.cancelled (its commit is fenced anyway)
            await asyncio.ensure_future(attempt())
    except Exception:
        session.adopt_stored_state(serde.from_json(before))
        raise
    record = done[0]
    entry.status, entry.data, entry.completed_at = record.status, record.data, record.completed_at
    return record.data["output"]


_REPLAYED = object()  # ``_look_up`` found the step's outcome recorded: the output is returned as it is


async def run_step(
    ctx: WorkflowContextRole,
    key: str,
    name: str,
    fn: Callable[..., Any],
    options: retry.StepOptions,
    rollback: Callable[..., Any] | None = None,
) -> Any:
    """Replay or execute the step at ``key``; returns its (round-tripped) output or raises its failure.

    A short composition (DESIGN.md section 15, as DBOS's ``invoke_step``): look up the record
    (``_look_up``: a recorded outcome is replayed), then attempts (``_attempt``) until one succeeds, each
    failure recorded (``_record_failure``: retried after its durable backoff, or raised when exhausted).
    """
    session = ctx._session
    if rollback is not None and not ctx._checkpoint:
        raise errors.RollbackCheckpointError(
            f"step {name!r} has a rollback handler but no ctx.rollback_checkpoint(...) precedes it in its "
            "scope; add one before the first step whose effects must be undone",
            step_name=name,
        )
    entry, now, replayed = await _look_up(ctx, key, name, options, rollback)
    if entry is None:
        return replayed
    while True:
        attempt = await _attempt(session, entry, key, name, fn, options, rollback, now)
        if attempt.failure is None:
            return attempt.output
        now = None
        retry_at = await _record_failure(session, entry, name, options, attempt)
        await session.wait(retry_at)


async def _look_up(
    ctx: WorkflowContextRole,
    key: str,
    name: str,
    options: retry.StepOptions,
    rollback: Callable[..., Any] | None,
) -> tuple[ports.EntryRecord | None, Any, Any]:
    """The step's history entry: ``(entry, now, None)`` to run an attempt (a new entry stamped ``now``, or
    an unfinished one, its backoff waited out and a lost worker's attempt accounted), or
    ``(None, None, output)`` when the step completed already. Raises the recorded failure of an exhausted
    step, and ``RollbackStop`` when a rollback reaches a step that did not complete."""
    session = ctx._session
    history = session.history
    entry = history.visit(key, "step", name)
    if entry is None:
        if session.rolling_back:
            raise errors.RollbackStop()
        history.check_scope(ctx._scope, before=key, before_kind="step")
        now = session.stamp()
        entry = history.new(key, "step", now=now)
        if session.actor.replay_generation:  # recorded after a replay: a new idempotency key
            entry.data["generation"] = session.actor.replay_generation
        if rollback is not None:
            entry.data["has_rollback"] = True
        return entry, now, None
    if entry.status == ports.ENTRY_COMPLETED:
        if rollback is not None:
            session.collect_rollback(key, name, rollback, options, entry.data.get("output"))
        return None, None, entry.data.get("output")
    if entry.status == ports.ENTRY_EXHAUSTED:
        raise _stored_error(entry, name)
    if session.rolling_back:  # an unfinished step neither retries nor waits out its backoff
        raise errors.RollbackStop()
    if entry.status == RUNNING and entry.attempts > 0:
        # Recorded as running but not by this run: the executor died (or lost its lease) mid-attempt.
        if await _worker_lost(session, entry, name, options):
            raise _stored_error(entry, name)
    if entry.status == ports.ENTRY_FAILED and entry.last_attempt_at is not None:
        retry_at, _ = _backoff_at(entry, options)
        if await session.now() < retry_at:
            await session.wait(retry_at)
    return entry, None, None


@dataclass
class _Attempt:
    """One attempt's outcome: ``output`` (when ``failure`` is None), or ``failure`` and ``timed_out``;
    ``ephemeral``: the attempt ran without the step lock; ``observation``: its ``Observer.step``."""

    output: Any = None
    failure: BaseException | None = None
    timed_out: bool = False
    ephemeral: bool = False
    observation: Any = None


async def _start_attempt(
    session: RunSession, entry: ports.EntryRecord, options: retry.StepOptions, now: Any
) -> bool:
    """Record a new attempt on ``entry`` (running, stamped ``now`` or the session's clock) and take the step
    lock (an ephemeral step: the freshest state instead); returns whether the attempt is ephemeral. Raises
    ``RollbackStop``, the workflow's timeout, or ``WaitSignal`` when no attempt may start (drain's time is
    up, or the actor is paused: the attempt is undone and the workflow stays due)."""
    if session.rolling_back:
        raise errors.RollbackStop()
    if session.deadline_at is not None:
        session.check_deadline(await session.now())  # the workflow's timeout passed: it fails here
    if session.out_of_time():
        # drain's timeout passed or the actor was paused: start no new attempt; the workflow stays due
        raise errors.WaitSignal(await session.now(), frozenset())
    now = now or session.stamp()
    prior = (entry.status, entry.attempts, entry.last_attempt_at, entry.error)
    entry.status = RUNNING
    entry.attempts += 1
    entry.last_attempt_at = now
    entry.error = None
    entry.data = retry.start_attempt(entry.data, entry.attempts, now)
    session.writes.record(entry)
    ephemeral = options.ephemeral and not session.lock.in_use
    if ephemeral:
        if not session.lock.held and not session.state_changed:
            # start from the freshest state (a read; no write of its own)
            await session.load_stored_state()
        return True
    await session.lock.acquire(now)
    if session.paused:
        # The commit recording this attempt found the actor paused: undo the attempt (the final
        # commit writes the entry as it was) and start nothing; the run ends due, for the resume.
        entry.status, entry.attempts, entry.last_attempt_at, entry.error = prior
        session.writes.record(entry)
        session.lock.abandon()
        raise errors.WaitSignal(await session.now(), frozenset())
    return False


async def _attempt(
    session: RunSession,
    entry: ports.EntryRecord,
    key: str,
    name: str,
    fn: Callable[..., Any],
    options: retry.StepOptions,
    rollback: Callable[..., Any] | None,
    now: Any,
) -> _Attempt:
    """Run one attempt of the step body; a success is recorded (the entry completed, the step lock
    released) and its output returned in ``_Attempt.output``; a failure is returned for
    ``_record_failure``. Cancellation and workflow signals propagate (the attempt abandoned)."""
    ephemeral = await _start_attempt(session, entry, options, now)
    step = StepContext(session, key, entry.attempts, entry.data.get("generation", 0))
    if entry.attempts > 1:  # an earlier attempt failed or its worker died: its stream items are void
        await streams.discard_attempts(session, key, entry.attempts)
    session.body_will_run()
    observation = session.runtime.observer.step(session.actor, name, entry.attempts)
    try:
        with session.bodies.track():
            if options.atomic:
                output = await _atomic_attempt(session, entry, name, fn, step)
            else:
                output = await run_attempt(fn, step, options.timeout)
        if not options.atomic:
            output = serde.roundtrip_encoded(
                output, where=f"step {name!r}", max_bytes=session.settings.max_payload_bytes
            )
            _check_state(session, name)
    except (asyncio.CancelledError, errors.WorkflowSignal):
        observation.end(observe.ABANDONED)
        if not ephemeral:
            session.lock.abandon()
        raise
    except errors.StepTimeoutError as exc:
        await _void_streams(session, key, entry, step)
        return _Attempt(failure=exc, timed_out=True, ephemeral=ephemeral, observation=observation)
    except Exception as exc:
        if isinstance(exc, STATE_ERRORS) and exc.where == STATE_WHERE:
            # the state this body left cannot be stored: go on from the last stored state
            await session.load_stored_state()
        await _void_streams(session, key, entry, step)
        return _Attempt(failure=exc, ephemeral=ephemeral, observation=observation)
    observation.end(ports.ENTRY_COMPLETED)
    if not options.atomic:  # an atomic step's outcome is committed already
        _complete(entry, output, session.stamp())
        if step.streams_written:  # the workflow's end closes them (streams.streams_of)
            entry.data["streams"] = sorted(step.streams_written)
            session.streams.update(step.streams_written)
        session.writes.record(entry)
        output = output.value
    if rollback is not None:
        session.collect_rollback(key, name, rollback, options, output)
    if ephemeral:
        if not session.lock.held:
            session.mark_state_changed()
    else:
        await session.lock.release()
    return _Attempt(output=output, ephemeral=ephemeral)


async def _void_streams(session: RunSession, key: str, entry: ports.EntryRecord, step: StepContext) -> None:
    """A failed attempt's stream items are discarded (DESIGN.md section 17); its streams stay the run's."""
    if step.streams_written:
        await streams.discard_attempts(session, key, entry.attempts + 1)
        session.streams.update(step.streams_written)


def _failure_kinds(failure: BaseException, cls: str, timed_out: bool, options: retry.StepOptions) -> dict:
    """The ``data["failure"]`` of an exhausted step: ``kind`` (what failed) and ``raised`` (what is raised)."""
    if timed_out:
        return {
            "kind": retry.TIMEOUT,
            "raised": retry.EXHAUSTED if options.retry_on_timeout else retry.CRITICAL,
        }
    if cls == retry.RETRYABLE:
        return {"kind": retry.EXHAUSTED, "raised": retry.EXHAUSTED}
    if cls == retry.SERIALIZATION:
        raised = "payload" if isinstance(failure, errors.PayloadTooLargeError) else retry.SERIALIZATION
        return {"kind": retry.CRITICAL, "raised": raised}
    return {"kind": cls, "raised": cls}


async def _record_failure(
    session: RunSession, entry: ports.EntryRecord, name: str, options: retry.StepOptions, attempt: _Attempt
) -> Any:
    """Record a failed attempt (its error, the retry or the exhaustion, the on_error event) and release the
    step lock; returns when to retry (a store-clock instant), or raises the step's stored failure when it is
    exhausted (cause: the body's exception, none for a timeout)."""
    failure, timed_out = attempt.failure, attempt.timed_out
    assert failure is not None
    if timed_out:
        error = {
            "name": "TimeoutError",
            "message": f"step {name!r} timed out after {options.timeout:g}s",
            "stack": None,
            "metadata": {"timeout": options.timeout},
        }
    else:
        error = serde.error_to_dict(failure)
    entry.data = retry.finish_attempt(
        entry.data,
        entry.attempts,
        retry.ATTEMPT_TIMED_OUT if timed_out else retry.ATTEMPT_FAILED,
        session.stamp(),
        error,
    )
    cls = retry.classify(failure, timed_out=timed_out, options=options)
    will_retry = cls == retry.RETRYABLE and entry.attempts <= options.max_retries
    entry.error = error
    event: dict[str, Any] = {
        "workflow_id": session.actor_id,
        "step_name": name,
        "attempt": entry.attempts,
        "max_retries": options.max_retries,
        "remaining_retries": max(0, options.max_retries - entry.attempts + 1),
        "will_retry": will_retry,
        "error": {k: v for k, v in error.items() if v is not None},
    }
    retry_at = None
    if will_retry:
        retry_at, delay = _backoff_at(entry, options)
        entry.status = ports.ENTRY_FAILED
        event["retry_delay"] = delay
        event["retry_at"] = retry_at
    else:
        entry.status = ports.ENTRY_EXHAUSTED
        entry.data["failure"] = _failure_kinds(failure, cls, timed_out, options)
    attempt.observation.end(entry.status, failure)
    session.writes.record(entry)
    if not will_retry:
        logger.warning(
            "step %r of actor %s (%s) failed after %d attempt(s), no retry: %s: %s",
            name,
            session.actor_id,
            session.actor.name,
            entry.attempts,
            error.get("name"),
            error.get("message"),
        )
    await session.fire_error({"step": event})
    if attempt.ephemeral:
        await session.flush(state=session.state)
    else:
        await session.lock.release()
    if not will_retry:
        raise _stored_error(entry, name) from (None if timed_out else failure)
    return retry_at


async def try_step(
    ctx: WorkflowContextRole,
    key: str,
    name: str,
    fn: Callable[..., Any],
    options: retry.StepOptions,
    rollback: Callable[..., Any] | None,
    catch: tuple[str, ...],
) -> StepResult:
    """``ctx.try_step``: run the step and turn caught failure kinds into ``StepResult(ok=False, failure)``."""
    caught = retry.DEFAULT_CATCH | set(catch)
    try:
        value = await run_step(ctx, key, name, fn, options, rollback)
    except errors.RivetWorkflowsError as exc:
        kind = exc.kind
        if exc.step_name != name or kind not in caught:
            raise
        error = exc.error or serde.error_to_dict(exc)
        error = {k: v for k, v in error.items() if v is not None}
        return StepResult(
            ok=False,
            failure=retry.failure_dict(kind, name, exc.attempts or 0, error),
        )
    return StepResult(ok=True, value=value)
