"""One run: replay an actor's workflow under a held lease to its next wait or its end, then release it.

``execute`` is the one entry point: it takes the claimed actor in and hands back a ``RunReport`` whose
``outcome`` (a ``RunOutcome``) is what the final commit recorded. The run's parts (write buffer, step lock,
waits) live on its ``RunSession``; the lease is kept by the process's lease-keeper thread (``Heartbeat``)
while the workflow runs.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any

from asgiref.sync import sync_to_async

from ..actor import actions, bridge
from ..model import errors, observe, ports, serde
from . import rollback, streams, suspension
from .context import WorkflowContext
from .heartbeat import Heartbeat
from .history import ROOT, History
from .session import RunSession, maybe_await, was_reported

if TYPE_CHECKING:
    from ..actor.actor_context import ActorContext
    from ..model.definitions import ActorDefinition
    from ..model.roles import RuntimeRole

logger = logging.getLogger("rivet_workflows")

UNSET = ports.UNSET

#: the error a replay of an interrupted rollback records when the actor kept none
_ROLLING_BACK = {"name": "RollbackError", "message": "rolling back"}


@dataclass(frozen=True)
class RunOutcome:
    """How one run left the workflow: the fields of its final commit (UNSET leaves a column as it is).

    ``workflow_state`` is sleeping (``wake_at``/``waiting_for`` say until when and on which queues),
    completed (``output``), failed (``error``), suspended (``error``; never due) or rolling_back
    (``error``; due again at ``wake_at``).
    """

    workflow_state: str
    output: Any = UNSET
    error: Any = UNSET
    wake_at: Any = UNSET
    waiting_for: Any = UNSET

    @classmethod
    def sleeping(cls, signal: errors.WaitSignal) -> RunOutcome:
        """The workflow waits until ``signal.wake_at`` or a message on ``signal.queue_names``."""
        return cls(ports.SLEEPING, wake_at=signal.wake_at, waiting_for=sorted(signal.queue_names))

    @classmethod
    def completed(cls, output: Any) -> RunOutcome:
        """The workflow function returned ``output`` (already round-tripped)."""
        return cls(ports.COMPLETED, output=output, error=None, wake_at=None, waiting_for=[])

    @classmethod
    def failed(cls, error: dict) -> RunOutcome:
        """The workflow failed with ``error`` (``serde.error_to_dict`` form); it never runs again."""
        return cls(ports.FAILED, error=error, wake_at=None, waiting_for=[])

    @classmethod
    def suspended(cls, error: dict) -> RunOutcome:
        """A code error stopped the workflow (``suspension.suspended_error`` form): it keeps its history and
        state, is not due and waits for a retry (DESIGN.md section 16)."""
        return cls(ports.SUSPENDED, error=error, wake_at=None, waiting_for=[])

    @classmethod
    def rolling_back(cls, error: dict, wake_at: datetime) -> RunOutcome:
        """The workflow failed with ``error`` and must replay in rollback mode at ``wake_at`` (now)."""
        return cls(ports.ROLLING_BACK, error=error, wake_at=wake_at, waiting_for=[])

    def commit_fields(self) -> dict[str, Any]:
        """The set fields as ``Commit`` attributes."""
        fields = {
            "workflow_state": self.workflow_state,
            "output": self.output,
            "error": self.error,
            "wake_at": self.wake_at,
            "waiting_for": self.waiting_for,
        }
        return {name: value for name, value in fields.items() if value is not UNSET}


@dataclass
class RunReport:
    """What ``execute`` hands back: ``outcome`` (None when the run was evicted: it lost its lease and wrote
    nothing more, or left for another code version), ``released`` (the final commit's result),
    ``steps_executed`` (attempts that ran a body), ``other_version`` (the replay diverged on entries
    another code version wrote: the run wrote nothing more and did NOT release the lease, the caller
    leaves the actor for that version; ``worker.run_actor`` does) and ``commits`` (commits the store
    accepted in this run: 0 unless concurrent branches committed before the divergence was found)."""

    outcome: RunOutcome | None = None
    released: ports.CommitResult | None = None
    steps_executed: int = 0
    other_version: errors.OtherCodeVersionSignal | None = None
    commits: int = 0
    _session: RunSession | None = field(default=None, repr=False)

    def anchored_now(self) -> datetime | None:
        """The store clock without a round trip, when the run's session can tell it (``RunSession``)."""
        return self._session.anchored_now() if self._session is not None else None


async def execute(
    runtime: RuntimeRole,
    actor: ports.ActorRecord,
    token: int,
    *,
    live_until: datetime | None = None,
    loaded: tuple[list[ports.EntryRecord], datetime] | None = None,
    stop_at: float | None = None,
    warm_wait: float = 0.0,
) -> RunReport:
    """Replay ``actor``'s workflow under the lease ``token`` to its next wait or its end and release the
    lease in the final commit (DESIGN.md section 5); a replay that diverges on entries another code version
    wrote commits nothing more and keeps the lease for the caller (``RunReport.other_version``). ``loaded`` is ``(history, store-clock now)`` when the
    claim read them already (``Store.claim_and_load``); ``live_until``, ``warm_wait`` and ``stop_at`` as
    ``RunSession``. Raises ``StoreUnavailable`` (the store went away mid-run; nothing more was written) and
    the store's refusals (``SerializationError``, ``PayloadTooLargeError``, ``StoreRejectedError``)."""
    run = _Run(runtime, actor, token)
    return await run.execute(live_until, loaded, stop_at, warm_wait)


async def _call_hook(hook: Any, c: Any) -> None:
    if inspect.iscoroutinefunction(hook):
        await hook(c)
    else:
        await maybe_await(await sync_to_async(hook, thread_sensitive=False)(c))


class _Run:
    """One replay of one actor's run function under a held lease (one wake-up); each kind of event that
    ends the workflow function is handled by its own method (``_on_*``)."""

    def __init__(self, runtime: RuntimeRole, actor: ports.ActorRecord, token: int) -> None:
        self.runtime = runtime
        self.actor = actor
        self.token = token
        self.definition: ActorDefinition = runtime.registry.get(actor.name)

    async def execute(
        self,
        live_until: datetime | None,
        loaded: tuple[list[ports.EntryRecord], datetime] | None,
        stop_at: float | None,
        warm_wait: float,
    ) -> RunReport:
        """The run inside its observation (``Observer.run``: the ``rivet.run`` span, the lateness)."""
        observer = self.runtime.observer
        observation = observer.run(self.actor, loaded[1] if loaded is not None else None)
        try:
            report = await self._execute(live_until, loaded, stop_at, warm_wait)
        except BaseException as exc:
            observation.end(None, exc)
            raise
        outcome = report.outcome
        observation.end(outcome.workflow_state if outcome is not None else observe.EVICTED)
        if outcome is not None and outcome.workflow_state in (ports.COMPLETED, ports.FAILED, ports.SUSPENDED):
            observer.workflow_finished(self.actor.name, outcome.workflow_state)
        return report

    async def _execute(
        self,
        live_until: datetime | None,
        loaded: tuple[list[ports.EntryRecord], datetime] | None,
        stop_at: float | None,
        warm_wait: float,
    ) -> RunReport:
        session, c = await self._open(live_until, loaded, stop_at, warm_wait)
        report = RunReport(_session=session)
        main = asyncio.ensure_future(self._replay(session))
        beat = Heartbeat(session, asyncio.get_running_loop(), main)
        beat.start()
        try:
            outcome = await main
        except asyncio.CancelledError:
            if session.evicted:
                return self._report(report, session)
            raise
        except errors.EvictedSignal:
            return self._report(report, session)
        except errors.OtherCodeVersionSignal as signal:  # nothing pending is written; the caller releases
            report.other_version = signal
            self.runtime.vars.pop(self.actor.actor_id, None)
            return self._report(report, session)
        finally:
            beat.stop()  # waits for a renew in flight: none may land after the release below
        if session.evicted:
            return self._report(report, session)
        fields = outcome.commit_fields()
        if session.lock.release_on_end():  # a step was abandoned, or the lock is still held: clear it now
            fields["step_lock_until"] = None
        try:
            report.released = await session.flush(release=True, **fields)
        except errors.EvictedSignal:
            return self._report(report, session)
        report.outcome = outcome
        if outcome.workflow_state in ports.FINISHED_STATES:
            await self._close_streams(session)
        await self._close(session, c)
        return self._report(report, session)

    async def _close_streams(self, session: RunSession) -> None:
        """The workflow finished: close the durable streams its history mentions (DESIGN.md section 17),
        which wakes their waiting readers; a run that wrote no stream makes no store call."""
        names = session.streams | streams.streams_of(session.history.entries.values())
        if names:
            try:
                await session.call(session.store.stream_close_all, session.actor_id)
            except errors.StoreUnavailable:  # the finished workflow reads closed anyway
                logger.warning("closing the streams of actor %s failed", session.actor_id)

    @staticmethod
    def _report(report: RunReport, session: RunSession) -> RunReport:
        report.steps_executed = session.steps_executed
        report.commits = session.commits
        return report

    async def _open(
        self,
        live_until: datetime | None,
        loaded: tuple[list[ports.EntryRecord], datetime] | None,
        stop_at: float | None,
        warm_wait: float,
    ) -> tuple[RunSession, ActorContext]:
        """The run's session on the actor's history, with its vars built and ``on_wake`` called."""
        runtime, actor, definition = self.runtime, self.actor, self.definition
        if loaded is not None:
            entries, now = loaded
        else:
            entries, now = await runtime.call(runtime.store.load_history, actor.actor_id), None
        session = RunSession(
            runtime,
            actor,
            definition,
            self.token,
            History(entries, code_version=runtime.settings.code_version),
            live_until=live_until,
            warm_wait=warm_wait,
            stop_at=stop_at,
        )
        if now is not None:
            session.anchor(now)
        else:
            await session.now()  # anchors session.stamp() to the store clock
        c = session.actor_context()
        session.vars = definition.initial_vars(c)
        if definition.on_wake is not None:
            await _call_hook(definition.on_wake, c)
        runtime.vars[actor.actor_id] = session.vars
        return session, c

    async def _close(self, session: RunSession, c: ActorContext) -> None:
        """After the final commit: ``on_sleep``, then the destroy a step or hook asked for."""
        definition, actor = self.definition, self.actor
        if definition.on_sleep is not None:
            try:
                await _call_hook(definition.on_sleep, c)
            except Exception:
                logger.exception("on_sleep hook of actor %s raised; ignored", actor.actor_id)
        if session.destroy_requested:
            await bridge.call(actions.destroy, self.runtime, definition, actor.actor_id, actor.key)

    async def _replay(self, session: RunSession) -> RunOutcome:
        """Run the workflow function and turn how it ended into the run's outcome.

        A code error (an exception that is not a failure type, ``suspension.suspends``) suspends the run:
        nothing rolls back (DESIGN.md section 16). A failure fails it, as follows.
        An unrecoverable error runs the collected rollback handlers first (unless it is a divergence or
        checkpoint error); a replay of an interrupted rollback resumes it with the stored error. When history
        holds handlers this run did not collect (steps of join branches or race winners finished in an earlier
        run), the run ends ``rolling_back`` and due at once; the next run replays in rollback mode, which
        re-enters finished branches and so collects every handler (ENGINE-SEMANTICS.md section 7).
        """
        ctx = WorkflowContext(session, ROOT)
        handler = session.definition.run
        assert handler is not None
        if session.deadline_at is not None and session.timed_out(
            session.anchored_now() or await session.now()
        ):
            # woken by its timeout (or past it when claimed): the workflow fails without running further
            return await self._on_failure(session, session.timeout_error())
        try:
            output = await maybe_await(handler.fn(ctx))
            ctx.end_scope()
            output = serde.roundtrip(
                output, where="workflow output", max_bytes=session.settings.max_payload_bytes
            )
        except (errors.WaitSignal, errors.RollbackStop) as signal:
            return await self._on_wait(session, signal)
        except errors.EvictedSignal:
            raise
        except Exception as exc:
            if not session.rolling_back and suspension.suspends(exc, session.settings):
                return await self._on_suspend(session, exc)
            return await self._on_failure(session, exc)
        return await self._on_return(session, output)

    async def _on_wait(self, session: RunSession, signal: errors.WorkflowSignal) -> RunOutcome:
        """The workflow waits (or, rolling back, reached work that never happened: finish the rollback)."""
        if session.rolling_back:
            return await self._finish_rollback(session)
        assert isinstance(signal, errors.WaitSignal)
        return RunOutcome.sleeping(signal)

    async def _on_failure(self, session: RunSession, exc: Exception) -> RunOutcome:
        """The workflow function raised: report it to ``on_error`` (once), roll back what needs it, fail."""
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
                # Some handlers belong to steps this run did not replay: record rolling_back and run again
                # at once; that replay (rollback mode) collects every handler, then runs them.
                return RunOutcome.rolling_back(error, await session.now())
            if session.rolling_back or rollback.pending_handlers(session):
                await rollback.run(session, error)
        return RunOutcome.failed(error)

    async def _on_suspend(self, session: RunSession, exc: Exception) -> RunOutcome:
        """Workflow code raised a code error (not a failure type): report it to ``on_error`` once, with
        ``suspended: True``, and suspend. Nothing rolls back; completed steps stay completed, so a retry
        after the fix replays them without running them (DESIGN.md section 16)."""
        error = suspension.suspended_error(exc)
        shown = {k: v for k, v in error.items() if v is not None and k != "suspended"}
        await session.fire_error(
            {"workflow": {"workflow_id": session.actor_id, "error": shown, "suspended": True}}
        )
        return RunOutcome.suspended(error)

    async def _on_return(self, session: RunSession, output: Any) -> RunOutcome:
        """The workflow function returned: completed (or, rolling back, finish the rollback)."""
        if session.rolling_back:
            return await self._finish_rollback(session)
        return RunOutcome.completed(output)

    async def _finish_rollback(self, session: RunSession) -> RunOutcome:
        error = session.actor.error or dict(_ROLLING_BACK)
        await rollback.run(session, error)
        return RunOutcome.failed(error)
