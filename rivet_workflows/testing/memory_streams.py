"""The durable streams of ``MemoryStore`` (``Store.stream_*``, ``watch_stream``; DESIGN.md section 17)."""

from __future__ import annotations

import asyncio
import dataclasses
import threading
from datetime import datetime
from typing import Any

from ..engine.model import errors, ports, serde, watches


@dataclasses.dataclass
class _Row:
    offset: int
    value: Any  # serde.to_json form
    attempt: int | None
    step_key: str | None
    write_key: str | None
    at: datetime
    discarded: bool = False


@dataclasses.dataclass
class _Stream:
    rows: list[_Row] = dataclasses.field(default_factory=list)
    closed: bool = False


def _item(row: _Row) -> ports.StreamItem:
    return ports.StreamItem(row.offset, serde.from_json(row.value), row.attempt, row.discarded, row.at)


class _ChangeWatch(watches.SendWatch):
    """A reader's watch on a ``MemoryStore``: woken by the store's change notification."""

    notifies = True

    def __init__(self, changed: threading.Condition, version: Any) -> None:
        super().__init__()
        self._changed = changed
        self._version = version
        self._seen = version()

    def wait(self, timeout: float) -> bool:
        with self._changed:
            woke = self._changed.wait_for(lambda: self._version() != self._seen, max(timeout, 0.0))
            self._seen = self._version()
        return bool(woke)

    async def wait_async(self, timeout: float) -> bool:
        return await asyncio.to_thread(self.wait, timeout)


class MemoryStreamsMixin:
    """Streams of ``MemoryStore``, kept per actor (dropped with it, like the Django foreign key)."""

    _lock: threading.RLock
    _changed: threading.Condition
    _actors: dict[str, Any]
    now: Any  # MemoryStore.now

    def _init_streams(self) -> None:
        self._streams: dict[str, dict[str, _Stream]] = {}
        self._stream_version = 0

    def _drop_streams(self, actor_id: str) -> None:
        self._streams.pop(actor_id, None)

    def _copy_streams(self, actor_id: str, plan: Any) -> None:
        """Write a fork's stream items and closes (``fork_copy.StreamCopy``; caller holds ``self._lock``)."""
        streams: dict[str, _Stream] = {}
        for source, offset in plan.items:
            row: _Row = source.ref
            stream = streams.setdefault(source.name, _Stream())
            stream.rows.append(_Row(offset, row.value, row.attempt, row.step_key, None, row.at))
        for name in plan.closed:
            streams.setdefault(name, _Stream()).closed = True
        if streams:
            self._streams[actor_id] = streams
            self._stream_changed()

    def _stream_changed(self) -> None:
        self._stream_version += 1
        self._changed.notify_all()

    def _live(self, actor_id: str) -> Any:
        row = self._actors.get(actor_id)
        if row is None:
            raise errors.ActorNotFoundError(f"no actor with id {actor_id!r}", actor_id=actor_id)
        return row

    def stream_write(
        self,
        actor_id: str,
        name: str,
        value: Any,
        *,
        attempt: int | None = None,
        step_key: str | None = None,
        write_key: str | None = None,
    ) -> ports.StreamItem:
        """Append ``value`` (see ``ports.Store.stream_write``)."""
        encoded = serde.to_json(value, where=f"stream {name!r} item")
        with self._lock:
            actor = self._live(actor_id)
            streams = self._streams.setdefault(actor_id, {})
            if write_key is not None:
                for stream in streams.values():
                    for row in stream.rows:
                        if row.write_key == write_key:
                            return _item(row)
            stream = streams.setdefault(name, _Stream())
            if stream.closed or actor.workflow_state in ports.FINISHED_STATES:
                raise errors.StreamClosedError(
                    f"stream {name!r} of actor {actor_id} is closed", actor_id=actor_id, stream=name
                )
            row = _Row(len(stream.rows), encoded, attempt, step_key, write_key, self.now())
            stream.rows.append(row)
            self._stream_changed()
            return _item(row)

    def stream_close(self, actor_id: str, name: str) -> bool:
        """Close the stream ``name``; True when this call closed it."""
        with self._lock:
            self._live(actor_id)
            stream = self._streams.setdefault(actor_id, {}).setdefault(name, _Stream())
            if stream.closed:
                return False
            stream.closed = True
            self._stream_changed()
            return True

    def stream_close_all(self, actor_id: str) -> list[str]:
        """Close every open stream of the actor; the names closed now."""
        with self._lock:
            closed = [n for n, s in sorted(self._streams.get(actor_id, {}).items()) if not s.closed]
            for name in closed:
                self._streams[actor_id][name].closed = True
            if closed:
                self._stream_changed()
            return closed

    def stream_discard(self, actor_id: str, step_key: str, before_attempt: int) -> int:
        """Mark discarded the items of ``step_key``'s attempts before ``before_attempt``."""
        changed = 0
        with self._lock:
            for stream in self._streams.get(actor_id, {}).values():
                for row in stream.rows:
                    if (
                        row.step_key == step_key
                        and row.attempt is not None
                        and row.attempt < before_attempt
                        and not row.discarded
                    ):
                        row.discarded = True
                        changed += 1
            if changed:
                self._stream_changed()
        return changed

    def stream_read(
        self, actor_id: str, name: str, offset: int, limit: int, *, include_discarded: bool = False
    ) -> ports.StreamPage:
        """Up to ``limit`` rows from ``offset`` on (see ``ports.Store.stream_read``)."""
        with self._lock:
            actor = self._live(actor_id)
            stream = self._streams.get(actor_id, {}).get(name) or _Stream()
            start, limit = max(offset, 0), max(limit, 0)
            rows = stream.rows[start : start + limit]
            more = len(stream.rows) > start + limit
            closed = (stream.closed or actor.workflow_state in ports.FINISHED_STATES) and not more
            next_offset = rows[-1].offset + 1 if rows else max(offset, 0)
            items = [_item(r) for r in rows if include_discarded or not r.discarded]
        return ports.StreamPage(items, closed, next_offset)

    def stream_names(self, actor_id: str) -> list[str]:
        """The names of the actor's streams, sorted."""
        with self._lock:
            return sorted(self._streams.get(actor_id, {}))

    def stream_tail(self, actor_id: str, name: str, count: int) -> ports.StreamPage:
        """The last ``count`` items of the stream, discarded included."""
        with self._lock:
            length = len((self._streams.get(actor_id, {}).get(name) or _Stream()).rows)
            return self.stream_read(actor_id, name, max(0, length - count), count, include_discarded=True)

    def watch_stream(self, actor_id: str) -> watches.SendWatch:
        """A watch woken by any change of the store (a write, a close, a commit)."""
        return _ChangeWatch(self._changed, lambda: self._stream_version)
