"""How a run's coroutines reach the sync store: an event loop on the run's own thread, store calls inline.

A run is a coroutine (``run.execute``) driven from a sync thread (a Celery worker thread, ``drain``, a local
timer thread) that owns the database connection the store uses, and possibly the transaction a caller
opened around it (a test case's). ``run_sync`` runs the coroutine on an event loop in THAT thread (no loop
thread is started per run), and ``call`` runs a sync function (a store call) inline on it, with the loop
marked as not running for the duration of the call so that a store whose driver refuses to be called
from a running event loop (Django's ``SynchronousOnlyOperation`` guard) accepts it: the call is on the
thread that owns the connection, which is what that guard protects.

This replaces ``asgiref``'s ``async_to_sync``/``sync_to_async(thread_sensitive=True)`` pair on the hot path,
which ran each run's loop on a new thread and hopped back to the owning thread for every store call (two
thread switches per step; measured at about a third of the process's CPU per step on PostgreSQL). The
semantics are the same: every store call of a run runs on the calling thread, in order, on its connection.
An inline call blocks the run's loop while it runs; the run's other coroutines (a join's branches, an
async step body's I/O) wait for it as they waited for the hop before. Sync step bodies and hooks still run
on the loop's executor threads (``sync_to_async(thread_sensitive=False)``), never on the loop.

Outside a ``run_sync`` loop (an async Django view awaiting a client twin) ``call`` falls back to
``asgiref``'s ``sync_to_async(thread_sensitive=True)``.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from asgiref.sync import sync_to_async

T = TypeVar("T")


class _RunLoops(threading.local):
    """Per thread: the loop ``run_sync`` is running on it (None when none)."""

    loop: asyncio.AbstractEventLoop | None = None


_loops = _RunLoops()


def run_sync(fn: Callable[..., Awaitable[T]], *args: Any, **kwargs: Any) -> T:
    """Run the coroutine ``fn(*args, **kwargs)`` to completion on a new event loop in this thread and return
    its result (or raise its exception), as ``asyncio.run`` does: tasks still pending at the end are
    cancelled, async generators and the loop's default executor are shut down, the loop is closed.

    While it runs, ``call`` from a coroutine of this loop runs its function inline on this thread.
    RuntimeError when this thread already runs an event loop (call it from sync code).
    """
    # A loop factory keeps the thread's current event loop (asyncio.get_event_loop) as it was.
    with asyncio.Runner(loop_factory=asyncio.new_event_loop) as runner:
        loop = runner.get_loop()
        previous, _loops.loop = _loops.loop, loop
        try:
            return runner.run(fn(*args, **kwargs))
        finally:
            _loops.loop = previous


def in_run_loop() -> bool:
    """True when the caller is a coroutine of the ``run_sync`` loop of this thread (``call`` runs inline)."""
    loop = _loops.loop
    if loop is None:
        return False
    try:
        return asyncio.get_running_loop() is loop
    except RuntimeError:
        return False


def call_inline(fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    """Call the sync ``fn`` on this thread from a coroutine of its running loop, the loop marked as not
    running meanwhile (``asyncio._set_running_loop``), so code that refuses to run inside an event loop
    (Django's async-unsafe guard) runs. Returns its result; its exceptions propagate."""
    loop = asyncio.get_running_loop()
    asyncio._set_running_loop(None)
    try:
        return fn(*args, **kwargs)
    finally:
        asyncio._set_running_loop(loop)


async def call(fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    """Await the sync ``fn(*args, **kwargs)`` on the thread that owns the store's connection: inline in a
    ``run_sync`` loop (``call_inline``), else ``sync_to_async(fn, thread_sensitive=True)``."""
    if in_run_loop():
        return call_inline(fn, *args, **kwargs)
    return await sync_to_async(fn, thread_sensitive=True)(*args, **kwargs)


def twin(method: Callable[..., Any]) -> Callable[..., Any]:
    """The ``a``-prefixed async twin of a sync client method: runs it with ``call`` (inline in a run's
    loop, else ``sync_to_async``)."""

    async def run(self: Any, *args: Any, **kwargs: Any) -> Any:
        return await call(method, self, *args, **kwargs)

    run.__name__ = f"a{method.__name__}"
    run.__doc__ = f"Async twin of ``{method.__name__}``."
    return run
