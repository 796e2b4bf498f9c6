"""View models of the admin run trace: engine ``TraceNode``s made template-ready (pretty JSON, durations)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from ..engine import inspector, ports, serde


def pretty(value: Any) -> str:
    """``value`` as indented tagged JSON (readable, never raises)."""
    try:
        return json.dumps(serde.to_json(value), indent=2, ensure_ascii=False, sort_keys=True)
    except Exception:  # a value that is not serializable any more: show its repr
        return repr(value)


def duration(seconds: float | None) -> str:
    """A short human duration: ``"12 ms"``, ``"3.4 s"``, ``"2 min 5 s"``; "" for None."""
    if seconds is None:
        return ""
    if seconds < 1:
        return f"{seconds * 1000:.0f} ms"
    if seconds < 60:
        return f"{seconds:.1f} s"
    minutes, rest = divmod(int(seconds), 60)
    return f"{minutes} min {rest} s"


@dataclass
class Detail:
    """One labelled block of an entry's details (``Output``, ``Error``, ``Stack``, ``State``...)."""

    label: str
    text: str
    error: bool = False


@dataclass
class Row:
    """One trace row for the template."""

    key: str
    label: str
    kind: str
    status: str
    attempts: int | None
    started: datetime | None
    finished: datetime | None
    took: str
    offset: float
    width: float
    replayable: bool
    details: list[Detail] = field(default_factory=list)
    children: list[Row] = field(default_factory=list)
    summary: str = ""
    depth: int = 0

    @property
    def indent(self) -> int:
        """Left padding of the label in pixels (nesting depth)."""
        return 6 + 22 * self.depth


def _details(entry: ports.EntryRecord) -> tuple[list[Detail], str]:
    data = dict(entry.data or {})
    out: list[Detail] = []
    summary = ""
    if entry.kind == "step":
        if "output" in data:
            out.append(Detail("Output", pretty(data.pop("output"))))
        data.pop("failure", None)
    elif entry.kind == "loop":
        summary = f"iteration {data.get('iteration', 0)}"
        out.append(Detail("Loop state", pretty(data.pop("state", None))))
        if "output" in data:
            out.append(Detail("Output", pretty(data.pop("output"))))
    elif entry.kind == "sleep":
        summary = f"until {data.get('deadline')}" if data.get("deadline") else ""
    elif entry.kind == "message":
        if "body" in data:
            summary = f"queue {data.get('name', '?')}"
            out.append(Detail("Message body", pretty(data.pop("body"))))
        elif "count" in data:
            summary = f"{data.get('count')} message(s)"
    elif entry.kind == "race":
        summary = f"winner: {data.get('winner')}"
    if data:
        out.append(Detail("Data", pretty(data)))
    error = entry.error
    if error:
        message = (
            f"{error.get('name', 'Error')}: {error.get('message', '')}"
            if isinstance(error, dict)
            else str(error)
        )
        out.append(Detail("Error", message, error=True))
        if isinstance(error, dict) and error.get("stack"):
            out.append(Detail("Stack", str(error["stack"]), error=True))
        if isinstance(error, dict) and error.get("metadata"):
            out.append(Detail("Error metadata", pretty(error["metadata"]), error=True))
    if entry.rollback_error:
        out.append(Detail("Rollback error", pretty(entry.rollback_error), error=True))
    return out, summary


def _row(node: inspector.TraceNode) -> Row:
    entry = node.entry
    took = duration(None if node.start is None or node.end is None else node.end - node.start)
    if entry is None:
        status = ""
        details: list[Detail] = []
        summary = ""
    else:
        status = entry.status
        if entry.kind == "sleep":
            status = (entry.data or {}).get("state", status)
        elif entry.kind in ("message", "rollback_checkpoint", "removed", "version_check", "join", "race"):
            status = entry.status if entry.status != ports.ENTRY_PENDING else "recorded"
        details, summary = _details(entry)
    return Row(
        key=node.key,
        label=node.label,
        kind=node.kind,
        status=status,
        attempts=entry.attempts if entry is not None and entry.kind == "step" else None,
        started=entry.created_at if entry is not None else None,
        finished=entry.completed_at if entry is not None else None,
        took=took,
        offset=node.offset,
        width=node.width,
        replayable=node.replayable,
        details=details,
        children=[_row(child) for child in node.children],
        summary=summary,
        depth=node.depth,
    )


def trace_rows(entries: list[ports.EntryRecord], now: datetime | None = None) -> list[Row]:
    """The admin rows of a history (``inspector.build_trace``), nested like the trace."""
    return [_row(node) for node in inspector.build_trace(entries, now)]
