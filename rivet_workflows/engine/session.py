"""One run of one actor's workflow: pending writes, the reference-counted step lock, waits and hooks."""

from __future__ import annotations

import asyncio
import inspect
import logging
import time
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from asgiref.sync import sync_to_async

from . import errors, ports
from .actor_context import ActorContext
from .history import History
from .reentrancy import RUNNING_STEP_OF

if TYPE_CHECKING:
    from .definitions import ActorDefinition
    from .runtime import Runtime

logger = logging.getLogger("rivet_workflows")

#: how long the step lock is set for; the lease expiry frees it earlier if the executor dies
STEP_LOCK_SECONDS = 24 * 3600.0


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

    Invariants:
    * ``state`` is the one in-memory state object of this run; it is written only by commits made while the
      step lock is held (from the commit that takes it to the one that releases it), or by the first commit after an
      ephemeral step changed it.
    * Every commit goes through ``flush`` (serialised by an asyncio lock) and is fenced by ``token``; a
      rejected commit raises ``EvictedSignal`` and the run writes nothing more.
    """

    def __init__(
        self,
        runtime: Runtime,
        actor: ports.ActorRecord,
        definition: ActorDefinition,
        token: int,
        history: History,
        *,
        live_until: datetime | None = None,
    ) -> None:
        self.runtime = runtime
        self.store = runtime.store
        self.settings = runtime.settings
        self.actor = actor
        self.actor_id = actor.actor_id
        self.definition = definition
        self.token = token
        self.history = history
        self.live_until = live_until
        self.state: Any = actor.state
        self.vars: Any = None
        self.lock_count = 0
        #: step bodies of this run executing now (branches of a join or race run them concurrently)
        self.bodies_running = 0
        self._bodies_changed = asyncio.Event()
        self.state_dirty = False
        self._release_pending = False
        self.receive: list[str] = []
        self.complete: list[tuple[str, Any]] = []
        self.outbox: list[tuple[str, str, Any, bool]] = []
        #: message ids taken by a queue wait in this run (so two branches never take the same message)
        self.taken: set[str] = set()
        self.started = actor.workflow_state == ports.RUNNING
        self.evicted = False
        self.destroy_requested = False
        #: replaying a workflow whose rollback was interrupted: no forward work may start
        self.rolling_back = actor.workflow_state == ports.ROLLING_BACK
        #: a side-effect-free replay (``executor.check_actor``): nothing is written, no body runs
        self.dry_run = False
        #: completed steps with a rollback handler, by entry key: (name, handler, options, output)
        self.rollbacks: dict[str, tuple[str, Any, Any, Any]] = {}
        self.steps_executed = 0
        self.commits = 0
        self._write_lock = asyncio.Lock()
        self._anchor: tuple[datetime, float] | None = None
        self._inline = self.store.inline_calls is True
        self._lock_mutex = asyncio.Lock()
        #: True while this run holds the step lock in the store (set by the commit that took it)
        self._held = False
        #: seconds a queue wait with no message listens for one before the run unwinds (0: never; the
        #: Celery task sets it from ``settings.warm_wait``, see ``warm_wait``)
        self.warm_wait = 0.0

    @property
    def forward_blocked(self) -> bool:
        """True when no new work may start: rolling back, or a dry-run replay (``RollbackStop`` then)."""
        return self.rolling_back or self.dry_run

    # --- store access --------------------------------------------------------------------------------

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

    async def flush(self, **fields: Any) -> ports.CommitResult:
        """Commit every pending write plus ``fields`` (Commit attributes) in one fenced transaction.

        Adds ``state`` when the step lock is held or released by this commit, and ``workflow_state``
        running on the run's first commit. Raises ``EvictedSignal`` when the fence rejects the write; if the
        store raises, the pending writes are kept so the next flush retries them.
        """
        if self.dry_run:  # a check replay writes nothing
            self.history.take_changes()
            self.receive, self.complete, self.outbox = [], [], []
            return ports.CommitResult(ok=True)
        async with self._write_lock:
            if self.evicted:
                raise errors.EvictedSignal()
            upserts, deletes = self.history.take_changes()
            receive, complete, outbox = self.receive, self.complete, self.outbox
            self.receive, self.complete, self.outbox = [], [], []
            commit = ports.Commit(
                upserts=upserts,
                deletes=deletes,
                receive_messages=receive,
                complete_messages=complete,
                outbox=outbox,
            )
            if self._release_pending and self.lock_count == 0 and "step_lock_until" not in fields:
                fields["step_lock_until"] = None
            if "state" not in fields and (self._held or self.state_dirty):
                fields["state"] = self.state
            for name, value in fields.items():
                setattr(commit, name, value)
            if not self.started and commit.workflow_state is ports.UNSET:
                commit.workflow_state = ports.RUNNING
            try:
                result = await self.call(self.store.commit, self.actor_id, self.token, commit)
            except BaseException:
                self.history.restore_changes(upserts, deletes)
                self.receive[:0], self.complete[:0], self.outbox[:0] = receive, complete, outbox
                raise
            if not result.ok:
                self.evicted = True
                raise errors.EvictedSignal()
            self.started = True
            self.commits += 1
            if commit.state is not ports.UNSET:
                self.state_dirty = False
            if commit.step_lock_until is None:
                self._release_pending = False
                self._held = False
            if result.state is not ports.UNSET and commit.state is ports.UNSET:
                self.state = result.state
            for actor_id in result.woken:
                if actor_id != self.actor_id:
                    self.runtime.wake(actor_id)
            # Open trace pages re-read on this push: the history, and also the header and buttons, which a
            # commit that only moves the workflow state or gives the lease back changes (the release after
            # a warm wait has no entry to write; without a push the page said "running" until its poll).
            if upserts or deletes or commit.release or commit.workflow_state is not ports.UNSET:
                self.runtime.notify_history(self.actor_id)
            return result

    # --- step lock -----------------------------------------------------------------------------------

    @property
    def holds_lock(self) -> bool:
        """True while this run holds the step lock in the store."""
        return self._held

    async def acquire_lock(self, now: datetime | None = None) -> None:
        """Record a step attempt (pending writes) and take the step lock (reference-counted).

        The commit that takes the lock sets ``step_lock_until`` and adopts the fresh state the store
        returns; while it is held, later attempts only write (and keep the shared state object).
        Acquire and release are serialised so a release never clears a lock another step just took.
        """
        async with self._lock_mutex:
            self.lock_count += 1
            self._release_pending = False
            if not self._held:
                # The lock is a day long (the lease frees it earlier), so the anchored clock is precise
                # enough: no store round trip per step.
                base = now or (self.stamp() if self._anchor is not None else await self.now())
                until = base + timedelta(seconds=STEP_LOCK_SECONDS)
                try:
                    # Without a state of ours to write, the commit taking the lock returns the fresh state.
                    await self.flush(
                        step_lock_until=until, state=self.state if self.state_dirty else ports.UNSET
                    )
                except BaseException:
                    self.abandon_lock()
                    raise
                self._held = True
                return
        await self.flush(state=self.state)

    async def release_lock(self) -> None:
        """End one step attempt. While other steps are in flight the outcome is written at once; when this
        was the last one, the outcome, the state and the lock release ride on the run's next commit (the
        next step's attempt, a wait or the final commit), so a sequential step costs one commit."""
        async with self._lock_mutex:
            self.lock_count -= 1
            if self.lock_count == 0:
                self._release_pending = True
                return
        await self.flush(state=self.state)

    def abandon_lock(self) -> None:
        """Drop one lock reference without writing (a cancelled or evicted step); the next flush clears
        the lock if this was the last reference."""
        self.lock_count -= 1
        if self.lock_count == 0:
            self._release_pending = True

    # --- waiting -------------------------------------------------------------------------------------

    def can_wait_live(self, now: datetime, deadline: datetime | None) -> bool:
        """True when a wait until ``deadline`` is short enough to do in memory (PLAN: live_wait_threshold)."""
        if deadline is None or self.live_until is None or deadline > self.live_until:
            return False
        return (deadline - now).total_seconds() < self.settings.live_wait_threshold

    async def wait(
        self,
        deadline: datetime | None,
        queue_names: frozenset[str] = frozenset(),
        check: Callable[[], Awaitable[bool]] | None = None,
    ) -> None:
        """Wait until ``deadline`` (or until ``check()`` is true) in memory when short, else unwind the run.

        Returns when the deadline passed or ``check()`` reported work, or when a warm queue wait
        (``_warm_wait``) heard of a message (the caller looks again); raises ``WaitSignal(deadline,
        queue_names)`` when the wait is too long for this run (ENGINE-SEMANTICS.md section 5).
        """
        if self.dry_run:
            raise errors.RollbackStop()
        now = self.anchored_now() or await self.now()
        if not self.can_wait_live(now, deadline):
            # A warm wait only when nothing else of this run is executing (it holds the store's thread).
            if (
                self.bodies_running == 0
                and queue_names
                and check is not None
                and await self._warm_wait(now, deadline, queue_names)
            ):
                return
            if deadline is None or self.bodies_running == 0:
                raise errors.WaitSignal(deadline, queue_names)
            # Another branch's step body is running, so the run cannot unwind before it ends anyway: wait
            # alongside it, so that a race's timeout branch whose deadline passes first still wins.
            await self._wait_beside_bodies(deadline, queue_names, check, now)
            return
        if self.history.has_changes or self.receive or self.complete or self.outbox or self._release_pending:
            await self.flush()
        while True:
            remaining = (deadline - now).total_seconds()
            if remaining <= 0:
                return
            if check is None:
                await asyncio.sleep(remaining)
            else:
                await asyncio.sleep(min(remaining, max(self.settings.poll_interval, 0.001)))
                if await check():
                    return
            now = await self.now()

    async def _wait_beside_bodies(
        self,
        deadline: datetime,
        queue_names: frozenset[str],
        check: Callable[[], Awaitable[bool]] | None,
        now: datetime,
    ) -> None:
        """Wait until ``deadline`` (or ``check()``) while step bodies of this run are executing; raise
        ``WaitSignal`` once the last of them has ended with the deadline still ahead."""
        if self.history.has_changes or self.receive or self.complete or self.outbox or self._release_pending:
            await self.flush()
        while self.bodies_running > 0:
            remaining = (deadline - now).total_seconds()
            if remaining <= 0:
                return
            if check is not None:
                remaining = min(remaining, max(self.settings.poll_interval, 0.001))
            self._bodies_changed.clear()
            try:
                await asyncio.wait_for(self._bodies_changed.wait(), timeout=remaining)
            except TimeoutError:
                pass
            if check is not None and await check():
                return
            now = await self.now()
        if deadline <= now:
            return
        raise errors.WaitSignal(deadline, queue_names)

    def body_started(self) -> None:
        """A step body of this run began executing (see ``wait``)."""
        self.bodies_running += 1
        self._bodies_changed.set()

    def body_ended(self) -> None:
        """A step body of this run finished, failed or was cancelled."""
        self.bodies_running -= 1
        self._bodies_changed.set()

    async def _warm_wait(self, now: datetime, deadline: datetime | None, queue_names: frozenset[str]) -> bool:
        """Keep the lease for up to ``warm_wait`` seconds listening for a message (``Store.wait_for_messages``)
        instead of unwinding at once; True when one arrived (the caller takes it in this run).

        The run's pending writes (the last step's outcome, the step lock release) are committed first, so
        nothing rides on an idle run. Only while the run's live budget (``live_until``) lasts and never past
        ``deadline``. False (the run unwinds and releases as usual; a message arriving later is found by the
        release's re-check or wakes the actor) when the store cannot wait or the window passed.
        """
        if self.warm_wait <= 0 or self.live_until is None:
            return False
        window = min(self.warm_wait, (self.live_until - now).total_seconds())
        if deadline is not None:
            window = min(window, (deadline - now).total_seconds())
        if window <= 0:
            return False
        if self.history.has_changes or self.receive or self.complete or self.outbox or self._release_pending:
            await self.flush()
        return bool(await self.call(self.store.wait_for_messages, self.actor_id, sorted(queue_names), window))

    # --- hooks ---------------------------------------------------------------------------------------

    def actor_context(self) -> Any:
        """An ``ActorContext`` (``c``) on this run's state and vars, for hooks."""
        return ActorContext.for_run(self)

    async def fire_error(self, event: dict) -> None:
        """Call the workflow's ``on_error(c, event)``; its exceptions are logged and swallowed (section 8)."""
        handler = self.definition.run
        hook = getattr(handler, "on_error", None)
        if hook is None or self.dry_run:
            return
        # The hook may change state: it runs under the step lock like a step (serialised with actions, on
        # the fresh state), and its changes ride on the next commit. Step and rollback events come with
        # the lock held already; a workflow event takes it here.
        take = not self._held
        if take:
            await self.acquire_lock()
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
                await self.release_lock()
