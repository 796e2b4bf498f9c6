"""The durable streams of ``DjangoStore`` on StreamItem (DESIGN.md section 17): appends at dense offsets under
the actor's row lock, a closing row, discarding a failed attempt's items, and page reads.

A mixin: the host class provides ``using``, ``now()``, ``_atomic()``, ``_actors()`` and ``_serialised()``.
Waiting readers poll (``watch_stream`` default) on this portable store; ``PostgresStore`` NOTIFYs them
(``_notify_stream``).
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Any

from django.db import IntegrityError
from django.db.models import Max

from .. import models
from ..engine.model import errors, fork_copy, ports, serde
from . import mapper


def stream_channel(actor_id: str) -> str:
    """The NOTIFY channel of the readers of ``actor_id``'s streams (an actor id is 32 hex digits)."""
    return f"rivet_stream_{actor_id}"


def _item(row: Any) -> ports.StreamItem:
    return ports.StreamItem(
        int(row.offset), serde.from_json(row.value), row.attempt, bool(row.discarded), mapper.utc(row.at)
    )


class StreamStorage:
    """``stream_*`` of ``ports.Store`` on the ORM."""

    # provided by the host class (DjangoStore)
    using: str
    now: Callable[[], datetime]
    _atomic: Callable[[], Any]
    _actors: Callable[[], Any]
    _serialised: Callable[..., Any]

    def _items(self) -> Any:
        return models.StreamItem.objects.using(self.using)

    def _notify_stream(self, actor_id: str) -> None:
        """Wake the readers waiting on ``actor_id``'s streams (when the transaction commits). Nothing here:
        readers of the portable store poll."""

    def _stream_actor(self, actor_id: str) -> dict:
        row = (
            self._actors()
            .select_for_update()
            .filter(pk=actor_id)
            .values("workflow_state", "destroyed")
            .first()
        )
        if row is None or row["destroyed"]:
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
        """Append ``value`` at the next offset in its own transaction (``ports.Store.stream_write``)."""
        encoded = serde.to_json(value, where=f"stream {name!r} item")
        for retry in range(5):
            try:
                with self._serialised(actor_id), self._atomic():
                    return self._append(actor_id, name, encoded, attempt, step_key, write_key)
            except IntegrityError:  # a concurrent writer took the offset (SQLite has no row lock): again
                if retry == 4:
                    raise
        raise AssertionError("unreachable")

    def _append(
        self,
        actor_id: str,
        name: str,
        encoded: Any,
        attempt: int | None,
        step_key: str | None,
        write_key: str | None,
    ) -> ports.StreamItem:
        actor = self._stream_actor(actor_id)
        if write_key is not None:
            done = self._items().filter(actor_id=actor_id, write_key=write_key).first()
            if done is not None:
                return _item(done)
        last = self._items().filter(actor_id=actor_id, name=name).order_by("-offset").first()
        if (last is not None and last.closes) or actor["workflow_state"] in ports.FINISHED_STATES:
            raise errors.StreamClosedError(
                f"stream {name!r} of actor {actor_id} is closed", actor_id=actor_id, stream=name
            )
        row = self._items().create(
            actor_id=actor_id,
            name=name,
            offset=0 if last is None else last.offset + 1,
            value=encoded,
            attempt=attempt,
            step_key=step_key,
            write_key=write_key,
            at=self.now(),
        )
        self._notify_stream(actor_id)
        return _item(row)

    def _plan_fork_streams(self, source_id: str, entries: list[ports.EntryRecord]) -> fork_copy.StreamCopy:
        """Which of ``source_id``'s stream items a fork with history ``entries`` starts with
        (``fork_copy.plan_stream_copy``); read in the fork's transaction."""
        found = (
            self._items()
            .filter(actor_id=source_id, closes=False)
            .only("id", "name", "offset", "step_key", "discarded")
        )
        rows = [
            fork_copy.StreamRow(r.name, int(r.offset), r.step_key, bool(r.discarded), r.pk) for r in found
        ]
        return fork_copy.plan_stream_copy(entries, rows)

    def _copy_fork_streams(self, actor_id: str, plan: fork_copy.StreamCopy, now: datetime) -> None:
        """Write a fork's stream items (values read from the source rows) and closing rows, one bulk insert."""
        if not plan.items and not plan.closed:
            return
        sources = self._items().in_bulk([row.ref for row, _ in plan.items])
        copies = [
            models.StreamItem(
                actor_id=actor_id,
                name=row.name,
                offset=offset,
                value=sources[row.ref].value,
                attempt=sources[row.ref].attempt,
                step_key=row.step_key,
                at=sources[row.ref].at,
            )
            for row, offset in plan.items
        ]
        ends = {row.name: offset + 1 for row, offset in plan.items}
        copies += [
            models.StreamItem(actor_id=actor_id, name=name, offset=ends.get(name, 0), closes=True, at=now)
            for name in plan.closed
        ]
        self._items().bulk_create(copies)

    def stream_close(self, actor_id: str, name: str) -> bool:
        """Write the closing row of the stream ``name`` unless it has one; True when this call closed it."""
        with self._serialised(actor_id), self._atomic():
            self._stream_actor(actor_id)
            return self._close(actor_id, name, self.now())

    def _close(self, actor_id: str, name: str, now: datetime) -> bool:
        last = self._items().filter(actor_id=actor_id, name=name).order_by("-offset").first()
        if last is not None and last.closes:
            return False
        self._items().create(
            actor_id=actor_id, name=name, offset=0 if last is None else last.offset + 1, closes=True, at=now
        )
        self._notify_stream(actor_id)
        return True

    def stream_close_all(self, actor_id: str) -> list[str]:
        """Close every open stream of the actor (the workflow finished); the names closed now."""
        names = self.stream_names(actor_id)
        if not names:
            return []
        with self._serialised(actor_id), self._atomic():
            try:
                self._stream_actor(actor_id)
            except errors.ActorNotFoundError:
                return []
            now = self.now()
            return [name for name in names if self._close(actor_id, name, now)]

    def stream_discard(self, actor_id: str, step_key: str, before_attempt: int) -> int:
        """Mark discarded the items of ``step_key``'s attempts before ``before_attempt``."""
        with self._atomic():
            changed = (
                self._items()
                .filter(actor_id=actor_id, step_key=step_key, attempt__lt=before_attempt, discarded=False)
                .update(discarded=True)
            )
            if changed:
                self._notify_stream(actor_id)
        return changed

    def stream_read(
        self, actor_id: str, name: str, offset: int, limit: int, *, include_discarded: bool = False
    ) -> ports.StreamPage:
        """Up to ``limit`` rows from ``offset`` on, in one transaction (``ports.Store.stream_read``)."""
        offset = max(int(offset), 0)
        with self._atomic():
            actor = self._actors().filter(pk=actor_id, destroyed=False).values("workflow_state").first()
            if actor is None:
                raise errors.ActorNotFoundError(f"no actor with id {actor_id!r}", actor_id=actor_id)
            rows = list(
                self._items()
                .filter(actor_id=actor_id, name=name, offset__gte=offset)
                .order_by("offset")[: max(int(limit), 0) + 1]
            )
        closed = actor["workflow_state"] in ports.FINISHED_STATES
        if rows and rows[-1].closes:
            closed = True
            rows.pop()
        more = len(rows) > max(int(limit), 0)
        rows = rows[: max(int(limit), 0)]
        closed = closed and not more
        next_offset = rows[-1].offset + 1 if rows else offset
        items = [_item(r) for r in rows if include_discarded or not r.discarded]
        return ports.StreamPage(items, closed, next_offset)

    def stream_names(self, actor_id: str) -> list[str]:
        """The names of the actor's streams, sorted."""
        return sorted(set(self._items().filter(actor_id=actor_id).values_list("name", flat=True)))

    def stream_tail(self, actor_id: str, name: str, count: int) -> ports.StreamPage:
        """The last ``count`` items of the stream (discarded included), oldest first."""
        top = self._items().filter(actor_id=actor_id, name=name, closes=False).aggregate(m=Max("offset"))["m"]
        start = 0 if top is None else max(0, top + 1 - count)
        return self.stream_read(actor_id, name, start, count, include_discarded=True)
