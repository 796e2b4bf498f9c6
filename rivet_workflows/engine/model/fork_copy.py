"""What a fork carries over besides its copied history (DESIGN.md section 19): the search attributes and the
durable stream items those copied entries wrote. Pure functions the stores' ``fork_actor`` call inside
their one write, so every store copies the same (``MemoryStore``, ``DjangoStore``, ``PostgresStore``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from . import ports

__all__ = ["StreamCopy", "StreamRow", "copied_attributes", "plan_stream_copy"]

#: the entry kinds whose writes a fork carries (``ctx.set_attributes``; ``ctx.stream`` write/close; steps)
_ATTRIBUTES, _STREAM, _STEP = "attributes", "stream", "step"


def copied_attributes(entries: list[ports.EntryRecord]) -> dict[str, Any]:
    """The search attributes a fork starts with: the merge, in list (creation) order, of what the copied
    ``ctx.set_attributes`` entries (kind ``attributes``) recorded; ``{}`` when none. A step body's
    ``step.set_attributes`` is not recorded in its entry, so it is not carried."""
    merged: dict[str, Any] = {}
    for entry in entries:
        if entry.kind == _ATTRIBUTES and isinstance(entry.data.get("attributes"), dict):
            merged.update(entry.data["attributes"])
    return merged


@dataclass(frozen=True)
class StreamRow:
    """One item row of the source's stream as a store holds it: ``name``, ``offset``, ``step_key`` (the
    writing step's history key; None for workflow code), ``discarded``; ``ref`` is the store's own handle on
    the row (its value and the rest), handed back untouched. Closing rows are not ``StreamRow``s."""

    name: str
    offset: int
    step_key: str | None
    discarded: bool
    ref: Any = None


@dataclass
class StreamCopy:
    """What ``plan_stream_copy`` decided: ``items``, the source rows to copy with their new offset (dense
    from 0 per stream, in source offset order), ``closed``, the stream names a copied close entry closed
    (sorted), and ``entries``, the copied history with each stream-write entry's ``offset`` renumbered."""

    items: list[tuple[StreamRow, int]] = field(default_factory=list)
    closed: list[str] = field(default_factory=list)
    entries: list[ports.EntryRecord] = field(default_factory=list)


def plan_stream_copy(entries: list[ports.EntryRecord], rows: list[StreamRow]) -> StreamCopy:
    """The stream items a fork with history ``entries`` (the copies ``plan_fork`` chose) starts with, out
    of the source's item ``rows`` (any order): the item of each copied workflow-code write (an entry of kind
    ``stream`` whose data names its ``stream`` and ``offset``) and every item not discarded of each copied
    completed step (``step_key`` is the step entry's key). Items of steps the fork runs again, of writes
    not copied and of failed attempts are left behind; the kept ones are renumbered from 0 per stream in
    their source order, and the copied write entries' ``offset`` follows (a replay returns the fork's
    offset). A stream whose close entry was copied is closed in the fork."""
    writes: set[tuple[str, int]] = set()
    steps: set[str] = set()
    closed: set[str] = set()
    for entry in entries:
        data = entry.data if isinstance(entry.data, dict) else {}
        if entry.kind == _STREAM and isinstance(data.get("stream"), str):
            if data.get("closed"):
                closed.add(data["stream"])
            elif isinstance(data.get("offset"), int):
                writes.add((data["stream"], data["offset"]))
        elif entry.kind == _STEP and entry.status == ports.ENTRY_COMPLETED:
            steps.add(entry.key)
    plan = StreamCopy(closed=sorted(closed))
    renumbered: dict[tuple[str, int], int] = {}
    counts: dict[str, int] = {}
    for row in sorted(rows, key=lambda r: (r.name, r.offset)):
        if (row.name, row.offset) in writes or (row.step_key in steps and not row.discarded):
            new = counts.get(row.name, 0)
            counts[row.name] = new + 1
            renumbered[(row.name, row.offset)] = new
            plan.items.append((row, new))
    for entry in entries:
        data = entry.data if isinstance(entry.data, dict) else {}
        stream, offset = data.get("stream"), data.get("offset")
        is_write = entry.kind == _STREAM and isinstance(stream, str) and isinstance(offset, int)
        moved = renumbered.get((stream, offset)) if is_write else None
        if moved is not None and moved != offset:
            entry = entry.copy()
            entry.data = {**data, "offset": moved}
        plan.entries.append(entry)
    return plan
