"""One run of one actor's workflow as the primitives see it: state, clock, the one commit path and hooks."""

from __future__ import annotations

import asyncio
import inspect
import logging
import time
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from asgiref.sync import sync_to_async

from ..actor.actor_context import ActorContext
from ..model import errors, ports
from .history import History
from .reentrancy import RUNNING_STEP_OF
from .step_lock import BodyCounter, StepLock
from .waiting import Waits
from .writes import WriteBuffer

if TYPE_CHECKING:
    from ..model.definitions import ActorDefinition
    from ..model.roles import RuntimeRole
    from .retry import StepOptions

logger = logging.getLogger("rivet_workflows")


def mark_reported(exc: BaseException) -> BaseException:
    """Flag ``exc`` as already reported to ``on_error`` (so no workflow event repeats it)."""
    try:
        exc._rivet_reported = True  # type: ignore[attr-defined]
    except AttributeError:  # pragma: no cover - exceptions without __dict__
        pass
    return exc


def was_reported(exc: BaseException) -> bool:
    """True when ``exc`` was already reported to ``on_error`` by a step event."""
    return bool(getattr(exc, "_rivet_reported", False))


async def maybe_await(value: Any) -> Any:
    """Await ``value`` if it is awaitable, else return it."""
    if inspect.isawaitable(value):
        return await value
    return value


class RunSession:
    """Everything one executor run shares between the workflow context, branch contexts and step contexts.

    Its parts: ``writes`` (the write buffer every write goes through), ``lock`` (the step lock), ``bodies``
    (step bodies running now) and ``waits`` (how the run waits). ``live_until`` bounds in-memory waits,
    ``warm_wait`` is a queue wait's listening window (see ``waiting.Waits``), ``stop_at`` a
    ``time.monotonic()`` instant after which no step attempt starts (drain's timeout; None: no limit).

    Invariants:
    * ``state`` is the one in-memory state object of this run; it is written only by commits made while the
      step lock is held (from the commit that takes it to the one that releases it), or by the first commit
      after an ephemeral step or a hook changed it (``state_changed``).
    * Every commit goes through ``flush`` (serialised by an asyncio lock) and is fenced by ``token``; a
      rejected commit raises ``EvictedSignal`` and the run writes nothing more.
    """

    def __init__(
        self,
        runtime: RuntimeRole,
        actor: ports.ActorRecord,
        definition: ActorDefinition,
        token: int,
        history: History,
        *,
        live_until: datetime | None = None,
        warm_wait: float = 0.0,
        stop_at: float | None = None,
    ) -> None:
        self.runtime = runtime
        self.store = runtime.store
        self.settings = runtime.settings
        self.actor = actor
        self.actor_id = actor.actor_id
        self.definition = definition
        self.token = token
        self.history = history
        self.writes = WriteBuffer(history)
        self.lock = StepLock(self)
        self.bodies = BodyCounter()
        self.waits = Waits(self, live_until, warm_wait)
        self.vars: Any = None
        #: completed steps with a rollback handler, by entry key: (name, handler, options, output)
        self.rollbacks: dict[str, tuple[str, Any, Any, Any]] = {}
        #: names of the durable streams this run wrote or closed (closed with the workflow's end)
        self.streams: set[str] = set()
        self._state: Any = actor.state
        self._state_changed = False
        self._stop_at = stop_at
        self._paused = False
        self._started = actor.workflow_state == ports.RUNNING
        self._rolling_back = actor.workflow_state == ports.ROLLING_BACK
        self._evicted = False
        self._destroy_requested = False
        self._steps_executed = 0
        self._write_lock = asyncio.Lock()
        self._anchor: tuple[datetime, float] | None = None
        self._inline = self.store.inline_calls is True
        self._commits = 0
        self._awaiting_cleared = False

    # --- the run's flags -----------------------------------------------------------------------------

    @property
    def rolling_back(self) -> bool:
        """True when no new work may start: the workflow is rolling back (``RollbackStop`` then; a replay
        of an interrupted rollback starts so, ``begin_rollback`` enters it)."""
        return self._rolling_back

    @property
    def evicted(self) -> bool:
        """True once the run lost its lease (a fenced commit, or the heartbeat's failed renewal)."""
        return self._evicted

    def evict(self) -> None:
        """The lease is lost: the run's next write raises ``EvictedSignal`` (called by the heartbeat)."""
        self._evicted = True

    @property
    def destroy_requested(self) -> bool:
        """True when a step or hook asked to destroy the actor once the run has committed."""
        return self._destroy_requested

    def request_destroy(self) -> None:
        """Destroy the actor after the run's final commit (``step.destroy()``, ``c.destroy()`` in a hook)."""
        self._destroy_requested = True

    @property
    def steps_executed(self) -> int:
        """Step attempts of this run that ran a body."""
        return self._steps_executed

    def body_will_run(self) -> None:
        """A step attempt is about to run its body (counted in ``steps_executed``)."""
        self._steps_executed += 1

    def out_of_time(self) -> bool:
        """True once ``stop_at`` passed or an operator paused the actor (a commit reported it): start no new
        step attempt (the workflow stays due; a paused one is claimed again after ``resume``)."""
        return self._paused or (self._stop_at is not None and time.monotonic() >= self._stop_at)

    @property
    def paused(self) -> bool:
        """True once a commit of this run reported the actor paused (DESIGN.md section 12)."""
        return self._paused

    @property
    def deadline_at(self) -> datetime | None:
        """The workflow's timeout as a store-clock instant (``timeout`` from creation), or None."""
        return self.actor.deadline_at

    def timed_out(self, now: datetime) -> bool:
        """True when the workflow's deadline passed at ``now`` and the run is not rolling back (a rollback
        started by the timeout itself must finish)."""
        return self.deadline_at is not None and now >= self.deadline_at and not self._rolling_back

    def timeout_error(self) -> errors.WorkflowTimeoutError:
        """The ``WorkflowTimeoutError`` of this workflow's deadline."""
        deadline = self.deadline_at
        return errors.WorkflowTimeoutError(
            f"workflow of actor {self.actor_id} timed out after {self.definition.timeout}s",
            timeout=self.definition.timeout,
            deadline_at=deadline.isoformat() if deadline is not None else None,
        )

    def check_deadline(self, now: datetime) -> None:
        """Raise ``WorkflowTimeoutError`` into the workflow when its deadline passed at ``now``."""
        if self.timed_out(now):
            raise self.timeout_error()

    def collect_rollback(self, key: str, name: str, handler: Any, options: StepOptions, output: Any) -> None:
        """Remember the rollback handler of the completed step at ``key`` (run in reverse on failure)."""
        self.rollbacks[key] = (name, handler, options, output)

    # --- state ---------------------------------------------------------------------------------------

    @property
    def state(self) -> Any:
        """The run's one state object (see the class invariants)."""
        return self._state

    @state.setter
    def state(self, value: Any) -> None:
        self._state = value

    @property
    def state_changed(self) -> bool:
        """True when the state changed outside a held step lock and the next commit must write it."""
        return self._state_changed

    def mark_state_changed(self) -> None:
        """The state changed outside a held step lock (an ephemeral step, a hook): the next commit writes it."""
        self._state_changed = True

    def adopt_stored_state(self, state: Any) -> None:
        """Go on from ``state``, the actor's state as stored (nothing of this run's changes is pending)."""
        self._state = state
        self._state_changed = False

    async def load_stored_state(self) -> None:
        """Read the actor's stored state and go on from it (``adopt_stored_state``)."""
        self.adopt_stored_state((await self.call(self.store.get_actor, self.actor_id)).state)

    # --- store access and the clock ------------------------------------------------------------------

    async def call(self, fn: Callable[..., Any], *args: Any) -> Any:
        """Run a sync store function on the thread owning the DB connection.

        A store whose methods are quick and safe from any thread (``inline_calls = True``, e.g. the
        in-memory store) is called directly: a thread hop costs more than the call.
        """
        if self._inline:
            return fn(*args)
        return await self.runtime.call(fn, *args)

    async def now(self) -> datetime:
        """The store's clock (a store call); also re-anchors ``stamp``."""
        value = await self.call(self.store.now)
        self._anchor = (value, time.monotonic())
        return value

    def anchor(self, now: datetime) -> None:
        """Anchor ``stamp`` to ``now``, a store-clock instant just read (e.g. by the claim)."""
        self._anchor = (now, time.monotonic())

    @property
    def clock_anchored(self) -> bool:
        """True once ``stamp`` is anchored to the store clock."""
        return self._anchor is not None

    def anchored_now(self) -> datetime | None:
        """The store clock without a round trip (``stamp``) when that is exact enough: a database store
        whose clock was read at the start of this run; None for an in-memory store (whose clock may be a
        test's manual clock: call ``now()``)."""
        if self._inline or self._anchor is None:
            return None
        return self.stamp()

    def stamp(self) -> datetime:
        """A store-clock timestamp without a store call: the last ``now()`` plus the monotonic time since.

        For record-keeping fields (created_at, completed_at); deadlines use ``now()``.
        """
        if self._anchor is None:
            return datetime.now(UTC)
        value, mono = self._anchor
        return value + timedelta(seconds=time.monotonic() - mono)

    # --- the one commit path -------------------------------------------------------------------------

    async def flush(self, **fields: Any) -> ports.CommitResult:
        """Commit every pending write plus ``fields`` (Commit attributes) in one fenced transaction.

        Adds ``state`` when the step lock is held or released by this commit (or the state changed),
        ``step_lock_until=None`` when the lock is to be released, and ``workflow_state`` running on the
        run's first commit. Raises ``EvictedSignal`` when the fence rejects the write; if the store raises,
        the pending writes are kept so the next flush retries them.
        """
        async with self._write_lock:
            if self._evicted:
                raise errors.EvictedSignal()
            commit = self._prepare(fields)
            try:
                result = await self.call(self.store.commit, self.actor_id, self.token, commit)
            except BaseException:
                self.writes.restore(commit)
                raise
            return self._committed(commit, result)

    async def commit_in_transaction(self, body: Callable[[ports.Commit], None]) -> ports.CommitResult:
        """One fenced commit (as ``flush``) in whose transaction ``body(commit)`` runs first: an atomic step
        (``Store.run_in_commit``, DESIGN.md section 13). ``body`` runs on the store's thread, adds its
        outcome to ``commit`` (upserts, outbox) and raises ``AtomicBodyFailed`` (cause: the body's
        exception) to roll its writes back; the state it leaves is written with the commit.

        Raises the body's exception (the pending writes are kept for the next commit), ``EvictedSignal``
        when the fence rejected the commit (nothing of the body was kept), or a store failure as ``call``.
        Other commits of the run wait meanwhile (the run's write lock is held).
        """
        async with self._write_lock:
            if self._evicted:
                raise errors.EvictedSignal()
            commit = self._prepare({})

            def build() -> ports.Commit:
                body(commit)
                self.writes.add_attributes(commit)  # the body's step.set_attributes
                if self.lock.held or self._state_changed:
                    commit.state = self._state  # the body may have assigned a new state object
                self._stamp_version(commit)  # the body's entries too
                return commit

            def run() -> tuple[ports.CommitResult | None, BaseException | None]:
                try:
                    return self.store.run_in_commit(self.actor_id, self.token, build), None
                except errors.AtomicBodyFailed as carrier:
                    return None, carrier.__cause__ or carrier

            try:
                # always on a thread, also for an in-memory store: the body may use the ORM
                result, failure = await self.runtime.call(run)
            except BaseException:
                self.writes.restore(commit)
                raise
            if failure is not None:
                self.writes.restore(commit)
                raise failure
            assert result is not None
            return self._committed(commit, result)

    def _prepare(self, fields: dict[str, Any]) -> ports.Commit:
        """The next commit: every pending write plus ``fields`` and what ``flush`` adds (its docstring)."""
        commit = self.writes.take()
        self.lock.add_release(fields)
        if "state" not in fields and (self.lock.held or self._state_changed):
            fields["state"] = self._state
        for name, value in fields.items():
            setattr(commit, name, value)
        if not self._started and commit.workflow_state is ports.UNSET:
            commit.workflow_state = ports.RUNNING
        self._stamp_version(commit)
        return commit

    def _committed(self, commit: ports.Commit, result: ports.CommitResult) -> ports.CommitResult:
        """Take in the store's answer to ``commit``: ``EvictedSignal`` when fenced off, else the run's
        bookkeeping (state, step lock, wake-ups of other actors, the relay, the trace page's push)."""
        if not result.ok:
            self._evicted = True
            raise errors.EvictedSignal()
        self._started = True
        self._paused = result.paused
        self._commits += 1
        if commit.awaiting_code_version is not ports.UNSET:
            self._awaiting_cleared = True
        if commit.state is not ports.UNSET:
            self._state_changed = False
        self.lock.committed(commit)
        if result.state is not ports.UNSET and commit.state is ports.UNSET:
            self._state = result.state
        for actor_id in result.woken:
            if actor_id != self.actor_id:
                self.runtime.wake(actor_id)
        if result.relayed:  # messages to another shard wait in relay rows (DESIGN.md section 21)
            self.runtime.relay_soon()
        # Open trace pages re-read on this push: the history, and also the header and buttons, which a
        # commit that only moves the workflow state or gives the lease back changes (the release after
        # a warm wait has no entry to write; without a push the page said "running" until its poll).
        if commit.upserts or commit.deletes or commit.release or commit.workflow_state is not ports.UNSET:
            self.runtime.notify_history(self.actor_id)
        return result

    def _stamp_version(self, commit: ports.Commit) -> None:
        """Record this process's code version on what ``commit`` writes: each upserted entry and, unless the
        commit is lease bookkeeping only, the actor row; the first commit of a run that another version's
        worker had left clears ``awaiting_code_version`` (DESIGN.md section 12)."""
        version = self.settings.code_version
        for entry in commit.upserts:
            entry.code_version = version
            recorded = self.history.entries.get(entry.key)
            if recorded is not None:
                recorded.code_version = version
        if not commit.lease_only:
            commit.code_version = version
        if self.actor.awaiting_code_version is not None and not self._awaiting_cleared:
            commit.awaiting_code_version = None

    @property
    def commits(self) -> int:
        """How many commits of this run the store accepted so far."""
        return self._commits

    async def flush_pending(self) -> None:
        """``flush`` when a write (or the step lock's release) is waiting, so nothing rides on a wait."""
        if self.writes.pending or self.lock.release_pending:
            await self.flush()

    async def begin_rollback(self, error: dict) -> None:
        """Enter ``rolling_back`` recording ``error`` in its own commit (no-op when rolling back already)."""
        if self._rolling_back:
            return
        self._rolling_back = True
        await self.flush(workflow_state=ports.ROLLING_BACK, error=error)

    # --- waiting -------------------------------------------------------------------------------------

    async def wait(
        self,
        deadline: datetime | None,
        queue_names: frozenset[str] = frozenset(),
        check: Callable[[], Awaitable[bool]] | None = None,
    ) -> None:
        """``waits.wait``: wait in memory when short, else unwind the run with ``WaitSignal``."""
        await self.waits.wait(deadline, queue_names, check)

    # --- hooks ---------------------------------------------------------------------------------------

    def actor_context(self) -> ActorContext:
        """An ``ActorContext`` (``c``) on this run's state and vars, for hooks."""
        return ActorContext.for_run(self)

    async def fire_error(self, event: dict) -> None:
        """Call the workflow's ``on_error(c, event)``; its exceptions are logged and swallowed (section 8)."""
        handler = self.definition.run
        hook = getattr(handler, "on_error", None)
        if hook is None:
            return
        # The hook may change state: it runs under the step lock like a step (serialised with actions, on
        # the fresh state), and its changes ride on the next commit. Step and rollback events come with
        # the lock held already; a workflow event takes it here.
        take = not self.lock.held
        if take:
            await self.lock.acquire()
        marker = RUNNING_STEP_OF.set(self.actor_id)  # like a step: no client call back into this actor
        try:
            c = self.actor_context()
            if inspect.iscoroutinefunction(hook):
                await hook(c, event)
            else:
                await maybe_await(await sync_to_async(hook, thread_sensitive=False)(c, event))
        except Exception:
            logger.exception("on_error hook of actor %s raised; ignored", self.actor_id)
        finally:
            RUNNING_STEP_OF.reset(marker)
            if take:
                await self.lock.release()
