"""What a waiting send waits on between two looks at its message: a ``SendWatch`` (docs/howto/calling.md).

A store hands one out per waiting send (``Store.watch_sends``) before the message is stored, so nothing the
workflow does after the send is missed. ``SendWatch`` itself is the polling watch of a store that cannot
tell senders anything (its pause is a sleep); ``NotifiedWatch`` is woken from another thread (PostgreSQL's
listener thread) and holds neither a thread nor a database connection while an async sender awaits it.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable
from typing import Any


class SendWatch:
    """A waiting send's pause on a store that tells senders nothing: ``wait`` sleeps out the window and says
    False (nothing was heard); the client looks at the message after each window, on a backoff.

    ``notifies`` is False here: the caller sets the windows and checks on its own whether the workflow ended.
    Use as a context manager (``close`` on exit)."""

    #: True when ``wait`` returns early on the completion of the message and on the end of the workflow
    notifies = False

    def __init__(self) -> None:
        self.message_id: str | None = None

    def expect(self, message_id: str) -> None:
        """The message the sender waits on (known once stored; until then every notification counts)."""
        self.message_id = str(message_id)

    def wait(self, timeout: float) -> bool:
        """Block up to ``timeout`` seconds; True when woken by a notification about the message or the
        actor (look again now), False when the window passed."""
        time.sleep(max(timeout, 0.0))
        return False

    async def wait_async(self, timeout: float) -> bool:
        """``wait`` for a coroutine: holds no thread while it waits."""
        await asyncio.sleep(max(timeout, 0.0))
        return False

    def close(self) -> None:
        """Stop watching (idempotent)."""

    def __enter__(self) -> SendWatch:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class NotifiedWatch(SendWatch):
    """A watch woken by ``notify`` from any thread: a completion of its message, the end of the workflow or
    the actor's destruction (docs/howto/calling.md). ``on_close`` (if given) runs once on ``close``: the
    store stops listening for it there."""

    notifies = True

    def __init__(self, on_close: Callable[[NotifiedWatch], Any] | None = None) -> None:
        super().__init__()
        self._flag = threading.Event()
        self._lock = threading.Lock()
        self._loops: list[tuple[asyncio.AbstractEventLoop, asyncio.Event]] = []
        self._on_close = on_close

    def notify(self, payload: str | None) -> None:
        """Wake the sender. ``payload``: the id of the completed message (another message of the same actor
        is ignored), ``""`` for the end of the workflow or the actor, None to make it look whatever happened
        (the store may have missed notifications, e.g. while its listening connection was reconnecting)."""
        if payload and self.message_id is not None and payload != self.message_id:
            return
        self._flag.set()
        with self._lock:
            loops = list(self._loops)
        for loop, event in loops:
            try:
                loop.call_soon_threadsafe(event.set)
            except RuntimeError:  # that loop closed: its sender is gone
                pass

    def wait(self, timeout: float) -> bool:
        woke = self._flag.wait(max(timeout, 0.0))
        # a notification arriving after this clear is kept for the next wait; one before it is covered by
        # the look the caller makes next (NOTIFY is delivered after the commit it announces)
        self._flag.clear()
        return woke

    async def wait_async(self, timeout: float) -> bool:
        event = asyncio.Event()
        entry = (asyncio.get_running_loop(), event)
        with self._lock:
            self._loops.append(entry)
        try:
            if not self._flag.is_set():
                try:
                    await asyncio.wait_for(event.wait(), max(timeout, 0.0))
                except TimeoutError:
                    pass
            woke = self._flag.is_set()
            self._flag.clear()
            return woke
        finally:
            with self._lock:
                self._loops.remove(entry)

    def close(self) -> None:
        on_close, self._on_close = self._on_close, None
        if on_close is not None:
            on_close(self)
