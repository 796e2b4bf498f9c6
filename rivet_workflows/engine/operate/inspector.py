"""The inspector's reads: history views, entry statuses and the lease test (ENGINE-SEMANTICS.md section 9).

Pure engine code on the storage port; the HTTP API, the admin and the demo call it, so they show one
vocabulary. The repairs (replay, recover) live in ``repairs``; the admin's trace layout in
``rivet_workflows.admin.trace``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any

from ..model import errors, ports, serde
from ..run import retry

if TYPE_CHECKING:
    from ..model.definitions import Registry
    from ..model.roles import RuntimeRole

__all__ = [
    "DUE",
    "NO_WORKFLOW",
    "RECEIVED",
    "RUNNING",
    "TIMED_OUT",
    "WAITING",
    "Activity",
    "QueueWait",
    "activity",
    "attempt_log",
    "entry_completed_at",
    "entry_status",
    "entry_view",
    "in_flight",
    "plain",
    "queue_waits",
    "run_less_types",
    "shown_workflow_state",
    "workflow_history",
]

#: the workflow state shown (never stored) for an actor whose type has no run function: it has no workflow
#: to wait on, so it is neither pending nor in flight
NO_WORKFLOW = "no_workflow"


# --- views ---------------------------------------------------------------------------------------------


def _iso(value: datetime | None) -> str | None:
    return value.isoformat() if value is not None else None


def plain(value: Any, prefix: str = "") -> tuple[Any, dict[str, str]]:
    """A stored value as the inspector shows it: ``serde.to_plain`` (plain JSON, ISO times, decimal
    strings, and ``{pointer: type}`` for the values JSON cannot hold, pointers prefixed with ``prefix``).
    Never raises for a stored value (an unstorable one, impossible once stored, shows as its repr)."""
    try:
        return serde.to_plain(value, where="inspector value", prefix=prefix)
    except errors.RivetWorkflowsError:  # pragma: no cover - stored values were serialised once already
        return repr(value), {}


def shown_workflow_state(registry: Registry, record: ports.ActorRecord) -> str:
    """The workflow state to show for ``record``: its stored state, or ``NO_WORKFLOW`` when its type is
    registered without a run function (such an actor stays ``pending`` in storage forever)."""
    if record.name in registry and registry.get(record.name).run is None:
        return NO_WORKFLOW
    return record.workflow_state


def run_less_types(registry: Registry) -> list[str]:
    """Names of the registered actor types that have no run function (their actors show ``NO_WORKFLOW``
    and are never in flight), sorted."""
    return sorted(name for name in registry.names() if registry.get(name).run is None)


def _queue_wait(entry: ports.EntryRecord, by_key: dict[str, ports.EntryRecord]) -> ports.EntryRecord | None:
    """The ``<wait>:count`` record of the queue wait ``entry`` (its deadline or a message) belongs to."""
    base, sep, _ = entry.key.rpartition(":")
    return by_key.get(f"{base}:count") if sep else None


def entry_status(entry: ports.EntryRecord, by_key: dict[str, ports.EntryRecord] | None = None) -> str:
    """The status of a history entry in the one vocabulary the API, the admin and the demo show.

    Steps, loops, joins and races: their metadata status (pending, running, completed, failed, exhausted).
    Sleeps: their state, ``pending``, ``completed`` or ``interrupted`` (a queue wait's deadline that lost
    to a message: ENGINE-SEMANTICS.md section 1). Messages: a received message is ``received``, or
    ``completed`` once answered; a queue wait's ``:count`` record is ``completed``. ``by_key`` (the
    history by key) lets histories written before these statuses were stored show them too (their
    message entries say pending; their lost deadlines say completed).
    """
    data = entry.data or {}
    if entry.kind == "sleep":
        state = data.get("state", entry.status)
        if state == "completed" and entry.key.endswith(":deadline") and by_key is not None:
            count = _queue_wait(entry, by_key)
            if count is not None and (count.data or {}).get("count"):
                return "interrupted"  # written by an older version: the messages came first
        return str(state)
    if entry.kind == "message":
        if "count" in data and "body" not in data:
            return ports.ENTRY_COMPLETED
        return ports.MESSAGE_COMPLETED if data.get("completed") else ports.MESSAGE_RECEIVED
    return entry.status


def entry_completed_at(
    entry: ports.EntryRecord, by_key: dict[str, ports.EntryRecord] | None = None
) -> datetime | None:
    """When the entry completed (None while it has not): its ``completed_at``; for an entry of a history
    written before every completed entry stored one, the instant it was recorded (a checkpoint, version
    gate, removal marker or a queue wait's ``:count`` record) or, for a queue wait's deadline, when the
    wait recorded its messages."""
    if entry.completed_at is not None:
        return entry.completed_at
    if entry_status(entry, by_key) not in (ports.ENTRY_COMPLETED, "interrupted"):
        return None
    if entry.kind == "sleep" and by_key is not None:
        count = _queue_wait(entry, by_key)
        if count is not None:
            return count.created_at
    if entry.kind == "message" and "body" in (entry.data or {}):
        return None  # an answered message of an older history: its answer's instant was not recorded
    if entry.kind in ("message", "rollback_checkpoint", "removed", "version_check", "attributes"):
        return entry.created_at  # recorded and done at once
    return None


#: the outcome of a step's last attempt, by the entry's status, for a step whose data has no attempt log
_LAST_OUTCOME = {
    ports.ENTRY_COMPLETED: retry.ATTEMPT_COMPLETED,
    ports.ENTRY_RUNNING: retry.ATTEMPT_RUNNING,
    ports.ENTRY_FAILED: retry.ATTEMPT_FAILED,
    ports.ENTRY_EXHAUSTED: retry.ATTEMPT_FAILED,
}


def attempt_log(entry: ports.EntryRecord) -> list[dict]:
    """The attempts of a step entry, oldest first (the last ``retry.MAX_LOGGED_ATTEMPTS``; manual: HTTP API,
    Attempts): ``[{"attempt": n, "started_at": datetime | None, "finished_at": datetime | None, "outcome":
    str, "error": {"name", "message"} | None}]``. Outcomes: ``running``, ``completed``, ``failed``,
    ``timed out`` and ``worker lost`` (started, never finished: its executor died). A step recorded before
    attempts were logged shows its last attempt, from the entry's own fields. ``[]`` for other kinds."""
    if entry.kind != "step":
        return []
    logged = (entry.data or {}).get(retry.ATTEMPT_LOG)
    if logged:
        return [dict(item) for item in logged]
    if entry.attempts <= 0:
        return []
    error = entry.error or None
    if entry.status == ports.ENTRY_COMPLETED:
        error = None
    return [
        {
            "attempt": entry.attempts,
            "started_at": entry.last_attempt_at,
            "finished_at": entry.completed_at if entry.status == ports.ENTRY_COMPLETED else None,
            "outcome": _LAST_OUTCOME.get(entry.status, entry.status),
            "error": {"name": error.get("name"), "message": error.get("message")} if error else None,
        }
    ]


def _attempt_view(item: dict) -> dict:
    error = item.get("error")
    return {
        "attempt": item.get("attempt"),
        "startedAt": _iso(item.get("started_at")),
        "finishedAt": _iso(item.get("finished_at")),
        "outcome": item.get("outcome"),
        "error": plain(error)[0] if error else None,
    }


def in_flight(record: ports.ActorRecord, now: datetime) -> bool:
    """True while an executor holds a live lease on the actor (replay and recover are refused then)."""
    return activity(record.lease_owner, record.lease_expires_at, None, None, now).doing == RUNNING


def entry_view(
    entry: ports.EntryRecord, by_key: dict[str, ports.EntryRecord] | None = None
) -> tuple[dict, dict]:
    """``(entry, metadata)`` of one history entry as the inspector API shows them.

    ``entry`` is ``{"id": key, "location": [...], "kind": {"type": kind, "data": {...}}}``, ``data`` as
    plain JSON (``plain``: ISO times, decimal strings, never storage tags), plus, when ``data`` holds values
    JSON cannot, ``"types"``: their JSON Pointers from the entry object (``/kind/data/deadline``) with their
    type (``datetime``, ``decimal``, ...). ``metadata`` is ``{"status", "attempts", "error",
    "lastAttemptAt", "createdAt", "completedAt", "rollbackCompletedAt", "rollbackError", "codeVersion"}``
    (``codeVersion``: the code version of the process that last wrote the entry, None: unversioned), and for a step
    ``"attemptLog"``: ``[{"attempt", "startedAt", "finishedAt", "outcome", "error": {"name", "message"} |
    None}]`` (``attempt_log``; kept out of ``data``): ``status`` from ``entry_status``, ``completedAt`` from
    ``entry_completed_at``, instants as ISO 8601 strings. ``by_key`` (the history by key) as for
    ``entry_status``.
    """
    shown = entry.data
    if entry.kind == "step" and retry.ATTEMPT_LOG in (shown or {}):
        shown = {k: v for k, v in shown.items() if k != retry.ATTEMPT_LOG}  # shown as attemptLog
    data, types = plain(shown, "/kind/data")
    view: dict[str, Any] = {
        "id": entry.key,
        "location": list(entry.location),
        "kind": {"type": entry.kind, "data": data},
    }
    if types:
        view["types"] = types
    meta = {
        "status": entry_status(entry, by_key),
        "attempts": entry.attempts,
        "error": plain(entry.error)[0],
        "lastAttemptAt": _iso(entry.last_attempt_at),
        "createdAt": _iso(entry.created_at),
        "completedAt": _iso(entry_completed_at(entry, by_key)),
        "rollbackCompletedAt": _iso(entry.rollback_completed_at),
        "rollbackError": plain(entry.rollback_error)[0],
        "codeVersion": entry.code_version,
    }
    if entry.kind == "step":
        meta["attemptLog"] = [_attempt_view(item) for item in attempt_log(entry)]
    return view, meta


def workflow_history(runtime: RuntimeRole, actor_id: str) -> dict:
    """The inspector's history of ``actor_id`` (ENGINE-SEMANTICS.md section 9).

    Returns ``{"history": {"nameRegistry": [names], "entries": [entry], "entryMetadata": {id: meta}} | None,
    "workflowState": str, "isWorkflowEnabled": bool}`` with entries in creation order (see ``entry_view``);
    ``history`` is None and ``workflowState`` ``NO_WORKFLOW`` for an actor without a run handler; for an
    actor whose type is not registered in this process it is the stored history with
    ``isWorkflowEnabled`` False. Raises ``ActorNotFoundError``.
    """
    store = runtime.store
    record = store.get_actor(actor_id)
    definition = runtime.registry.get(record.name) if record.name in runtime.registry else None
    enabled = definition is not None and definition.run is not None
    history = None
    # An actor whose type is no longer registered still shows what it stored (workflow not enabled here).
    if enabled or definition is None:
        entries, metadata, names = [], {}, {}
        stored = store.load_history(actor_id)
        by_key = {e.key: e for e in stored}
        for entry in stored:
            view, meta = entry_view(entry, by_key)
            entries.append(view)
            metadata[entry.key] = meta
            for part in entry.location:
                if isinstance(part, str):
                    names.setdefault(part, None)
        history = {"nameRegistry": list(names), "entries": entries, "entryMetadata": metadata}
    return {
        "history": history,
        "workflowState": shown_workflow_state(runtime.registry, record),
        "isWorkflowEnabled": enabled,
    }


# --- reading a history as the user wrote the code (docs/howto/admin.md) -------------------------

#: a queue wait still waiting, one that received messages, one whose timeout passed with none
WAITING = "waiting"
RECEIVED = "received"
TIMED_OUT = "timed out"


@dataclass
class QueueWait:
    """One ``ctx.queue.next``/``next_batch`` call, which the history records as up to three kinds of
    entries: its deadline (``<name>:deadline``, a sleep, when it had a timeout), its count
    (``<name>:count``, written when the wait ended) and each message it received (``<name>:0``, ...).

    ``key`` is the wait's own name (the entries' common prefix); ``status`` ``waiting``, ``received`` or
    ``timed out`` (the deadline passed and no message came); ``count`` the messages received (None while
    waiting); ``deadline`` the instant it gives up (None without a timeout)."""

    key: str
    deadline_entry: ports.EntryRecord | None = None
    count_entry: ports.EntryRecord | None = None
    messages: list[ports.EntryRecord] = field(default_factory=list)

    @property
    def entries(self) -> list[ports.EntryRecord]:
        """Every entry of the wait, in creation order."""
        parts = [self.deadline_entry, self.count_entry, *self.messages]
        return sorted((e for e in parts if e is not None), key=lambda e: e.seq)

    @property
    def deadline(self) -> datetime | None:
        return (self.deadline_entry.data or {}).get("deadline") if self.deadline_entry else None

    @property
    def count(self) -> int | None:
        if self.count_entry is None:
            return None
        count = (self.count_entry.data or {}).get("count")
        return count if isinstance(count, int) else len(self.messages)

    @property
    def queues(self) -> list[str]:
        """The queue names it waited on (``[]``: any queue)."""
        names = (self.count_entry.data or {}).get("names") if self.count_entry else None
        return [str(n) for n in names or []]

    @property
    def status(self) -> str:
        if self.count_entry is None:
            return WAITING
        return TIMED_OUT if not self.count else RECEIVED

    @property
    def started_at(self) -> datetime | None:
        return self.entries[0].created_at

    @property
    def finished_at(self) -> datetime | None:
        """When the wait ended (its count was recorded); None while it waits."""
        if self.count_entry is None:
            return None
        return self.count_entry.completed_at or self.count_entry.created_at


def _wait_part(entry: ports.EntryRecord) -> tuple[str, str] | None:
    """``(wait name, part)`` when ``entry`` is part of a queue wait (``deadline``, ``count`` or
    ``message``), else None."""
    base, sep, suffix = entry.key.rpartition(":")
    if not sep or not base:
        return None
    data = entry.data or {}
    if entry.kind == "sleep" and suffix == "deadline":
        return base, "deadline"
    if entry.kind == "message" and suffix == "count" and "count" in data:
        return base, "count"
    if entry.kind == "message" and suffix.isdigit() and "body" in data:
        return base, "message"
    return None


def queue_waits(entries: list[ports.EntryRecord]) -> dict[str, QueueWait]:
    """The queue waits of a history, by the key of each entry that belongs to one (its deadline, count and
    message entries all map to the same ``QueueWait``): the admin trace and ``rivet show`` show a wait as
    one row. Presentation only: the history and the inspector API keep the entries as recorded."""
    waits: dict[str, QueueWait] = {}
    by_entry: dict[str, QueueWait] = {}
    for entry in sorted(entries, key=lambda e: e.seq):
        part = _wait_part(entry)
        if part is None:
            continue
        base, kind = part
        wait = waits.setdefault(base, QueueWait(base))
        if kind == "deadline":
            wait.deadline_entry = entry
        elif kind == "count":
            wait.count_entry = entry
        else:
            wait.messages.append(entry)
        by_entry[entry.key] = wait
    return by_entry


#: what a run does now (``activity``): an executor runs it, it is due (its wait or sleep is over and a
#: worker will pick it up), it waits (on queues and/or until a time), or none of these (finished, pending)
RUNNING = "running"
DUE = "due"


@dataclass(frozen=True)
class Activity:
    """What a run does now: ``doing`` (``RUNNING``, ``DUE``, ``WAITING`` or ``""``), the queues it waits on
    and the instant it wakes, both only while it waits (a finished wait's queues and past wake time are
    not shown as if it still waited)."""

    doing: str
    waiting_for: tuple[str, ...] = ()
    wake_at: datetime | None = None


def activity(
    lease_owner: str | None,
    lease_expires_at: datetime | None,
    wake_at: datetime | None,
    waiting_for: list[str] | None,
    now: datetime,
) -> Activity:
    """The ``Activity`` of an actor from its stored fields (an ``ActorRecord``'s or a model row's) at
    ``now`` (the store's clock): running while an executor holds a live lease, due once ``wake_at`` has
    passed, waiting while it waits on queues or a future ``wake_at``."""
    if lease_owner is not None and lease_expires_at is not None and lease_expires_at > now:
        return Activity(RUNNING)
    if wake_at is not None and wake_at <= now:
        return Activity(DUE)
    if waiting_for or wake_at is not None:
        return Activity(WAITING, tuple(waiting_for or ()), wake_at)
    return Activity("")
