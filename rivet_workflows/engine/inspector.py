"""The inspector's reads: history views and the lease test (ENGINE-SEMANTICS.md section 9).

Pure engine code on the storage port; the HTTP API and the admin call it. The repairs (replay, recover)
live in ``repairs``; the admin's trace layout in ``rivet_workflows.admin.trace``.
"""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING, Any

from . import errors, ports, serde

if TYPE_CHECKING:
    from .runtime import Runtime

__all__ = ["entry_view", "in_flight", "workflow_history"]


# --- views ---------------------------------------------------------------------------------------------


def _iso(value: datetime | None) -> str | None:
    return value.isoformat() if value is not None else None


def _json(value: Any) -> Any:
    """A stored value as JSON (tagged JSON for datetimes, tuples, ...); never raises for stored values."""
    try:
        return serde.to_json(value, where="inspector value")
    except errors.RivetWorkflowsError:  # pragma: no cover - stored values always serialised once
        return repr(value)


def in_flight(record: ports.ActorRecord, now: datetime) -> bool:
    """True while an executor holds a live lease on the actor (replay and recover are refused then)."""
    return (
        record.lease_owner is not None
        and record.lease_expires_at is not None
        and record.lease_expires_at > now
    )


def entry_view(entry: ports.EntryRecord) -> tuple[dict, dict]:
    """``(entry, metadata)`` of one history entry as the inspector API shows them.

    ``entry`` is ``{"id": key, "location": [...], "kind": {"type": kind, "data": {...}}}`` and ``metadata``
    ``{"status", "attempts", "error", "lastAttemptAt", "createdAt", "completedAt", "rollbackCompletedAt",
    "rollbackError"}`` (instants as ISO 8601 strings, values as tagged JSON).
    """
    view = {
        "id": entry.key,
        "location": list(entry.location),
        "kind": {"type": entry.kind, "data": _json(entry.data)},
    }
    meta = {
        "status": entry.status,
        "attempts": entry.attempts,
        "error": _json(entry.error),
        "lastAttemptAt": _iso(entry.last_attempt_at),
        "createdAt": _iso(entry.created_at),
        "completedAt": _iso(entry.completed_at),
        "rollbackCompletedAt": _iso(entry.rollback_completed_at),
        "rollbackError": _json(entry.rollback_error),
    }
    return view, meta


def workflow_history(runtime: Runtime, actor_id: str) -> dict:
    """The inspector's history of ``actor_id`` (ENGINE-SEMANTICS.md section 9).

    Returns ``{"history": {"nameRegistry": [names], "entries": [entry], "entryMetadata": {id: meta}} | None,
    "workflowState": str, "isWorkflowEnabled": bool}`` with entries in creation order (see ``entry_view``);
    ``history`` is None for an actor without a run handler; for an actor whose type is not registered in
    this process it is the stored history with ``isWorkflowEnabled`` False. Raises ``ActorNotFoundError``.
    """
    store = runtime.store
    record = store.get_actor(actor_id)
    definition = runtime.registry.get(record.name) if record.name in runtime.registry else None
    enabled = definition is not None and definition.run is not None
    history = None
    # An actor whose type is no longer registered still shows what it stored (workflow not enabled here).
    if enabled or definition is None:
        entries, metadata, names = [], {}, {}
        for entry in store.load_history(actor_id):
            view, meta = entry_view(entry)
            entries.append(view)
            metadata[entry.key] = meta
            for part in entry.location:
                if isinstance(part, str):
                    names.setdefault(part, None)
        history = {"nameRegistry": list(names), "entries": entries, "entryMetadata": metadata}
    return {"history": history, "workflowState": record.workflow_state, "isWorkflowEnabled": enabled}
