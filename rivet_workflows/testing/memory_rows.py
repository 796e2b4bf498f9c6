"""Row <-> record mapping of ``MemoryStore``: the stored rows (values as ``serde.to_json`` output) and the
port records they are read into and written from."""

from __future__ import annotations

import dataclasses
import json
import threading
from datetime import datetime
from typing import Any

from ..engine.model import ports, serde


@dataclasses.dataclass
class ActorRow:
    """One actor as stored: value columns hold ``serde.to_json`` output."""

    actor_id: str
    name: str
    key: list  # encoded
    state: Any
    input: Any
    output: Any = None
    error: Any = None
    workflow_state: str = ports.PENDING
    wake_at: datetime | None = None
    waiting_for: list[str] = dataclasses.field(default_factory=list)
    created_at: datetime | None = None
    updated_at: datetime | None = None
    lease_owner: str | None = None
    lease_expires_at: datetime | None = None
    lease_token: int = 0
    step_lock_until: datetime | None = None
    code_version: str | None = None
    awaiting_code_version: str | None = None
    trace_context: dict | None = None
    replay_generation: int = 0
    concurrency_key: str | None = None
    concurrency_limit: int | None = None
    rate_count: int | None = None
    rate_per: float | None = None
    priority: int = 0
    deadline_at: datetime | None = None
    paused_at: datetime | None = None
    pause_reason: str | None = None
    parent_id: str | None = None

    attributes: dict = dataclasses.field(default_factory=dict)
    row_lock: threading.RLock = dataclasses.field(default_factory=threading.RLock, repr=False)


def lease_live(row: ActorRow, now: datetime) -> bool:
    """True while a lease on the row is held and not expired at ``now``."""
    return row.lease_owner is not None and row.lease_expires_at is not None and row.lease_expires_at > now


def key_text(key: list) -> str:
    """Canonical JSON text of an actor key (unique with the actor name)."""
    return json.dumps(serde.to_json(list(key), where="actor key"), sort_keys=True, separators=(",", ":"))


def actor_record(row: ActorRow) -> ports.ActorRecord:
    """The decoded ``ActorRecord`` of a stored row."""
    return ports.ActorRecord(
        actor_id=row.actor_id,
        name=row.name,
        key=serde.from_json(row.key),
        state=serde.from_json(row.state),
        input=serde.from_json(row.input),
        output=serde.from_json(row.output),
        error=serde.from_json(row.error),
        workflow_state=shown_state(row.workflow_state, row.paused_at is not None),
        wake_at=row.wake_at,
        waiting_for=list(row.waiting_for),
        created_at=row.created_at,
        updated_at=row.updated_at,
        destroyed=False,
        lease_owner=row.lease_owner,
        lease_expires_at=row.lease_expires_at,
        lease_token=row.lease_token,
        code_version=row.code_version,
        awaiting_code_version=row.awaiting_code_version,
        trace_context=dict(row.trace_context) if row.trace_context else None,
        replay_generation=row.replay_generation,
        concurrency_key=row.concurrency_key,
        priority=row.priority,
        deadline_at=row.deadline_at,
        paused=row.paused_at is not None,
        pause_reason=row.pause_reason,
        parent_id=row.parent_id,
        attributes=dict(row.attributes),
    )


def shown_state(workflow_state: str, paused: bool) -> str:
    """The workflow state a record shows: ``paused`` for a paused, unfinished workflow (ports.PAUSED)."""
    return ports.PAUSED if paused and workflow_state not in ports.HALTED_STATES else workflow_state


def entry_out(entry: ports.EntryRecord) -> ports.EntryRecord:
    """A stored (encoded) history entry decoded into a fresh record."""
    return dataclasses.replace(
        entry,
        location=serde.from_json(entry.location),
        data=serde.from_json(entry.data),
        error=serde.from_json(entry.error),
        rollback_error=serde.from_json(entry.rollback_error),
    )


def encode_entry(entry: ports.EntryRecord) -> ports.EntryRecord:
    """A history entry with its JSON fields encoded for storing (``SerializationError``)."""
    where = f"history entry {entry.key!r}"
    return dataclasses.replace(
        entry,
        location=serde.to_json(list(entry.location), where=where),
        data=serde.to_json(serde.entry_data(dict(entry.data), entry.reused), where=f"{where} data"),
        error=serde.to_json(entry.error, where=f"{where} error"),
        rollback_error=serde.to_json(entry.rollback_error, where=f"{where} rollback error"),
    )


def same_json(a: Any, b: Any) -> bool:
    """True when two JSON values are the same document (``1``, ``1.0`` and ``true`` differ, key order not)."""
    return json.dumps(a, sort_keys=True) == json.dumps(b, sort_keys=True)
