"""The admin run trace: the history laid out as a nested timeline (``build_trace``) and made template-ready."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from django.utils.html import format_html
from django.utils.translation import ngettext

from .. import display
from ..engine.model import ports
from ..engine.operate import inspector
from ..engine.run import retry
from ..engine.run.history import parent_key


def pretty(value: Any) -> str:
    """``value`` as indented plain JSON (``inspector.plain``: ISO times, decimal strings, never the storage
    tags), followed by a ``types:`` line naming the type of each value JSON cannot hold (``/total
    decimal``); readable, never raises."""
    try:
        shown, types = inspector.plain(value)
        text = json.dumps(shown, indent=2, ensure_ascii=False, sort_keys=True)
    except Exception:  # a value that is not serializable any more: show its repr
        return repr(value)
    if types:
        text += "\n\ntypes: " + ", ".join(
            f"{pointer or '(the value)'} {kind}" for pointer, kind in sorted(types.items())
        )
    return text


#: a short human duration (``display.duration``), also used by ``manage.py rivet show``
duration = display.duration


@dataclass
class TraceNode:
    """One node of the run trace: an entry, or a group (loop iteration ``~N``, join/race branch, try block)
    that has no entry of its own. ``start``/``end`` are seconds from the first entry's creation; ``offset``
    and ``width`` place the timing bar as percentages of the whole run."""

    key: str
    label: str
    kind: str
    entry: ports.EntryRecord | None = None
    children: list[TraceNode] = field(default_factory=list)
    start: float | None = None
    end: float | None = None
    offset: float = 0.0
    width: float = 0.0
    depth: int = 0
    replayable: bool = False
    #: the queue wait this node shows as one row (its deadline, count and messages; ``entry`` is None)
    wait: inspector.QueueWait | None = None


def _entry_end(entry: ports.EntryRecord) -> datetime | None:
    return entry.completed_at or entry.last_attempt_at or entry.created_at


def build_trace(entries: list[ports.EntryRecord], now: datetime | None = None) -> list[TraceNode]:
    """The history as a nested timeline: entries under their parent entry or group, in creation order.

    Loop iterations (``loop/~3``), join and race branches (``join/a``) and try blocks (a key prefix with no
    entry) become group nodes. A queue wait's entries (deadline, count, messages) become one node keyed by
    the wait's name, of kind ``queue wait`` (``inspector.queue_waits``). Each node gets ``start``/``end`` seconds from the first entry and a timing
    bar (``offset``/``width`` in percent of the run; an entry still running ends at ``now``). Step nodes are
    ``replayable``. Returns the root nodes.
    """
    ordered = sorted(entries, key=lambda e: e.seq)
    nodes: dict[str, TraceNode] = {}
    roots: list[TraceNode] = []

    def node_for(key: str) -> TraceNode:
        existing = nodes.get(key)
        if existing is not None:
            return existing
        label = key.rsplit("/", 1)[-1]
        kind = "iteration" if label.startswith("~") else "group"
        node = TraceNode(key=key, label=label, kind=kind)
        nodes[key] = node
        parent = parent_key(key)
        (node_for(parent).children if parent else roots).append(node)
        return node

    waits = inspector.queue_waits(ordered)
    for entry in ordered:
        wait = waits.get(entry.key)
        if wait is not None:
            node = node_for(wait.key)
            node.wait, node.kind = wait, "queue wait"
            continue
        node = node_for(entry.key)
        node.entry = entry
        node.kind = entry.kind
        node.replayable = entry.kind == "step"

    times = [t for e in ordered for t in (e.created_at, _entry_end(e)) if t is not None]
    waiting = any(w.status == inspector.WAITING for w in waits.values())
    if now is not None and (waiting or any(e.status == ports.ENTRY_RUNNING for e in ordered)):
        times.append(now)  # a running entry's (or a waiting queue wait's) bar grows until now
    origin = min(times) if times else None
    total = (max(times) - origin).total_seconds() if times else 0.0

    def place(node: TraceNode, depth: int) -> tuple[float | None, float | None]:
        node.depth = depth
        spans = [place(child, depth + 1) for child in node.children]
        starts = [s for s, _ in spans if s is not None]
        ends = [e for _, e in spans if e is not None]
        if node.entry is not None and origin is not None:
            entry = node.entry
            if entry.created_at is not None:
                starts.append((entry.created_at - origin).total_seconds())
            finish = _entry_end(entry)
            if entry.status == ports.ENTRY_RUNNING and now is not None:
                finish = now
            if finish is not None:
                ends.append((finish - origin).total_seconds())
        if node.wait is not None and origin is not None:
            wait = node.wait
            if wait.started_at is not None:
                starts.append((wait.started_at - origin).total_seconds())
            finish = wait.finished_at or (now if now is not None else None)
            if finish is not None:
                ends.append((finish - origin).total_seconds())
        node.start = min(starts) if starts else None
        node.end = max(ends) if ends else node.start
        if node.start is not None and total > 0:
            node.offset = round(100.0 * node.start / total, 2)
            node.width = round(max(100.0 * ((node.end or node.start) - node.start) / total, 0.5), 2)
        elif node.start is not None:
            node.offset, node.width = 0.0, 100.0
        return node.start, node.end

    for root in roots:
        place(root, 0)
    return roots


@dataclass
class Detail:
    """One labelled block of an entry's details (``Output``, ``Error``, ``Stack``, ``State``...)."""

    label: str
    text: str
    error: bool = False


@dataclass
class AttemptRow:
    """One attempt of a step as the trace lists it: number, outcome, start and finish (page time zone, ms)
    and the error as ``"Name: message"`` ("" when it succeeded)."""

    attempt: int
    outcome: str
    started: str
    finished: str
    error: str

    @property
    def failed(self) -> bool:
        """True for an attempt that did not succeed and is not running any more."""
        return self.outcome not in ("completed", "running")


def attempt_rows(entry: ports.EntryRecord) -> list[AttemptRow]:
    """The attempts of a step entry (``inspector.attempt_log``) ready for the template; a lost attempt
    (``worker lost``) shows "never finished"."""
    rows = []
    for item in inspector.attempt_log(entry):
        error = item.get("error") or None
        finished = item.get("finished_at")
        if finished is not None:
            shown_finish = display.format_time(finished, precise=True, date=False)
        elif item.get("outcome") == "running":
            shown_finish = ""
        else:
            shown_finish = "never finished"
        rows.append(
            AttemptRow(
                attempt=int(item.get("attempt") or 0),
                outcome=str(item.get("outcome") or ""),
                started=display.format_time(item.get("started_at"), precise=True, date=False),
                finished=shown_finish,
                error=f"{error.get('name', 'Error')}: {error.get('message', '')}" if error else "",
            )
        )
    return rows


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
    #: "compensated" (its rollback handler ran), "rollback failed" or ""
    rollback: str = ""
    #: why "Replay from this step" is refused (``repairs.reason``; its tooltip), "" when it is allowed
    replay_reason: str = ""
    #: a step's attempts, oldest first (``inspector.attempt_log``; manual: HTTP API, Attempts)
    attempt_rows: list[AttemptRow] = field(default_factory=list)

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
        data.pop(retry.ATTEMPT_LOG, None)  # listed as the row's attempts
    elif entry.kind == "loop":
        summary = f"iteration {data.get('iteration', 0)}"
        out.append(Detail("Loop state", pretty(data.pop("state", None))))
        if "output" in data:
            out.append(Detail("Output", pretty(data.pop("output"))))
    elif entry.kind == "sleep":
        deadline = data.pop("deadline", None)  # shown in the summary, in the page's time zone
        summary = f"until {display.format_time(deadline, precise=True)}" if deadline else ""
    elif entry.kind == "message":
        if "body" in data:
            summary = f"queue {data.get('name', '?')}"
            sent = data.pop("created_at", None)  # shown here in the page's time zone, not as tagged UTC JSON
            if sent is not None:
                summary += f" · sent {display.format_time(sent, precise=True)}"
            out.append(Detail("Message body", pretty(data.pop("body"))))
        elif "count" in data:
            count = data.get("count")
            if isinstance(count, int):
                summary = ngettext("%(count)d message", "%(count)d messages", count) % {"count": count}
            else:
                summary = f"{count} messages"
    elif entry.kind == "race":
        summary = f"winner: {data.get('winner')}"
    elif entry.kind == "attributes":  # ctx.set_attributes (DESIGN.md section 19)
        values = data.pop("attributes", None) or {}
        summary = ", ".join(f"{k}={v}" for k, v in values.items())
    if data:
        out.append(Detail("Data", pretty(data)))
    if entry.error:
        out.extend(error_details(entry.error))
    if entry.rollback_completed_at is not None:
        when = display.format_time(entry.rollback_completed_at, precise=True)
        out.append(Detail("Rolled back", f"compensated at {when}"))
    if entry.rollback_error:
        out.extend(error_details(entry.rollback_error, label="Rollback error"))
    return out, summary


def error_details(error: Any, label: str = "Error") -> list[Detail]:
    """An error dict (``serde.error_to_dict``: name, message, stack, metadata) as readable blocks:
    ``"<label>": "Name: message"``, ``"Stack"`` (the traceback text with its line breaks), ``"<label>
    metadata"`` (pretty JSON) and, for an error nested in the metadata (a step error inside a
    StepExhaustedError), its own blocks labelled ``"Cause"``. Another value is shown as its text."""
    if not isinstance(error, dict):
        return [Detail(label, str(error), error=True)]
    out = [Detail(label, f"{error.get('name', 'Error')}: {error.get('message', '')}", error=True)]
    if error.get("location"):  # where a code error that suspended the run was raised (DESIGN.md 16)
        out.append(Detail("Location", str(error["location"]), error=True))
    if error.get("stack"):
        stack = error["stack"]
        text = "".join(stack) if isinstance(stack, list) else str(stack)
        out.append(Detail("Stack" if label == "Error" else f"{label} stack", text.rstrip(), error=True))
    metadata = error.get("metadata")
    causes: list[tuple[str, dict]] = []
    if isinstance(metadata, dict):
        # a nested error (e.g. the step error inside a StepExhaustedError) gets blocks of its own
        causes = [
            (k, v) for k, v in metadata.items() if isinstance(v, dict) and "name" in v and "message" in v
        ]
        metadata = {k: v for k, v in metadata.items() if k not in dict(causes)}
    if metadata:
        out.append(Detail(f"{label} metadata", pretty(metadata), error=True))
    for name, cause in causes:
        out.extend(error_details(cause, label="Cause" if name == "error" else f"{label} {name}"))
    shown = ("name", "message", "stack", "metadata", "location", "suspended")
    extra = {k: v for k, v in error.items() if k not in shown}
    if extra:
        out.append(Detail(f"{label} details", pretty(extra), error=True))
    return out


#: workflow states in which nothing runs any more (a loop still marked running there was interrupted)
_STOPPED_WORKFLOW = frozenset({"failed", "cancelled", "rolling_back", "suspended"})
_FAILED_STATUSES = frozenset({"failed", "exhausted"})


def _row(
    node: TraceNode,
    workflow_state: str | None,
    by_key: dict[str, ports.EntryRecord],
    replay_reasons: dict[str, str],
) -> Row:
    entry = node.entry
    took = duration(None if node.start is None or node.end is None else node.end - node.start)
    if node.wait is not None:
        return _wait_row(node, node.wait, took)
    if entry is None:
        status = ""
        details: list[Detail] = []
        summary = ""
    else:
        status = inspector.entry_status(entry, by_key)  # the vocabulary of the API and the demo
        details, summary = _details(entry)
    children = [_row(child, workflow_state, by_key, replay_reasons) for child in node.children]
    if status == ports.ENTRY_RUNNING and entry is not None and entry.kind == "loop":
        if workflow_state in _STOPPED_WORKFLOW:
            # the workflow stopped inside the loop: it is not running any more
            status = "failed" if _has_failure(children) else "stopped"
    rollback = ""
    if entry is not None and entry.rollback_error:
        rollback = "rollback failed"
    elif entry is not None and entry.rollback_completed_at is not None:
        rollback = "compensated"
    return Row(
        key=node.key,
        label=node.label,
        kind=node.kind,
        status=status,
        attempts=entry.attempts if entry is not None and entry.kind == "step" else None,
        started=entry.created_at if entry is not None else None,
        finished=inspector.entry_completed_at(entry, by_key) if entry is not None else None,
        took=took,
        offset=node.offset,
        width=node.width,
        replayable=node.replayable,
        details=details,
        children=children,
        summary=summary,
        depth=node.depth,
        rollback=rollback,
        replay_reason=replay_reasons.get(node.key, "") if node.replayable else "",
        attempt_rows=attempt_rows(entry) if entry is not None and entry.kind == "step" else [],
    )


def _wait_row(node: TraceNode, wait: inspector.QueueWait, took: str) -> Row:
    """One queue wait as one row: status ``waiting``, ``received`` or ``timed out``; its queues, deadline
    and message count in the summary; each received message (queue, sent time, body, answered or not) in
    its details."""
    queues = ", ".join(wait.queues) or "any queue"
    parts = [f"queue {queues}"]
    if wait.count is not None and wait.status != inspector.TIMED_OUT:
        parts.append(ngettext("%(count)d message", "%(count)d messages", wait.count) % {"count": wait.count})
    if wait.deadline is not None:
        verb = "timed out at" if wait.status == inspector.TIMED_OUT else "deadline"
        parts.append(f"{verb} {display.format_time(wait.deadline, precise=True)}")
    details: list[Detail] = []
    for message in wait.messages:
        data = dict(message.data or {})
        label = f"Message {message.key.rpartition(':')[2]} ({data.get('name', '?')}"
        sent = data.get("created_at")
        if sent is not None:
            label += f", sent {display.format_time(sent, precise=True)}"
        label += ", answered)" if data.get("completed") else ")"
        details.append(Detail(label, pretty(data.get("body"))))
    return Row(
        key=node.key,
        label=node.label,
        kind=node.kind,
        status=wait.status,
        attempts=None,
        started=wait.started_at,
        finished=wait.finished_at,
        took=took,
        offset=node.offset,
        width=node.width,
        replayable=False,
        details=details,
        summary=" · ".join(parts),
        depth=node.depth,
    )


def _has_failure(rows: list[Row]) -> bool:
    return any(row.status in _FAILED_STATUSES or _has_failure(row.children) for row in rows)


def trace_rows(
    entries: list[ports.EntryRecord],
    now: datetime | None = None,
    workflow_state: str | None = None,
    replay_reasons: dict[str, str] | None = None,
) -> list[Row]:
    """The admin rows of a history (``build_trace``), nested like the trace.

    Statuses and finish times come from ``inspector.entry_status``/``entry_completed_at`` (one vocabulary
    with the API and the demo). ``workflow_state`` (the actor's) lets a loop that is still marked running
    in a failed, cancelled or rolling-back workflow show as ``failed`` (a step inside it failed) or
    ``stopped``. ``replay_reasons`` (step key -> why a replay from it is refused) disables those rows'
    replay buttons with the reason as tooltip.
    """
    by_key = {e.key: e for e in entries}
    reasons = replay_reasons or {}
    return [_row(node, workflow_state, by_key, reasons) for node in build_trace(entries, now)]


STATE_COLORS = {
    "pending": "#6c757d",
    "running": "#0d6efd",
    "sleeping": "#6f42c1",
    "completed": "#198754",
    "rolling_back": "#fd7e14",
    "failed": "#dc3545",
    "cancelled": "#495057",
    "paused": "#ffc107",
    "suspended": "#d63384",
    inspector.NO_WORKFLOW: "#adb5bd",
}


def runtime() -> Any:
    """The project's runtime (``django_runtime.get_runtime``), imported when first asked for."""
    from ..django_runtime import get_runtime

    return get_runtime()


def state_badge(state: str) -> str:
    """An HTML badge for a workflow state (``no_workflow`` reads "no workflow")."""
    color = STATE_COLORS.get(state, "#6c757d")
    return format_html(
        '<span class="rivet-badge" style="background:{};color:#fff;border-radius:10px;padding:1px 8px;'
        'font-size:11px;font-weight:600;white-space:nowrap">{}</span>',
        color,
        state.replace("_", " "),
    )
