"""Durable streams: the writers of workflow code (``ctx.stream``) and of step bodies (``step.stream``), and
the readers (``ActorHandle.read_stream``/``aread_stream``) (DESIGN.md section 17, docs/howto/streams.md).

Invariants:

* A write of workflow code is a history entry of kind ``stream`` at ``{name}~w{n}`` (a close at
  ``{name}~c{n}``; ``n`` counts the writes to that stream in the scope, so the same code reaches the same
  keys on every replay). Its item is written first with the entry's key (plus the replay generation) as
  ``write_key``, then the entry is recorded with the run's next commit: a crash between the two finds the
  item on the next run, and a replay that finds the entry writes nothing: exactly once.
* A write of a step body is committed at once (before the step ends) with the attempt and the step's key;
  when an attempt does not complete its items are marked ``discarded`` (the attempt's failure, the next
  attempt's start after a crash, a lost worker's exhaustion), so a reader that skips discarded items sees
  each item of the completing attempt once.
* A stream is closed by ``close()`` or when the workflow finishes (the final commit's run closes the
  streams it knows of; a finished workflow's streams read closed in any case).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import functools
import time
from collections.abc import AsyncIterator, Callable, Iterator
from typing import TYPE_CHECKING, Any

from ..actor import bridge
from ..model import errors, ports, serde
from .history import check_name as check_entry_name

if TYPE_CHECKING:
    from ..model.roles import SessionRole

#: how many rows a reader fetches per look
PAGE_SIZE = 500
#: how long a reader woken by notifications keeps its database connection after the last item (seconds):
#: a stream being written wakes it every few milliseconds, and opening a connection costs more than a look
HOLD_CONNECTION_SECONDS = 1.0
#: the longest a reader sleeps between two looks on a store that cannot wake it (seconds)
POLL_SECONDS = 0.05
#: the longest a reader waits on a notifying store before it looks anyway (a workflow that ended without
#: closing its streams through this engine, e.g. cancelled by an operator, is noticed so; seconds)
NOTIFIED_LOOK_SECONDS = 2.0

_writer_threads = concurrent.futures.ThreadPoolExecutor(max_workers=4, thread_name_prefix="rivet-stream")


#: the longest stream name (characters): the stores keep it in a 200-character column
MAX_STREAM_NAME = 200


def check_name(name: object) -> str:
    """A stream name: an entry name (``history.check_name``) of at most ``MAX_STREAM_NAME`` characters;
    ``ValueError`` otherwise (the same on every store: a longer name is refused before any write)."""
    checked = check_entry_name(name, "stream")
    if len(checked) > MAX_STREAM_NAME:
        raise ValueError(f"stream name is {len(checked)} characters long; at most {MAX_STREAM_NAME}")
    return checked


def write_entry_name(name: str, n: int) -> str:
    """The history entry name of the ``n``-th write (0-based) to the stream ``name`` in a scope."""
    return f"{name}~w{n}"


def close_entry_name(name: str, n: int) -> str:
    """The history entry name of the ``n``-th ``ctx.stream(name).close()`` (0-based) in a scope."""
    return f"{name}~c{n}"


class WorkflowStream:
    """``ctx.stream(name)``: write to (and close) the actor's durable stream ``name`` from workflow code.

    Each ``write``/``close`` is recorded in the history like a step (exactly once: a replay writes nothing
    again) and must be awaited before the next primitive of the same scope."""

    def __init__(self, ctx: Any, name: str) -> None:
        self._ctx = ctx
        self.name = check_name(name)

    def write(self, value: Any) -> Any:
        """Append ``value`` (any value the serializer takes) to the stream; awaitable, returns its offset.
        ``SerializationError``/``PayloadTooLargeError`` for a value that cannot be stored,
        ``StreamClosedError`` when the stream was closed."""
        counts = self._ctx._stream_writes
        n = counts.get(self.name, 0)
        counts[self.name] = n + 1
        entry_name = write_entry_name(self.name, n)
        return self._ctx._run(
            entry_name,
            "stream write",
            lambda key: _record_write(self._ctx, key, entry_name, self.name, value),
        )

    def close(self) -> Any:
        """Close the stream (readers end after its last item); awaitable, recorded once. Closing a closed
        stream does nothing."""
        counts = self._ctx._stream_writes
        n = counts.get(f"~{self.name}", 0)  # "~" starts no stream name: closes count apart
        counts[f"~{self.name}"] = n + 1
        entry_name = close_entry_name(self.name, n)
        return self._ctx._run(
            entry_name, "stream close", lambda key: _record_close(self._ctx, key, entry_name, self.name)
        )

    def __repr__(self) -> str:
        return f"<WorkflowStream {self.name!r}>"


async def _record_write(ctx: Any, key: str, entry_name: str, name: str, value: Any) -> int:
    session = ctx._session
    history = session.history
    entry = history.visit(key, "stream", entry_name)
    if entry is not None:
        return int(entry.data["offset"])
    if session.rolling_back:
        raise errors.RollbackStop()
    history.check_scope(ctx._scope, before=key, before_kind="stream")
    value = serde.roundtrip(
        value, where=f"stream {name!r} item", max_bytes=session.settings.max_payload_bytes
    )
    generation = session.actor.replay_generation
    write_key = f"{key}#{generation}" if generation else key
    item = await session.call(
        functools.partial(session.store.stream_write, session.actor_id, name, value, write_key=write_key)
    )
    entry = history.new(key, "stream", {"stream": name, "offset": item.offset}, now=session.stamp())
    entry.status, entry.completed_at = ports.ENTRY_COMPLETED, entry.created_at
    session.streams.add(name)
    push(session, name, item)
    return item.offset


async def _record_close(ctx: Any, key: str, entry_name: str, name: str) -> None:
    session = ctx._session
    history = session.history
    entry = history.visit(key, "stream", entry_name)
    if entry is not None:
        return
    if session.rolling_back:
        raise errors.RollbackStop()
    history.check_scope(ctx._scope, before=key, before_kind="stream")
    await session.call(session.store.stream_close, session.actor_id, name)
    entry = history.new(key, "stream", {"stream": name, "closed": True}, now=session.stamp())
    entry.status, entry.completed_at = ports.ENTRY_COMPLETED, entry.created_at
    session.streams.add(name)


def push(session: SessionRole, name: str, item: ports.StreamItem) -> None:
    """Tell the actor's WebSocket subscribers about ``item`` (best effort, never raises)."""
    session.runtime.push_stream(session.actor_id, name, item.offset, serde.to_json(item.value))


class StepStream:
    """``step.stream(name)``: write to the actor's durable stream ``name`` from a step body.

    Each write is committed at once in its own transaction (a reader sees it while the step still runs)
    and records the attempt; the items of an attempt that does not complete are marked discarded. A step
    body runs at least once: a retried attempt writes its items again, at new offsets."""

    def __init__(self, step: Any, name: str) -> None:
        self._step = step
        self.name = check_name(name)

    def _write_call(self, value: Any) -> Callable[[], ports.StreamItem]:
        session = self._step._session
        value = serde.roundtrip(
            value, where=f"stream {self.name!r} item", max_bytes=session.settings.max_payload_bytes
        )
        return functools.partial(
            session.store.stream_write,
            session.actor_id,
            self.name,
            value,
            attempt=self._step.attempt,
            step_key=self._step.location,
        )

    def _written(self, item: ports.StreamItem) -> int:
        self._step.streams_written.add(self.name)
        push(self._step._session, self.name, item)
        return item.offset

    def write(self, value: Any) -> int:
        """Append ``value`` now; returns its offset. Callable from a sync body (its thread) and from an
        async body (the write then runs on a helper thread while the loop waits: prefer ``awrite`` there).
        ``SerializationError``/``PayloadTooLargeError``, ``StreamClosedError``."""
        call = self._write_call(value)
        if self._step._session.store.inline_calls:
            return self._written(call())
        try:
            asyncio.get_running_loop()
        except RuntimeError:  # a sync body's thread: call the store here
            return self._written(call())
        if bridge.in_run_loop():  # an async body on the run's loop, which owns the store's connection
            return self._written(bridge.call_inline(call))
        return self._written(_writer_threads.submit(call).result())

    async def awrite(self, value: Any) -> int:
        """``write`` for an async body: the store call runs off the event loop; returns the offset."""
        call = self._write_call(value)
        return self._written(await self._step._session.call(call))

    def __repr__(self) -> str:
        return f"<StepStream {self.name!r} attempt={self._step.attempt}>"


async def discard_attempts(session: SessionRole, step_key: str, before_attempt: int) -> None:
    """Mark discarded the items the step at ``step_key`` wrote in attempts before ``before_attempt``."""
    await session.call(session.store.stream_discard, session.actor_id, step_key, before_attempt)


def streams_of(entries: Any) -> set[str]:
    """The stream names a history mentions: recorded writes and closes, and steps that wrote items."""
    names: set[str] = set()
    for entry in entries:
        data = entry.data or {}
        if entry.kind == "stream" and "stream" in data:
            names.add(data["stream"])
        elif entry.kind == "step" and data.get("streams"):
            names.update(data["streams"])
    return names


# --- readers --------------------------------------------------------------------------------------------


def _window(watch: Any, deadline: float | None) -> float:
    remaining = None if deadline is None else max(0.0, deadline - time.monotonic())
    cap = NOTIFIED_LOOK_SECONDS if watch.notifies else POLL_SECONDS
    return cap if remaining is None else min(cap, remaining)


def _check(name: str, offset: int) -> None:
    if not isinstance(offset, int) or isinstance(offset, bool) or offset < 0:
        raise ValueError(f"offset must be an int >= 0, got {offset!r}")
    check_name(name)


def follow(
    store: ports.Store,
    actor_id: str,
    name: str,
    offset: int = 0,
    idle: float | None = None,
    include_discarded: bool = False,
) -> Iterator[ports.StreamItem | None]:
    """The items of the stream from ``offset`` on as they are written, ending when the stream is closed;
    ``None`` is yielded each time ``idle`` seconds (None: never) pass with nothing new (the caller stops
    there, or sends a keep-alive and goes on). ``ActorNotFoundError``, ``ValueError``."""
    _check(name, offset)
    watch = store.watch_stream(actor_id)
    idle_since = 0.0
    try:
        deadline = None if idle is None else time.monotonic() + idle
        while True:
            page = store.stream_read(actor_id, name, offset, PAGE_SIZE, include_discarded=include_discarded)
            offset = page.next_offset
            yield from page.items
            if page.closed:
                return
            if page.items:
                deadline = None if idle is None else time.monotonic() + idle
                continue
            if deadline is not None and time.monotonic() >= deadline:
                yield None
                deadline = time.monotonic() + idle  # type: ignore[operator]
                continue
            if watch.notifies and not idle_since:
                # a stream being written wakes its reader often: keep the connection for a while, and give
                # it back only once the stream went quiet (a waiting reader then holds none)
                idle_since = time.monotonic()
            if not watch.notifies or time.monotonic() - idle_since >= HOLD_CONNECTION_SECONDS:
                store.release_connection()
                window = _window(watch, deadline)
            else:
                window = min(_window(watch, deadline), HOLD_CONNECTION_SECONDS)
            if watch.wait(window):
                idle_since = 0.0
    finally:
        watch.close()


async def afollow(
    store: ports.Store,
    call: Callable[..., Any],
    actor_id: str,
    name: str,
    offset: int = 0,
    idle: float | None = None,
    include_discarded: bool = False,
) -> AsyncIterator[ports.StreamItem | None]:
    """``follow`` as an async iterator: store calls go through ``call`` (a thread hop) and the wait holds
    no thread."""
    _check(name, offset)
    watch = await call(store.watch_stream, actor_id)
    try:
        deadline = None if idle is None else time.monotonic() + idle
        while True:
            page = await call(
                functools.partial(
                    store.stream_read, actor_id, name, offset, PAGE_SIZE, include_discarded=include_discarded
                )
            )
            offset = page.next_offset
            for item in page.items:
                yield item
            if page.closed:
                return
            if page.items:
                deadline = None if idle is None else time.monotonic() + idle
                continue
            if deadline is not None and time.monotonic() >= deadline:
                yield None
                deadline = time.monotonic() + idle  # type: ignore[operator]
                continue
            await watch.wait_async(_window(watch, deadline))
    finally:
        watch.close()


def read_stream(
    store: ports.Store,
    actor_id: str,
    name: str,
    offset: int = 0,
    timeout: float | None = None,
    include_discarded: bool = False,
) -> Iterator[ports.StreamItem]:
    """The items of the stream from ``offset`` on, waiting for new ones until the stream is closed (then
    it ends) or ``timeout`` seconds pass with nothing new (None: no limit). ``ActorNotFoundError``,
    ``ValueError`` (checked at once, before the first item is asked for)."""
    _check(name, offset)
    return _until_idle(follow(store, actor_id, name, offset, timeout, include_discarded))


def _until_idle(items: Iterator[ports.StreamItem | None]) -> Iterator[ports.StreamItem]:
    with contextlib.closing(items):  # type: ignore[type-var]
        for item in items:
            if item is None:
                return
            yield item


async def aread_stream(
    store: ports.Store,
    call: Callable[..., Any],
    actor_id: str,
    name: str,
    offset: int = 0,
    timeout: float | None = None,
    include_discarded: bool = False,
) -> AsyncIterator[ports.StreamItem]:
    """``read_stream`` as an async iterator (``afollow`` until it is idle for ``timeout`` seconds)."""
    items = afollow(store, call, actor_id, name, offset, timeout, include_discarded)
    try:
        async for item in items:
            if item is None:
                return
            yield item
    finally:
        await items.aclose()
