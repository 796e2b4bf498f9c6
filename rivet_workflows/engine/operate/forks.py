"""Fork: a new actor of the same type that starts from a copy of another's history (DESIGN.md section 19).

Pure engine code on the storage port, called by ``ActorHandle.fork``, the HTTP route, the admin's button and
``rivet fork``. Like a repair it decides on reads first (a refusal writes nothing), but it takes no lease:
the source is only read. The new actor, its copied history and both audit rows are one store write
(``Store.fork_actor``); the new actor is then handed to the dispatcher and runs from where the copy ends.
"""

from __future__ import annotations

import dataclasses
import uuid
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

from ..actor import audit
from ..actor.flow import flow_of
from ..model import errors, ports, serde
from ..model.keys import normalize_key
from . import dry_run, inspector
from .repair_plans import compensated, plan_fork

if TYPE_CHECKING:
    from ..model.roles import RuntimeRole

__all__ = ["FORK_SUFFIX", "ForkResult", "default_key", "fork", "plan_fork", "refusal"]

#: the prefix of the key part a fork appends to the source's key when no key is given
FORK_SUFFIX = "fork-"


def default_key(source_key: list) -> list:
    """``source_key`` plus one part ``"fork-<12 hex digits>"``, random, so each fork gets its own key."""
    return [*source_key, f"{FORK_SUFFIX}{uuid.uuid4().hex[:12]}"]


@dataclass(frozen=True)
class ForkResult:
    """What ``fork`` did: the new actor's ``actor_id`` and ``key``, the source's ``source_id``, the step it
    forked at (``entry_id``; None: the whole history) and ``copied``, the history entry ids the new actor
    starts with, in creation order."""

    actor_id: str
    key: list
    source_id: str
    entry_id: str | None
    copied: tuple[str, ...] = ()

    def as_dict(self) -> dict:
        """``{"actor_id", "key", "source_id", "entry_id", "copied"}`` for JSON responses."""
        return {
            "actor_id": self.actor_id,
            "key": list(self.key),
            "source_id": self.source_id,
            "entry_id": self.entry_id,
            "copied": list(self.copied),
        }


def refusal(
    runtime: RuntimeRole,
    record: ports.ActorRecord,
    entries: list[ports.EntryRecord],
    entry_id: str | None = None,
    *,
    now: datetime | None = None,
) -> errors.RivetWorkflowsError | None:
    """Why a fork of ``record`` (history ``entries``) at ``entry_id`` would be refused, or None; ``fork``
    raises it, the admin's buttons show its ``metadata["reason"]``. In order: ``ActorTypeNotRegisteredError``,
    ``WorkflowNotEnabledError``, with ``now`` ``WorkflowInFlightError`` while an executor holds the lease,
    ``EntryNotFoundError``/``InvalidReplayTargetError`` (the step), ``WorkflowRolledBackError`` when a copied
    step was compensated (``metadata.replay_from``: the step to fork from instead). The divergence check
    (a dry replay with the fork's input) is not part of it: it needs the input."""
    actor_id = record.actor_id
    if record.name not in runtime.registry:
        return errors.ActorTypeNotRegisteredError(
            f"actor {actor_id} has type {record.name!r}, which is not registered in this process",
            actor_id=actor_id,
            name=record.name,
            reason=f"refused: actor type {record.name!r} is not registered in this process",
        )
    if runtime.registry.get(record.name).run is None:
        return errors.WorkflowNotEnabledError(
            f"actor {record.name!r} has no workflow", actor_id=actor_id, reason="refused: no workflow"
        )
    if now is not None and inspector.in_flight(record, now):
        return errors.WorkflowInFlightError(
            "the workflow is running; fork it once it waits or finishes",
            actor_id=actor_id,
            reason="the workflow is running",
        )
    try:
        copied = plan_fork(entries, entry_id)
    except (errors.EntryNotFoundError, errors.InvalidReplayTargetError) as exc:
        exc.metadata.setdefault("reason", f"refused: {exc.message}")
        return exc
    undone = compensated(copied)
    if not undone:
        return None
    first = undone[0]
    return errors.WorkflowRolledBackError(
        f"the workflow was rolled back (the rollback handler of {first.key!r} ran), so a fork keeping "
        f"{first.key!r} would carry on from work already undone; nothing was written. Fork from "
        f"{first.key!r}, the earliest compensated step, or from an earlier step",
        actor_id=actor_id,
        operation="fork",
        compensated=[e.key for e in undone],
        replay_from=first.key,
        reason=f"refused: rolled back; fork from {first.key!r} or earlier",
    )


def _refuse_divergence(
    runtime: RuntimeRole, record: ports.ActorRecord, copied: list[ports.EntryRecord]
) -> None:
    """Dry-replay the copied history with the fork's input and state (no step body, hook or write);
    ``HistoryDivergedError`` when it does not replay on the current code (e.g. a branch on the input)."""
    result = dry_run.check_actor(runtime, record, copied, as_state=ports.SLEEPING)
    if result.outcome != dry_run.DIVERGED:
        return
    raise errors.HistoryDivergedError(
        "the history the fork would copy does not replay on the current code with the fork's input and "
        f"state, so the new actor would fail with HistoryDivergedError; nothing was written. {result.message}",
        actor_id=record.actor_id,
        operation="fork",
        location=result.location,
        reached=result.reached,
        hint="fork from an earlier step (the copy keeps less of the history), or keep the input the "
        "recorded branch depends on",
    )


def fork(
    runtime: RuntimeRole,
    source_id: str,
    entry_id: str | None = None,
    *,
    input: Any = ports.UNSET,
    state: Any = ports.UNSET,
    key: Any = None,
    who: str = audit.PYTHON,
    reason: str | None = None,
) -> ForkResult:
    """Fork the actor ``source_id``: create a new actor of its type whose history is a copy of the
    source's up to, not including, the step ``entry_id`` (all of it when None), and run it from there.

    ``input``/``state``: the new actor's (any serializable values; the source's when ``ports.UNSET``;
    ``on_create`` does not run). ``key`` (str, int or a list of them): the new actor's key; None gives
    ``default_key(source key)``. The copied history is ``repair_plans.plan_fork``'s: a replay from
    ``entry_id``'s cut, with failed steps reset to run afresh and open completable messages closed; the
    source's pending messages and schedules are not copied. The source is not changed. The new actor
    (due now), its history and the audit rows ``fork`` on both actors (by ``who``, ``reason``; each
    reason names the other actor) are one store write (``Store.fork_actor``); then the new actor is woken.

    Returns a ``ForkResult``. Raises, writing nothing: ``ActorNotFoundError`` (no source),
    ``ActorTypeNotRegisteredError``/``WorkflowNotEnabledError`` (409/400), ``WorkflowInFlightError`` (409)
    while an executor holds the source, ``EntryNotFoundError`` (404), ``InvalidReplayTargetError`` (400: not
    a step), ``WorkflowRolledBackError`` (409: a copied step was compensated; fork from
    ``metadata.replay_from``), ``HistoryDivergedError`` (409: the copy does not replay with the new input),
    ``ActorAlreadyExistsError`` (409: the key is taken), ``InvalidKeyError``, ``SerializationError``/
    ``PayloadTooLargeError`` (input or state), ``ValueError`` (bad ``who``). DESIGN.md section 19.
    """
    store = runtime.store
    audit.action_record(source_id, audit.FORK, who, reason)  # refuse a bad who before anything
    record = store.get_actor(source_id)
    entries = store.load_history(source_id)
    refused = refusal(runtime, record, entries, entry_id, now=store.now())
    if refused is not None:
        raise refused
    definition = runtime.registry.get(record.name)
    copied = plan_fork(entries, entry_id)

    limit = runtime.settings.max_payload_bytes
    new_key = default_key(record.key) if key is None else normalize_key(key)
    serde.to_json(new_key, where="actor key (MAX_KEY_BYTES)", max_bytes=runtime.settings.max_key_bytes)
    new_input = (
        record.input if input is ports.UNSET else serde.roundtrip(input, where="fork input", max_bytes=limit)
    )
    new_state = (
        record.state if state is ports.UNSET else serde.roundtrip(state, where="fork state", max_bytes=limit)
    )
    if store.find_actor(record.name, new_key) is not None:
        raise _taken(record.name, new_key)
    as_forked = dataclasses.replace(record, key=new_key, input=new_input, state=new_state)
    _refuse_divergence(runtime, as_forked, copied)

    where = "the whole history" if entry_id is None else f"before {entry_id!r}"
    said = f": {reason.strip()}" if isinstance(reason, str) and reason.strip() else ""
    created = store.fork_actor(
        source_id,
        record.name,
        new_key,
        new_input,
        new_state,
        copied,
        source_audit=audit.action_record(
            source_id, audit.FORK, who, f"forked to {new_key!r} ({where}){said}"
        ),
        fork_audit=audit.action_record("", audit.FORK, who, f"forked from {source_id} ({where}){said}"),
        flow=flow_of(runtime, definition, new_key, new_state),
    )
    runtime.wake(created.actor_id)
    return ForkResult(
        actor_id=created.actor_id,
        key=list(created.key),
        source_id=source_id,
        entry_id=entry_id,
        copied=tuple(e.key for e in copied),
    )


def _taken(name: str, key: list) -> errors.ActorAlreadyExistsError:
    return errors.ActorAlreadyExistsError(
        f"actor {name!r} with key {key!r} already exists; fork with another key (or none: a fork suffix is added)",
        name=name,
        key=key,
    )
