"""Row <-> record mapping of the Django stores: the one place that knows how columns become port records.

Both store classes read through it: ``DjangoStore`` from ORM model instances (``*_from_model``) and
``PostgresStore`` from raw SQL tuples in the column order of ``ACTOR_COLUMNS``/``ENTRY_COLUMNS``
(``*_from_sql``, which decodes the jsonb text and normalises datetimes to UTC first). Both write through
it too: ``entry_values`` and ``actor_changes`` give the column values of a history entry and of a
``Commit``'s actor columns (JSON columns as ``serde.to_json`` output; ``SerializationError`` for a value
that does not serialize). Values in JSON columns are ``engine.serde`` tagged JSON (DESIGN.md section 4).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from typing import Any

from .. import models
from ..engine.model import errors, jsontext, ports, serde, shards

#: actor columns in the order ``actor_record`` reads them (and raw SQL selects them)
ACTOR_COLUMNS: tuple[str, ...] = (
    "actor_id",
    "name",
    "key",
    "state",
    "input",
    "output",
    "error",
    "workflow_state",
    "wake_at",
    "waiting_for",
    "created_at",
    "updated_at",
    "destroyed",
    "lease_owner",
    "lease_expires_at",
    "lease_token",
    "code_version",
    "awaiting_code_version",
    "trace_context",
    "replay_generation",
    "concurrency_key",
    "priority",
    "deadline_at",
    "paused_at",
    "pause_reason",
    "parent_actor_id",
    "attributes",
)

#: history entry columns in the order ``entry_record`` reads them (``id`` is the entry's ``seq``)
ENTRY_COLUMNS: tuple[str, ...] = (
    "key",
    "location",
    "kind",
    "data",
    "status",
    "attempts",
    "error",
    "id",
    "last_attempt_at",
    "created_at",
    "completed_at",
    "rollback_completed_at",
    "rollback_error",
    "code_version",
)

#: history entry columns an upsert writes after ``actor_id``, in the order of ``entry_params``
ENTRY_WRITE_COLUMNS: tuple[str, ...] = (
    "key",
    "location",
    "kind",
    "data",
    "status",
    "attempts",
    "error",
    "last_attempt_at",
    "created_at",
    "completed_at",
    "rollback_completed_at",
    "rollback_error",
    "code_version",
)

#: the history columns an upsert of an existing key overwrites (``created_at`` and ``id`` are kept)
ENTRY_UPDATE_COLUMNS: tuple[str, ...] = tuple(
    c for c in ENTRY_WRITE_COLUMNS if c not in ("key", "created_at")
)


def _kinds(model: Any) -> tuple[frozenset[str], frozenset[str]]:
    fields = model._meta.concrete_fields
    json_cols = frozenset(f.column for f in fields if f.get_internal_type() == "JSONField")
    time_cols = frozenset(f.column for f in fields if f.get_internal_type() == "DateTimeField")
    return json_cols, time_cols


_ACTOR_JSON, _ACTOR_TIMES = _kinds(models.Actor)
_ENTRY_JSON, _ENTRY_TIMES = _kinds(models.HistoryEntry)


def load_json(value: Any) -> Any:
    """A JSON column read by raw SQL (Django registers a text loader for jsonb): the decoded JSON value
    (``json.loads``'s values, read by orjson: ``engine.model.jsontext.loads``)."""
    return jsontext.loads(value) if isinstance(value, str) else value


def utc(value: datetime | None) -> datetime | None:
    """An aware datetime in UTC (None stays None)."""
    return None if value is None else value.astimezone(UTC)


#: compact JSON text of a JSON value for a jsonb parameter: the value ``json.dumps`` gives, by orjson
_compact_json = jsontext.dumps


def jsonb(value: Any) -> str | None:
    """A JSON value as the text of a jsonb parameter (None -> SQL NULL, as the ORM writes it); the text
    may differ from ``json.dumps``'s (raw non-ASCII, float spelling), the value jsonb stores does not
    (``engine.model.jsontext.dumps``)."""
    return None if value is None else _compact_json(value)


def _converters(columns: Sequence[str], json_cols: frozenset, time_cols: frozenset) -> list[Callable]:
    return [load_json if c in json_cols else utc if c in time_cols else _same for c in columns]


def _same(value: Any) -> Any:
    return value


_ACTOR_SQL = _converters(ACTOR_COLUMNS, _ACTOR_JSON, _ACTOR_TIMES)
_ENTRY_SQL = _converters(ENTRY_COLUMNS, _ENTRY_JSON, _ENTRY_TIMES)


def key_text(key: list) -> str:
    """Canonical JSON text of an actor key (a list of strings): the unique column with the actor name; the
    same text the shard hash reads (``engine.model.shards.key_text``)."""
    return shards.key_text(key)


# --- rows -> records ----------------------------------------------------------------------------------


def actor_record(values: Sequence[Any]) -> ports.ActorRecord:
    """The ``ActorRecord`` of one actor row given as its ``ACTOR_COLUMNS`` values (JSON decoded, times UTC)."""
    (actor_id, name, key, state, input_, output, error, workflow_state, wake_at, waiting_for, created_at,
     updated_at, destroyed, lease_owner, lease_expires_at, lease_token, code_version,
     awaiting_code_version, trace_context, replay_generation, concurrency_key, priority,
     deadline_at, paused_at, pause_reason, parent_actor_id, attributes) = values  # fmt: skip
    return ports.ActorRecord(
        actor_id=actor_id,
        name=name,
        key=list(key),
        state=serde.from_json(state),
        input=serde.from_json(input_),
        output=serde.from_json(output),
        error=serde.from_json(error),
        workflow_state=shown_state(workflow_state, paused_at is not None),
        wake_at=wake_at,
        waiting_for=list(waiting_for or []),
        created_at=created_at,
        updated_at=updated_at,
        destroyed=destroyed,
        lease_owner=lease_owner,
        lease_expires_at=lease_expires_at,
        lease_token=lease_token,
        code_version=code_version,
        awaiting_code_version=awaiting_code_version,
        trace_context=trace_context,
        replay_generation=replay_generation or 0,
        concurrency_key=concurrency_key,
        priority=priority or 0,
        deadline_at=deadline_at,
        paused=paused_at is not None,
        pause_reason=pause_reason,
        parent_id=parent_actor_id,
        attributes=dict(attributes or {}),
    )


def shown_state(workflow_state: str, paused: bool) -> str:
    """The workflow state a record shows: ``paused`` for a paused, unfinished workflow (``ports.PAUSED``)."""
    return ports.PAUSED if paused and workflow_state not in ports.HALTED_STATES else workflow_state


def flow_columns(flow: ports.Flow | None) -> dict[str, Any]:
    """The actor columns of a new actor's ``Flow`` (not ``deadline_at``: the store adds its clock)."""
    if flow is None:
        return {"priority": 0}
    return {
        "concurrency_key": flow.concurrency_key,
        "concurrency_limit": flow.concurrency_limit,
        "rate_count": flow.rate_count,
        "rate_per": flow.rate_per,
        "priority": flow.priority,
    }


def entry_record(values: Sequence[Any]) -> ports.EntryRecord:
    """The ``EntryRecord`` of one history row given as its ``ENTRY_COLUMNS`` values."""
    (key, location, kind, data, status, attempts, error, seq, last_attempt_at, created_at, completed_at,
     rollback_completed_at, rollback_error, code_version) = values  # fmt: skip
    return ports.EntryRecord(
        key=key,
        location=list(location),
        kind=kind,
        data=serde.from_json(data) or {},
        status=status,
        attempts=attempts,
        error=serde.from_json(error),
        seq=seq,
        last_attempt_at=last_attempt_at,
        created_at=created_at,
        completed_at=completed_at,
        rollback_completed_at=rollback_completed_at,
        rollback_error=serde.from_json(rollback_error),
        code_version=code_version,
    )


def actor_from_model(row: models.Actor) -> ports.ActorRecord:
    """The ``ActorRecord`` of an ``Actor`` model instance."""
    return actor_record([getattr(row, column) for column in ACTOR_COLUMNS])


def entry_from_model(row: models.HistoryEntry) -> ports.EntryRecord:
    """The ``EntryRecord`` of a ``HistoryEntry`` model instance."""
    return entry_record([getattr(row, column) for column in ENTRY_COLUMNS])


def actor_from_sql(row: Sequence[Any]) -> ports.ActorRecord:
    """The ``ActorRecord`` of a raw SQL row selecting ``ACTOR_COLUMNS`` (jsonb as text, any time zone)."""
    return actor_record([convert(value) for convert, value in zip(_ACTOR_SQL, row, strict=True)])


def entry_from_sql(row: Sequence[Any]) -> ports.EntryRecord:
    """The ``EntryRecord`` of a raw SQL row selecting ``ENTRY_COLUMNS``."""
    return entry_record([convert(value) for convert, value in zip(_ENTRY_SQL, row, strict=True)])


def message_from_model(row: models.QueueMessage, body: Any = None) -> ports.MessageRecord:
    """The ``MessageRecord`` of a ``QueueMessage`` model instance (its id as a decimal string); ``body``: the
    ``serde.Encoded`` body the row was written from (its value is the record's, not decoded again)."""
    stored = body if type(body) is serde.Encoded else serde.decode_keeping(row.body)
    record = ports.MessageRecord(
        id=str(row.id),
        actor_id=row.actor_id,
        name=row.name,
        body=stored.value,
        created_at=row.created_at,
        completable=row.completable,
        status=row.status,
        response=serde.from_json(row.response),
        completed_at=row.completed_at,
        trace_context=row.trace_context,
        dedup_id=row.dedup_id,
    )
    record.encoded_body = stored
    return record


def cron_from_model(row: models.CronEntry) -> ports.CronRecord:
    """The ``CronRecord`` of a ``CronEntry`` model instance (its id as a decimal string)."""
    return ports.CronRecord(
        id=str(row.id),
        actor_id=row.actor_id,
        name=row.name,
        action=row.action,
        args=list(serde.from_json(row.args) or []),
        interval_seconds=row.interval_seconds,
        expression=row.expression or None,
        timezone=row.timezone,
        next_fire_at=row.next_fire_at,
        last_fired_at=row.last_fired_at,
        max_history=row.max_history,
        created_at=row.created_at,
    )


def fire_from_model(row: models.CronFire) -> ports.CronFireRecord:
    """The ``CronFireRecord`` of a ``CronFire`` model instance."""
    return ports.CronFireRecord(
        scheduled_at=row.scheduled_at,
        fired_at=row.fired_at,
        status=row.status,
        result=serde.from_json(row.result),
        error=serde.from_json(row.error),
    )


def row_id(text: str | int) -> int:
    """The row id of a message or schedule id (ids are decimal strings); -1 (matches nothing) for a foreign id."""
    try:
        return int(text)
    except (TypeError, ValueError):
        return -1


# --- records -> columns -------------------------------------------------------------------------------


def entry_values(rec: ports.EntryRecord, created_at: datetime | None) -> dict[str, Any]:
    """The ``ENTRY_WRITE_COLUMNS`` values of a history entry (JSON columns encoded; ``created_at`` given by
    the caller: the record's own, or the commit's now for a new entry). ``SerializationError``."""
    return {
        "key": rec.key,
        "location": list(rec.location),
        "kind": rec.kind,
        "data": serde.to_json(serde.entry_data(rec.data, rec.reused), where=f"history entry {rec.key!r}"),
        "status": rec.status,
        "attempts": rec.attempts,
        "error": serde.to_json(rec.error, where=f"error of {rec.key!r}"),
        "last_attempt_at": rec.last_attempt_at,
        "created_at": created_at,
        "completed_at": rec.completed_at,
        "rollback_completed_at": rec.rollback_completed_at,
        "rollback_error": serde.to_json(rec.rollback_error, where=f"rollback error of {rec.key!r}"),
        "code_version": rec.code_version,
    }


def entry_params(rec: ports.EntryRecord, created_at: datetime | None) -> list[Any]:
    """``entry_values`` as SQL parameters in ``ENTRY_WRITE_COLUMNS`` order (JSON columns as jsonb text),
    built directly (a step commit's hot path: no dict of values in between). ``SerializationError``."""
    error, rollback_error = rec.error, rec.rollback_error
    return [
        rec.key,
        _compact_json(list(rec.location)),
        rec.kind,
        jsonb(serde.to_json(serde.entry_data(rec.data, rec.reused), where=f"history entry {rec.key!r}")),
        rec.status,
        rec.attempts,
        None if error is None else jsonb(serde.to_json(error, where=f"error of {rec.key!r}")),
        rec.last_attempt_at,
        created_at,
        rec.completed_at,
        rec.rollback_completed_at,
        None
        if rollback_error is None
        else jsonb(serde.to_json(rollback_error, where=f"rollback error of {rec.key!r}")),
        rec.code_version,
    ]


#: the actor columns a ``Commit`` can set, in the order ``actor_changes`` lists them
COMMIT_COLUMNS: tuple[str, ...] = (
    "state",
    "input",
    "output",
    "error",
    "workflow_state",
    "wake_at",
    "waiting_for",
    "step_lock_until",
    "code_version",
    "awaiting_code_version",
    "replay_generation",
    "attributes",
)


def actor_changes(commit: ports.Commit) -> dict[str, Any]:
    """The actor columns ``commit`` sets (the fields not UNSET), JSON columns encoded (SerializationError)."""
    changes: dict[str, Any] = {}
    for name in ("state", "input", "output", "error"):
        value = getattr(commit, name)
        if value is not ports.UNSET:
            changes[name] = serde.to_json(value, where=name)
    if commit.workflow_state is not ports.UNSET:
        changes["workflow_state"] = commit.workflow_state
    if commit.wake_at is not ports.UNSET:
        changes["wake_at"] = commit.wake_at
    if commit.waiting_for is not ports.UNSET:
        changes["waiting_for"] = list(commit.waiting_for or [])
    if commit.step_lock_until is not ports.UNSET:
        changes["step_lock_until"] = commit.step_lock_until
    if commit.code_version is not ports.UNSET:
        changes["code_version"] = commit.code_version
    if commit.awaiting_code_version is not ports.UNSET:
        changes["awaiting_code_version"] = commit.awaiting_code_version
    if commit.replay_generation is not ports.UNSET:
        changes["replay_generation"] = int(commit.replay_generation)
    if isinstance(commit.attributes, dict) and commit.attributes:
        changes["attributes"] = dict(commit.attributes)  # merged into the stored ones, not replacing them
    return changes


def same_json(a: Any, b: Any) -> bool:
    """True when two JSON values are the same document (``1``, ``1.0`` and ``true`` differ, key order not)."""
    return json.dumps(a, sort_keys=True) == json.dumps(b, sort_keys=True)


def is_json_column(column: str) -> bool:
    """True for an actor column stored as JSON (jsonb on PostgreSQL)."""
    return column in _ACTOR_JSON


def audit_archive(action: ports.OperatorActionRecord) -> list:
    """The ``archived_entries`` column of an audit row (already tagged JSON); ``SerializationError`` when
    it is not JSON (nothing is written then)."""
    try:
        return json.loads(json.dumps(action.archived_entries))
    except (TypeError, ValueError) as exc:
        raise errors.SerializationError(
            f"archived entries of operator action {action.action!r} are not JSON: {exc}",
            where="operator action",
        ) from exc


def operator_action_from_model(row: models.OperatorAction) -> ports.OperatorActionRecord:
    """An ``OperatorAction`` row as a port record (``at`` in UTC)."""
    return ports.OperatorActionRecord(
        actor_id=row.actor_id,
        action=row.action,
        who=row.who,
        reason=row.reason,
        archived_entries=list(row.archived_entries or []),
        at=utc(row.at),
        id=str(row.id),
    )
