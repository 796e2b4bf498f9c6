"""How a run's coroutines reach the sync store: an event loop on the run's own thread, store calls inline.

A run is a coroutine (``run.execute``) driven from a sync thread (a Celery worker thread, ``drain``, a local
timer thread) that owns the database connection the store uses, and possibly the transaction a caller
opened around it (a test case's). ``run_sync`` runs the coroutine on an event loop in THAT thread (no loop
thread is started per run), and ``call`` runs a sync function (a store call) inline on it, with the loop
marked as not running for the duration of the call so that a store whose driver refuses to be called
from a running event loop (Django's ``SynchronousOnlyOperation`` guard) accepts it: the call is on the
thread that owns the connection, which is what that guard protects.

Each thread keeps ONE event loop (an ``asyncio.Runner``) from call to call instead of building and closing
one per run (loop creation, its self-pipe and its close were about 3% of a short run's CPU). Each call
still has ``asyncio.run``'s semantics: the coroutine runs to completion in a copy of the caller's context;
at its end, tasks still pending are cancelled and awaited (their exceptions go to the loop's exception
handler), async generators left unfinished are closed, the default executor the run started (sync step
bodies and hooks) is shut down and its threads joined, callbacks and timers still scheduled are dropped
and an exception handler or task factory the run installed is removed, so the next call on the thread
shares nothing with this one but the loop object. A loop that a run left closed or broken is replaced at
the next call; a thread's loop is closed when the thread ends; a forked child never uses (nor closes) the
loops it inherited from its parent.

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
import contextvars
import os
import threading
import weakref
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from asgiref.sync import sync_to_async

T = TypeVar("T")


class _RunLoops(threading.local):
    """Per thread: the loop ``run_sync`` is running on it (None when none) and the thread's runner, whose
    loop every ``run_sync`` call on the thread reuses (None until the first call)."""

    loop: asyncio.AbstractEventLoop | None = None
    runner: asyncio.Runner | None = None


_loops = _RunLoops()

#: loops a forked child inherited from its parent's threads: kept referenced and never closed in the child,
#: since closing one unregisters its self-pipe from the epoll instance the child shares with its parent
_inherited: list[asyncio.AbstractEventLoop] = []


def run_sync(fn: Callable[..., Awaitable[T]], *args: Any, **kwargs: Any) -> T:
    """Run the coroutine ``fn(*args, **kwargs)`` to completion on this thread's event loop and return its
    result (or raise its exception), as ``asyncio.run`` does though the loop is reused by the thread's next
    call: the coroutine runs in a copy of the caller's ``contextvars`` context; tasks still pending at the
    end are cancelled and awaited, async generators left unfinished are closed and the default executor
    the run used is shut down (its threads joined) before this returns (module docstring).

    While it runs, ``call`` from a coroutine of this loop runs its function inline on this thread.
    RuntimeError when this thread already runs an event loop (call it from sync code). Called from a
    function that a run of this thread calls inline (``call_inline``), it runs on a new loop of its own,
    closed at its end.
    """
    if asyncio._get_running_loop() is not None:  # before fn(): no coroutine left never awaited
        raise RuntimeError("run_sync() cannot be called from a running event loop")
    if _loops.loop is not None:  # inside an inline call of this thread's run: its loop is busy
        # A loop factory keeps the thread's current event loop (asyncio.get_event_loop) as it was.
        with asyncio.Runner(loop_factory=asyncio.new_event_loop) as runner:
            return _run(runner, fn, args, kwargs)
    runner = _thread_runner()
    try:
        return _run(runner, fn, args, kwargs)
    finally:
        _end_run(runner)


def _run(runner: asyncio.Runner, fn: Callable[..., Awaitable[T]], args: Any, kwargs: Any) -> T:
    """``runner.run`` of the coroutine in a copy of the caller's context, ``_loops.loop`` set meanwhile."""
    loop = runner.get_loop()
    previous, _loops.loop = _loops.loop, loop
    try:
        # A context of its own per call, as a new Runner would copy: the runner's shared one would carry
        # the context variables one run sets into the next.
        return runner.run(fn(*args, **kwargs), context=contextvars.copy_context())
    finally:
        _loops.loop = previous


def _thread_runner() -> asyncio.Runner:
    """This thread's runner, a new one (with a new loop) on the first call or when the last run left its
    loop closed; its loop is closed when the runner is dropped (the thread ended: ``_close_loop``)."""
    runner = _loops.runner
    if runner is not None and not runner.get_loop().is_closed():
        return runner
    # A loop factory keeps the thread's current event loop (asyncio.get_event_loop) as it was.
    runner = asyncio.Runner(loop_factory=asyncio.new_event_loop)
    weakref.finalize(runner, _close_loop, runner.get_loop(), os.getpid())
    _loops.runner = runner
    return runner


def _end_run(runner: asyncio.Runner) -> None:
    """What ``asyncio.run`` does at the end of a call, the loop left open for the thread's next call.

    A loop that is not an ``asyncio.BaseEventLoop`` (whose bookkeeping the cleanup reads) is closed as
    ``asyncio.run`` closes it; so is a loop the cleanup failed on (its next call gets a new one)."""
    loop = runner.get_loop()
    if not isinstance(loop, asyncio.BaseEventLoop) or loop.is_closed():
        _drop_runner(runner, close=True)
        return
    try:
        _clean(loop)
    except BaseException:
        _drop_runner(runner, close=False)
        raise


def _drop_runner(runner: asyncio.Runner, close: bool) -> None:
    """Forget the thread's runner; ``close``: close it as ``asyncio.run`` does, else just close its loop."""
    if _loops.runner is runner:
        _loops.runner = None
    loop = runner.get_loop()
    if close:
        runner.close()
    elif not loop.is_closed() and not loop.is_running():
        loop.close()


def _clean(loop: asyncio.BaseEventLoop) -> None:
    """Leave ``loop`` as a new one after a run: ``asyncio.runners``' task cancelling, ``shutdown_asyncgens``
    and ``shutdown_default_executor`` done without the flags that make the latter two final, then
    ``close``'s dropping of what is still scheduled. Each step spins the loop only when it has work, so a
    run that leaves nothing behind costs no extra loop iteration. Reads the loop's private bookkeeping
    (``_ready``, ``_scheduled``, ``_asyncgens``, ``_default_executor``: the same in CPython 3.11 to 3.14)."""
    # The order of asyncio.run's: pending tasks are cancelled before the callbacks the run's last loop
    # iteration left ready run (a task woken by them finds itself cancelled).
    pending = asyncio.all_tasks(loop)
    if pending:
        for task in pending:
            task.cancel()
        loop.run_until_complete(asyncio.gather(*pending, return_exceptions=True))
        for task in pending:
            if not task.cancelled() and task.exception() is not None:
                loop.call_exception_handler(
                    {
                        "message": "unhandled exception during asyncio.run() shutdown",
                        "exception": task.exception(),
                        "task": task,
                    }
                )
    agens = loop._asyncgens  # type: ignore[attr-defined]  # the run's: the last run's were closed
    if agens:
        closing = list(agens)
        agens.clear()
        loop.run_until_complete(_close_asyncgens(loop, closing))
    executor = loop._default_executor  # type: ignore[attr-defined]
    if executor is not None:
        # Nothing else runs on the loop now: join its threads here (their DB connections close with
        # them); the loop takes the callbacks they queued below, as shutdown_default_executor lets it.
        loop._default_executor = None  # type: ignore[attr-defined]  # the next run makes a new one
        executor.shutdown(wait=True)
    if loop._ready:  # type: ignore[attr-defined]  # asyncio.run's shutdown steps would have run them
        loop.run_until_complete(_nothing())
    # As close(): what is still scheduled never runs; what the run installed on the loop goes with it.
    for handle in loop._scheduled:  # type: ignore[attr-defined]
        handle.cancel()
    loop._scheduled.clear()  # type: ignore[attr-defined]
    loop._timer_cancelled_count = 0  # type: ignore[attr-defined]
    loop._ready.clear()  # type: ignore[attr-defined]
    if loop.get_exception_handler() is not None:
        loop.set_exception_handler(None)
    if loop.get_task_factory() is not None:
        loop.set_task_factory(None)


async def _nothing() -> None:
    """A coroutine that returns at once: ``run_until_complete`` of it runs the callbacks already ready."""


async def _close_asyncgens(loop: asyncio.AbstractEventLoop, agens: list[Any]) -> None:
    """``aclose`` the async generators ``agens`` together, as ``loop.shutdown_asyncgens`` does; an error
    closing one goes to the loop's exception handler."""
    results = await asyncio.gather(*[agen.aclose() for agen in agens], return_exceptions=True)
    for result, agen in zip(results, agens, strict=True):
        if isinstance(result, Exception):
            loop.call_exception_handler(
                {
                    "message": f"an error occurred during closing of asynchronous generator {agen!r}",
                    "exception": result,
                    "asyncgen": agen,
                }
            )


def _close_loop(loop: asyncio.AbstractEventLoop, pid: int) -> None:
    """Close a thread's loop when its runner is dropped (the thread ended, or at exit). In a forked child
    the loop is the parent's: closing it would unregister its self-pipe from the epoll instance parent and
    child share, so it is kept, unused, in ``_inherited`` instead (also out of reach of its ``__del__``)."""
    if os.getpid() != pid:
        _inherited.append(loop)
    elif not loop.is_closed() and not loop.is_running():
        loop.close()


def _forget_parent_loops() -> None:
    """In a forked child (a Celery prefork worker): this thread's next ``run_sync`` makes a loop of its own."""
    _loops.runner = None


if hasattr(os, "register_at_fork"):  # POSIX
    os.register_at_fork(after_in_child=_forget_parent_loops)


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
