"""How a run waits: in memory when the wait is short, beside running step bodies, warm on a queue, or by
unwinding with ``WaitSignal`` so the actor sleeps in the store (ENGINE-SEMANTICS.md section 5)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from datetime import datetime
from typing import TYPE_CHECKING

from ..model import errors

if TYPE_CHECKING:
    from ..model.roles import SessionRole


class Waits:
    """The waits of one run. ``live_until`` (store-clock instant or None) is the run's in-memory budget:
    a wait ending before it and shorter than ``settings.live_wait_threshold`` is done in memory; ``warm``
    (seconds, 0: never) is how long a queue wait that finds no message listens for one before the run
    unwinds (``Store.wait_for_messages``; the Celery task sets it from ``settings.warm_wait``)."""

    def __init__(self, session: SessionRole, live_until: datetime | None, warm: float = 0.0) -> None:
        self._session = session
        self.live_until = live_until
        self.warm = warm

    def can_wait_live(self, now: datetime, deadline: datetime | None) -> bool:
        """True when a wait until ``deadline`` is short enough to do in memory (``live_wait_threshold``)."""
        if deadline is None or self.live_until is None or deadline > self.live_until:
            return False
        return (deadline - now).total_seconds() < self._session.settings.live_wait_threshold

    async def wait(
        self,
        deadline: datetime | None,
        queue_names: frozenset[str] = frozenset(),
        check: Callable[[], Awaitable[bool]] | None = None,
    ) -> None:
        """Wait until ``deadline`` (or until ``check()`` is true) in memory when short, else unwind the run.

        Returns when the deadline passed or ``check()`` reported work, or when a warm queue wait heard of
        a message (the caller looks again); raises ``WaitSignal(deadline, queue_names)`` when the wait is
        too long for this run. The run's pending writes are committed before it waits in memory. The
        workflow's timeout (``session.deadline_at``) caps the wait: the actor sleeps until it at the latest,
        and ``WorkflowTimeoutError`` is raised when the wait reaches it (DESIGN.md section 12).
        """
        session = self._session
        limit = session.deadline_at
        if limit is None or session.rolling_back:
            await self._wait(deadline, queue_names, check)
            return
        # The workflow's timeout bounds every wait: the actor is due at it (wake_at = min(wake_at, it)),
        # and a wait it cuts short raises WorkflowTimeoutError into the workflow.
        session.check_deadline(session.anchored_now() or await session.now())
        if deadline is not None and deadline < limit:
            await self._wait(deadline, queue_names, check)
            return
        await self._wait(limit, queue_names, check)
        session.check_deadline(await session.now())

    async def _wait(
        self,
        deadline: datetime | None,
        queue_names: frozenset[str],
        check: Callable[[], Awaitable[bool]] | None,
    ) -> None:
        session = self._session
        now = session.anchored_now() or await session.now()
        if not self.can_wait_live(now, deadline):
            # A warm wait only when nothing else of this run is executing (it holds the store's thread).
            if (
                session.bodies.running == 0
                and queue_names
                and check is not None
                and await self._warm_wait(now, deadline, queue_names)
            ):
                return
            if deadline is None or session.bodies.running == 0:
                raise errors.WaitSignal(deadline, queue_names)
            # Another branch's step body is running, so the run cannot unwind before it ends anyway: wait
            # alongside it, so that a race's timeout branch whose deadline passes first still wins.
            await self._wait_beside_bodies(deadline, queue_names, check, now)
            return
        await session.flush_pending()
        poll = max(session.settings.poll_interval, 0.001)
        while True:
            remaining = (deadline - now).total_seconds()
            if remaining <= 0:
                return
            if check is None:
                await asyncio.sleep(remaining)
            else:
                await asyncio.sleep(min(remaining, poll))
                if await check():
                    return
            now = await session.now()

    async def _wait_beside_bodies(
        self,
        deadline: datetime,
        queue_names: frozenset[str],
        check: Callable[[], Awaitable[bool]] | None,
        now: datetime,
    ) -> None:
        """Wait until ``deadline`` (or ``check()``) while step bodies of this run are executing; raise
        ``WaitSignal`` once the last of them has ended with the deadline still ahead."""
        session = self._session
        await session.flush_pending()
        while session.bodies.running > 0:
            remaining = (deadline - now).total_seconds()
            if remaining <= 0:
                return
            if check is not None:
                remaining = min(remaining, max(session.settings.poll_interval, 0.001))
            await session.bodies.wait_change(remaining)
            if check is not None and await check():
                return
            now = await session.now()
        if deadline <= now:
            return
        raise errors.WaitSignal(deadline, queue_names)

    async def _warm_wait(self, now: datetime, deadline: datetime | None, queue_names: frozenset[str]) -> bool:
        """Keep the lease for up to ``warm`` seconds listening for a message (``Store.wait_for_messages``)
        instead of unwinding at once; True when one arrived (the caller takes it in this run).

        The run's pending writes (the last step's outcome, the step lock release) are committed first, so
        nothing rides on an idle run. Only while the run's live budget lasts and never past ``deadline``.
        False (the run unwinds and releases as usual; a message arriving later is found by the release's
        re-check or wakes the actor) when the store cannot wait or the window passed.
        """
        if self.warm <= 0 or self.live_until is None:
            return False
        window = min(self.warm, (self.live_until - now).total_seconds())
        if deadline is not None:
            window = min(window, (deadline - now).total_seconds())
        if window <= 0:
            return False
        session = self._session
        await session.flush_pending()
        store = session.store
        return bool(
            await session.call(store.wait_for_messages, session.actor_id, sorted(queue_names), window)
        )
