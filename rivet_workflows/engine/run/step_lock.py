"""The run's step lock (what serialises step bodies with actions) and the count of step bodies running now."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from ..model import ports

if TYPE_CHECKING:
    from ..model.roles import SessionRole
    from .step_context import StepContext

#: how long the step lock is set for; the lease expiry frees it earlier if the executor dies
STEP_LOCK_SECONDS = 24 * 3600.0


class StepLock:
    """The actor's step lock as one run holds it: reference-counted over the step attempts in flight.

    Invariants (ports module docstring): the commit that records the first attempt takes the lock in the
    store (``step_lock_until``) and adopts the fresh state the store returns; while it is held, the run's
    state object is the actor's state and every commit writes it. The lock is released by a commit when
    the last attempt ended: that release rides on the run's next commit (the next step's attempt, a wait
    or the final commit), so a sequential step costs one commit. Acquire and release are serialised, so a
    release never clears a lock another step just took.
    """

    def __init__(self, session: SessionRole) -> None:
        self._session = session
        self._count = 0
        self._held = False
        self._release_pending = False
        self._mutex = asyncio.Lock()

    @property
    def held(self) -> bool:
        """True while this run holds the step lock in the store (set by the commit that took it)."""
        return self._held

    @property
    def in_use(self) -> bool:
        """True while a step attempt of this run holds a reference to the lock."""
        return self._count > 0

    @property
    def release_pending(self) -> bool:
        """True when the last attempt ended and the next commit is to release the lock."""
        return self._release_pending

    async def acquire(self, now: datetime | None = None) -> None:
        """Record a step attempt (with the run's pending writes) and take one reference to the lock.

        The first reference takes the lock in the store with that commit (``now``: the store-clock instant
        to set it from; default the anchored clock); later ones only write (keeping the shared state).
        """
        session = self._session
        async with self._mutex:
            self._count += 1
            self._release_pending = False
            if not self._held:
                # The lock is a day long (the lease frees it earlier), so the anchored clock is precise
                # enough: no store round trip per step.
                base = now or (session.stamp() if session.clock_anchored else await session.now())
                until = base + timedelta(seconds=STEP_LOCK_SECONDS)
                try:
                    # Without a state of ours to write, the commit taking the lock returns the fresh state.
                    await session.flush(
                        step_lock_until=until,
                        state=session.state if session.state_changed else ports.UNSET,
                    )
                except BaseException:
                    self.abandon()
                    raise
                self._held = True
                return
        await session.flush(state=session.state)

    async def release(self) -> None:
        """End one step attempt. While other attempts are in flight the outcome is written at once; the
        last one leaves the outcome, the state and the release to the run's next commit."""
        async with self._mutex:
            self._count -= 1
            if self._count == 0:
                self._release_pending = True
                return
        await self._session.flush(state=self._session.state)

    def abandon(self) -> None:
        """Drop one reference without writing (a cancelled or evicted attempt); the next commit releases
        the lock if this was the last reference."""
        self._count -= 1
        if self._count == 0:
            self._release_pending = True

    def release_on_end(self) -> bool:
        """At the end of the run: forget every reference (an abandoned attempt) and say whether the final
        commit must clear the lock (True when it is held or referenced)."""
        clear = self._count > 0 or self._held
        self._count = 0
        return clear

    # --- the commit's side (RunSession.flush) -----------------------------------------------------------

    def add_release(self, fields: dict[str, Any]) -> None:
        """Add ``step_lock_until=None`` to a commit's ``fields`` when it is to release the lock."""
        if self._release_pending and self._count == 0 and "step_lock_until" not in fields:
            fields["step_lock_until"] = None

    def committed(self, commit: ports.Commit) -> None:
        """A commit went through: when it cleared the lock, this run no longer holds it."""
        if commit.step_lock_until is None:
            self._release_pending = False
            self._held = False


class BodyCounter:
    """How many step bodies of this run execute now (branches of a join or race run them concurrently);
    a wait whose run cannot unwind while one runs waits beside it (``waiting.Waits``). It also knows the
    step contexts of the attempts in flight, so the heartbeat can cancel them from its thread."""

    def __init__(self) -> None:
        self._running = 0
        self._changed = asyncio.Event()
        self._guarded: set[StepContext] = set()
        self._guard_lock = threading.Lock()
        self._cancelled = False

    @contextmanager
    def guard(self, step: StepContext) -> Iterator[None]:
        """Know ``step`` as an attempt in flight for the ``with`` block; an attempt that starts after
        ``cancel_all`` finds ``step.cancelled`` set at once."""
        with self._guard_lock:
            self._guarded.add(step)
            if self._cancelled:
                step.cancelled.set()
        try:
            yield
        finally:
            with self._guard_lock:
                self._guarded.discard(step)

    def cancel_all(self) -> None:
        """Set ``cancelled`` on every attempt in flight and on every later one (the run lost its lease).
        Thread-safe: called from the lease-keeper thread."""
        with self._guard_lock:
            self._cancelled = True
            steps = list(self._guarded)
        for step in steps:
            step.cancelled.set()

    @property
    def running(self) -> int:
        """The number of step bodies executing now."""
        return self._running

    @contextmanager
    def track(self) -> Iterator[None]:
        """Count one body as running for the duration of the ``with`` block (however it ends)."""
        self._running += 1
        self._changed.set()
        try:
            yield
        finally:
            self._running -= 1
            self._changed.set()

    async def wait_change(self, timeout: float) -> None:
        """Return when a body starts or ends, or after ``timeout`` seconds."""
        self._changed.clear()
        try:
            await asyncio.wait_for(self._changed.wait(), timeout=timeout)
        except TimeoutError:
            pass
