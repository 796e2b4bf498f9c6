"""Golden histories: export an actor's workflow history as JSON, replay one against the current code (DESIGN.md 11).

``export_history`` writes what the inspector shows (the HTTP inspector's history object) plus the actor's
identity and values; ``replay_history`` puts such an export into a store through the store's own write API
and replays it with ``rivet check``'s side-effect-free replay (``engine.dry_run``), so a saved history
proves that new code, or a new store, still replays what the old code recorded (Temporal's replayer test,
for this engine). Importing this module does not import Django.
"""

from __future__ import annotations

import copy
import json
from datetime import datetime
from typing import TYPE_CHECKING, Any

from ..engine.client.client import ActorHandle
from ..engine.model import errors, ports, serde
from ..engine.operate import dry_run, inspector
from ..engine.operate.dry_run import ReplayReport
from ..engine.run import retry
from ..engine.runtime.runtime import Runtime
from .memory import MemoryStore

if TYPE_CHECKING:
    from ..engine.model.definitions import Registry

__all__ = ["REPLAY_OWNER", "ReplayReport", "export_history", "replay_history"]

#: lease owner of the actor a replay writes: the replay holds its lease throughout, so no worker on a
#: shared store ever claims (and runs) it, and destroys it at the end
REPLAY_OWNER = "rivet-golden-replay"
#: seconds of that lease (the replay takes milliseconds; this only has to outlast it)
_REPLAY_LEASE_SECONDS = 3600.0
#: the entry metadata fields that hold instants (compared as instants in the round-trip check)
_INSTANTS = ("lastAttemptAt", "createdAt", "completedAt", "rollbackCompletedAt")


class _NoWake:
    """The dispatcher of a replay runtime: nothing a replay does wakes anything (it writes nothing)."""

    def wake(self, actor_id: str) -> None:
        """Ignore the hint."""


def _default_runtime() -> Runtime:
    from .. import django_runtime  # lazily: this module stays importable without Django

    return django_runtime.get_runtime()


def export_history(handle_or_actor_id: ActorHandle | str, *, runtime: Runtime | None = None) -> dict:
    """The actor's workflow history as a JSON-ready dict (DESIGN.md section 11, "Golden histories").

    ``handle_or_actor_id`` is an ``ActorHandle`` (its runtime is used unless ``runtime`` is given) or an
    actor id (str) on ``runtime``, by default the project's Django runtime
    (``rivet_workflows.django_runtime``). Returns::

        {"actor": {"name", "key", "state", "input", "workflow_state", "output", "error"},
         "history": <the HTTP inspector's history object, GET .../inspector/workflow-history "history">}

    ``state``, ``input`` and ``output`` are tagged JSON (``engine.serde``), ``error`` the stored error
    dict or None; ``history`` is None for an actor without a run handler. ``output`` and ``error`` go
    beyond DESIGN's minimum so that a replay can tell the workflow's own recorded failure from a new one.
    Export an actor that is not running (a history read while a step commits may be one commit behind
    its state). Raises ``ActorNotFoundError`` for an unknown actor and ``TypeError`` for another argument.
    ``json.dumps`` of the result round-trips; ``replay_history`` takes it back.
    """
    if isinstance(handle_or_actor_id, ActorHandle):
        actor_id = handle_or_actor_id.actor_id
        runtime = runtime if runtime is not None else handle_or_actor_id.runtime
    elif isinstance(handle_or_actor_id, str):
        actor_id = handle_or_actor_id
        runtime = runtime if runtime is not None else _default_runtime()
    else:
        raise TypeError(f"export_history takes an ActorHandle or an actor id, not {type(handle_or_actor_id)}")
    record = runtime.store.get_actor(actor_id)
    history = inspector.workflow_history(runtime, actor_id)["history"]
    return {
        "actor": {
            "name": record.name,
            "key": serde.to_json(list(record.key), where="actor key"),
            "state": serde.to_json(record.state, where="actor state"),
            "input": serde.to_json(record.input, where="actor input"),
            "workflow_state": record.workflow_state,
            "output": serde.to_json(record.output, where="actor output"),
            "error": serde.to_json(record.error, where="actor error"),
        },
        "history": history,
    }


# --- reading an export back -----------------------------------------------------------------------------


def _instant(value: Any, where: str) -> datetime | None:
    if value is None:
        return None
    try:
        parsed = datetime.fromisoformat(value)
    except (TypeError, ValueError):
        raise errors.InvalidExportError(f"{where} is not an ISO 8601 instant: {value!r}") from None
    if parsed.tzinfo is None:
        raise errors.InvalidExportError(f"{where} has no time zone: {value!r}")
    return parsed


def _parse(exported: Any) -> tuple[dict, list[ports.EntryRecord]]:
    """``(actor dict with decoded values, entries in creation order)`` of an export; InvalidExportError."""
    if not isinstance(exported, dict) or not isinstance(exported.get("actor"), dict):
        raise errors.InvalidExportError('an exported history is a dict {"actor": {...}, "history": {...}}')
    raw = exported["actor"]
    missing = [f for f in ("name", "key", "state", "input", "workflow_state") if f not in raw]
    if missing:
        raise errors.InvalidExportError(f"the exported actor has no {', '.join(missing)}", missing=missing)
    if not isinstance(raw["name"], str) or not isinstance(raw["key"], list):
        raise errors.InvalidExportError("the exported actor's name must be a str and its key a list")
    if raw["workflow_state"] not in {
        ports.PENDING,
        ports.RUNNING,
        ports.SLEEPING,
        ports.ROLLING_BACK,
        *ports.HALTED_STATES,
    }:
        raise errors.InvalidExportError(f"unknown workflow state {raw['workflow_state']!r}")
    try:
        actor = {
            "name": raw["name"],
            "key": serde.from_json(raw["key"]),
            "state": serde.from_json(raw["state"]),
            "input": serde.from_json(raw["input"]),
            "workflow_state": raw["workflow_state"],
            "output": serde.from_json(raw.get("output")),
            "error": serde.from_json(raw.get("error")),
        }
    except errors.SerializationError as exc:
        raise errors.InvalidExportError(f"the exported actor holds a malformed value: {exc}") from exc
    history = exported.get("history")
    if history is None:
        return actor, []
    if not isinstance(history, dict) or not isinstance(history.get("entries"), list):
        raise errors.InvalidExportError('the exported "history" is the inspector\'s {"entries", ...} or None')
    metadata = history.get("entryMetadata") or {}
    entries = []
    for view in history["entries"]:
        try:
            key = view["id"]
            meta = metadata[key]
            where = f"entry {key!r}"
            kind = view["kind"]["type"]
            entries.append(
                ports.EntryRecord(
                    key=key,
                    location=list(view["location"]),
                    kind=kind,
                    data=_with_attempt_log(_entry_data(view) or {}, kind, meta, where),
                    status=_stored_status(kind, meta["status"]),
                    attempts=int(meta["attempts"]),
                    error=serde.from_json(meta.get("error")),
                    last_attempt_at=_instant(meta.get("lastAttemptAt"), f"{where} lastAttemptAt"),
                    created_at=_instant(meta.get("createdAt"), f"{where} createdAt"),
                    completed_at=_instant(meta.get("completedAt"), f"{where} completedAt"),
                    rollback_completed_at=_instant(
                        meta.get("rollbackCompletedAt"), f"{where} rollbackCompletedAt"
                    ),
                    rollback_error=serde.from_json(meta.get("rollbackError")),
                    code_version=meta.get("codeVersion"),  # absent from exports made before versions
                )
            )
        except (KeyError, TypeError, ValueError, errors.SerializationError) as exc:
            raise errors.InvalidExportError(
                f"malformed history entry {view!r:.200}: {type(exc).__name__}: {exc}"
            ) from exc
    return actor, entries


def _with_attempt_log(data: dict, kind: str, meta: dict, where: str) -> dict:
    """A step's data with the attempts its metadata lists (``attemptLog``, kept in the data under
    ``retry.ATTEMPT_LOG``); exports written before attempts were logged have none."""
    shown = meta.get("attemptLog")
    if kind != "step" or not shown:
        return data
    log = [
        {
            "attempt": int(item["attempt"]),
            "started_at": _instant(item.get("startedAt"), f"{where} attempt startedAt"),
            "finished_at": _instant(item.get("finishedAt"), f"{where} attempt finishedAt"),
            "outcome": str(item["outcome"]),
            "error": item.get("error"),
        }
        for item in shown
    ]
    return {**data, retry.ATTEMPT_LOG: log}


def _entry_data(view: dict) -> Any:
    """An exported entry's data as Python values. The inspector shows data as plain JSON with the
    ``types`` of the values JSON cannot hold (``serde.to_plain``); exports written before it did hold
    tagged JSON and have no ``types`` (``serde.from_json`` reads them; on plain JSON it changes nothing)."""
    data = view["kind"].get("data")
    if "types" in view:
        return serde.from_plain(data, view["types"], prefix="/kind/data")
    return serde.from_json(data)


def _stored_status(kind: str, shown: str) -> str:
    """The metadata status to store for the status the inspector shows: a sleep shows its state, and a
    queue wait's deadline that lost to a message (``interrupted``) is stored completed."""
    if kind == "sleep" and shown == "interrupted":
        return ports.ENTRY_COMPLETED
    return shown


def _comparable(view: dict, meta: dict) -> str:
    """An entry's view and metadata as one canonical JSON text, instants as instants (not spellings)."""
    meta = dict(meta)
    for name in _INSTANTS:
        if meta.get(name) is not None:
            meta[name] = datetime.fromisoformat(meta[name]).timestamp()
    return json.dumps({"entry": view, "meta": meta}, sort_keys=True)


def _views(entries: list[ports.EntryRecord]) -> list[tuple[str, str]]:
    """``(key, comparable view)`` of each entry as the inspector shows it."""
    by_key = {e.key: e for e in entries}
    return [(e.key, _comparable(*inspector.entry_view(e, by_key))) for e in entries]


def _round_trip_problem(written: list[ports.EntryRecord], stored: list[ports.EntryRecord]) -> str | None:
    """None when ``stored`` (read back from the store) shows as the ``written`` entries; else what
    differs. Both go through the inspector's view, so an export of any version compares the same way."""
    want, got = _views(written), _views(stored)
    if [k for k, _ in want] != [k for k, _ in got]:
        return f"entries {[k for k, _ in want]} were written, {[k for k, _ in got]} read back (in this order)"
    for (key, a), (_, b) in zip(want, got, strict=True):
        if a != b:
            return f"entry {key!r} was written as {a} and read back as {b}"
    return None


def _replay_runtime(registry: Registry, store: Any) -> Runtime:
    """A runtime on ``store`` for the replay. ``Runtime()`` binds its registry, so it gets a shallow copy of
    ``registry`` (same definitions): the caller's registry stays bound to its own runtime."""
    return Runtime(store, _NoWake(), copy.copy(registry))


def _same_failure(error: dict | None, actor: dict) -> bool:
    """True when the replay raised the error the workflow failed with (the failure replayed, not a new one)."""
    recorded = actor["error"]
    if actor["workflow_state"] != ports.FAILED or not isinstance(recorded, dict) or error is None:
        return False
    return (error.get("name"), error.get("message")) == (recorded.get("name"), recorded.get("message"))


def replay_history(registry: Registry, exported: dict, *, store: Any = None) -> ReplayReport:
    """Replay a saved history (``export_history``'s dict, e.g. read from a golden JSON file) against the
    actor definitions of ``registry``, executing nothing: no step body, rollback handler or hook runs, as
    in ``manage.py rivet check`` (the same replay, ``engine.dry_run.check_actor``).

    The history goes into ``store`` (default: a fresh ``MemoryStore``) through the store's normal write
    API: the actor is created under its exported name and key, not due, its lease is taken by
    ``REPLAY_OWNER`` (so no worker of a shared store runs it) and the entries, workflow state, output and
    error are committed; the replay then reads them back, so it also proves the store round-trips the
    history (a store that gives back something else makes the report fail, saying which entry). The actor
    is destroyed afterwards, whatever happened: a replay leaves the store as it found it.

    Returns a ``ReplayReport``: ``ok`` when the code replays every recorded entry up to new work or
    reproduces the recorded workflow failure; else ``diverged_at`` (the recorded key), ``reached`` (the
    entry the code reached instead) and ``error`` (the message), or only ``error`` for another failure
    (the actor type is not in ``registry``, the replay raised). Raises ``InvalidExportError`` for a
    malformed export and ``ActorAlreadyExistsError`` when ``store`` already has an actor with that name
    and key (nothing is touched then).
    """
    actor, entries = _parse(exported)
    if store is None:
        store = MemoryStore()
    if actor["name"] not in registry:
        return ReplayReport(ok=False, error=f"no actor type named {actor['name']!r} in the registry")
    record, created = store.create_actor(actor["name"], actor["key"], actor["input"], actor["state"])
    if not created:
        raise errors.ActorAlreadyExistsError(
            f"the store already has an actor {actor['name']!r} with key {actor['key']!r}; replay into "
            "another store (the default is a fresh MemoryStore)",
            name=actor["name"],
            key=actor["key"],
            actor_id=record.actor_id,
        )
    try:
        token = store.claim(record.actor_id, REPLAY_OWNER, _REPLAY_LEASE_SECONDS)
        if token is None:  # pragma: no cover - an actor created a moment ago is never leased
            return ReplayReport(ok=False, error="the store refused the replay's claim of the new actor")
        commit = ports.Commit(
            upserts=entries,
            workflow_state=actor["workflow_state"],
            output=actor["output"],
            error=actor["error"],
            wake_at=None,
            waiting_for=[],
        )
        if not store.commit(record.actor_id, token, commit).ok:  # pragma: no cover - we hold the lease
            return ReplayReport(ok=False, error="the store rejected the history's commit (lease lost)")
        record = store.get_actor(record.actor_id)
        stored = store.load_history(record.actor_id)
        problem = _round_trip_problem(entries, stored)
        if problem is None and (record.state, record.workflow_state) != (
            actor["state"],
            actor["workflow_state"],
        ):
            problem = (
                f"the actor was written with state {actor['state']!r} and read back with {record.state!r}"
            )
        if problem is not None:
            return ReplayReport(
                ok=False, error=f"the store did not give the history back as written: {problem}"
            )
        checked = dry_run.check_actor(_replay_runtime(registry, store), record, stored)
    finally:
        store.destroy_actor(record.actor_id)
    if checked.outcome == dry_run.OK:
        return ReplayReport(ok=True)
    if checked.outcome == dry_run.DIVERGED:
        return ReplayReport(
            ok=False, diverged_at=checked.location, reached=checked.reached, error=checked.message
        )
    if _same_failure(checked.error, actor):
        return ReplayReport(ok=True)
    return ReplayReport(ok=False, error=checked.message)
