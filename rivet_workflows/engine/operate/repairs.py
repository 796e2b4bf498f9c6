"""Replay-from-step, replay-all and recover: planning, refusals and the fenced write (ENGINE-SEMANTICS.md 9).

Pure engine code on the storage port: the HTTP API, the admin, ``manage.py rivet recover`` and
``ActorHandle.recover`` all call it. A repair decides on a read first (a refusal writes nothing, not even the
lease), then takes the lease (``Store.claim_for_operator``) and writes one fenced ``Commit`` that releases it
with the repair's audit row (who, why, the entries it deleted or reset, archived), and wakes the actor.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any

from ..actor import audit
from ..model import errors, ports
from . import dry_run, inspector
from .repair_plans import compensated, history_after_recover, plan_recover, plan_replay, plan_replay_resets

if TYPE_CHECKING:
    from ..model.roles import RuntimeRole

__all__ = [
    "RECOVER",
    "REPLAY",
    "RepairResult",
    "ReplayPlan",
    "check_recover",
    "compensated",
    "history_after_recover",
    "pause",
    "plan_recover",
    "plan_replay",
    "plan_replay_resets",
    "reason",
    "recover",
    "refusal",
    "replay",
    "replay_plan",
    "restartable",
    "resume",
]

#: the operations ``refusal`` judges
RECOVER = "recover"
REPLAY = "replay"


def _rolled_back(
    actor_id: str, kept: list[ports.EntryRecord], operation: str
) -> errors.WorkflowRolledBackError | None:
    """The refusal of an ``operation`` that keeps ``kept``: one of them was compensated by a rollback."""
    undone = compensated(kept)
    if not undone:
        return None
    first = undone[0]
    names = ", ".join(repr(e.key) for e in undone[:5]) + (
        f" and {len(undone) - 5} more" if len(undone) > 5 else ""
    )
    return errors.WorkflowRolledBackError(
        f"the workflow was rolled back (the rollback handlers of {names} ran), so a {operation} would carry "
        f"on from work already undone; nothing was changed. Replay from {first.key!r}, the earliest "
        "compensated step, or replay all, to redo that work",
        actor_id=actor_id,
        operation=operation,
        compensated=[e.key for e in undone],
        replay_from=first.key,
        reason=f"refused: rolled back (the rollback handler of {first.key!r} ran); replay from "
        f"{first.key!r} or replay all",
    )


def _in_flight(actor_id: str) -> errors.WorkflowInFlightError:
    return errors.WorkflowInFlightError(
        "the workflow is running; try again once it waits or finishes",
        actor_id=actor_id,
        reason="the workflow is running",
    )


def _not_repairable(runtime: RuntimeRole, record: ports.ActorRecord) -> errors.RivetWorkflowsError | None:
    """The refusal of any repair of an actor whose type is not registered here or has no workflow."""
    if record.name not in runtime.registry:
        return errors.ActorTypeNotRegisteredError(
            f"actor {record.actor_id} has type {record.name!r}, which is not registered in this process; "
            "register it again (or deploy the code that has it) before replaying or recovering its workflow",
            actor_id=record.actor_id,
            name=record.name,
            reason=f"refused: actor type {record.name!r} is not registered in this process",
        )
    if runtime.registry.get(record.name).run is None:
        return errors.WorkflowNotEnabledError(
            f"actor {record.name!r} has no workflow",
            actor_id=record.actor_id,
            reason="refused: this actor has no workflow",
        )
    return None


def refusal(
    runtime: RuntimeRole,
    record: ports.ActorRecord,
    entries: list[ports.EntryRecord],
    operation: str,
    entry_id: str | None = None,
    *,
    now: datetime | None = None,
) -> errors.RivetWorkflowsError | None:
    """Why ``operation`` (``RECOVER``, or ``REPLAY`` from the step ``entry_id``, of everything when None)
    of ``record``'s workflow, whose history is ``entries``, would be refused; None when it is allowed.

    The one "restartable" predicate: ``replay``/``recover`` raise what it returns, and the HTTP API, the
    admin's buttons, ``rivet recover`` and ``rivet check --include-failed`` all ask it. The refusal is
    the exception the repair raises, with ``metadata["reason"]``, a short text for a tooltip or a command
    line (``"refused: rolled back (...); replay from 'reserve' or replay all"``). Checked in order:
    ``ActorTypeNotRegisteredError`` (type not registered here), ``WorkflowNotEnabledError`` (no run
    function), with ``now`` (a store-clock instant) ``WorkflowInFlightError`` while an executor holds the
    lease, for recover ``WorkflowNotFailedError``, for replay ``EntryNotFoundError`` and
    ``InvalidReplayTargetError``, then ``WorkflowRolledBackError`` when a step the operation keeps was
    compensated by a rollback (``metadata.replay_from``: the earliest compensated step; a replay from it,
    or from any step before it, or of everything, is allowed). The divergence check (a dry replay) is not
    part of it: the repair runs it next, ``check_recover`` for ``rivet check`` (ENGINE-SEMANTICS.md 9).
    """
    refused = _not_repairable(runtime, record)
    if refused is not None:
        return refused
    actor_id = record.actor_id
    if now is not None and inspector.in_flight(record, now):
        return _in_flight(actor_id)
    if operation == RECOVER:
        if record.workflow_state != ports.FAILED:
            return errors.WorkflowNotFailedError(
                f"the workflow is {record.workflow_state}, not failed; nothing to recover",
                actor_id=actor_id,
                workflow_state=record.workflow_state,
                reason=f"only a failed workflow can be recovered (this one is {record.workflow_state})",
            )
        return _rolled_back(actor_id, entries, RECOVER)
    if operation != REPLAY:
        raise ValueError(f"operation must be {RECOVER!r} or {REPLAY!r}, got {operation!r}")
    try:
        gone = set(plan_replay(entries, entry_id))
    except (errors.EntryNotFoundError, errors.InvalidReplayTargetError) as exc:
        if "reason" not in exc.metadata:
            exc.set_detail("reason", f"refused: {exc.message}")
        return exc
    kept = [e for e in entries if e.key not in gone]
    return _rolled_back(actor_id, kept, _replay_name(entry_id))


def restartable(
    runtime: RuntimeRole,
    record: ports.ActorRecord,
    entries: list[ports.EntryRecord],
    operation: str = RECOVER,
    entry_id: str | None = None,
    *,
    now: datetime | None = None,
) -> bool:
    """True when ``refusal`` has no objection to ``operation`` (same arguments)."""
    return refusal(runtime, record, entries, operation, entry_id, now=now) is None


def reason(error: BaseException) -> str:
    """The short text of a refusal (``metadata["reason"]``), else ``"refused: <code>: <message>"``."""
    if isinstance(error, errors.RivetWorkflowsError):
        text = error.reason
        if isinstance(text, str) and text:
            return text
        return f"refused: {error.code.replace('_', ' ')}: {error.message}"
    return f"refused: {type(error).__name__}: {error}"


def _replay_name(entry_id: str | None) -> str:
    return "replay" if entry_id is None else f"replay from {entry_id!r}"


def _refuse_divergence(
    runtime: RuntimeRole, record: ports.ActorRecord, after: list[ports.EntryRecord], operation: str
) -> None:
    """Dry-replay (``rivet check``'s replay: no step body, hook or write) the history ``after`` as the
    operation would leave it, with the workflow sleeping; raise ``HistoryDivergedError`` if it diverges."""
    result = dry_run.check_actor(runtime, record, after, as_state=ports.SLEEPING)
    if result.outcome != dry_run.DIVERGED:
        return
    other = "replay from an earlier step or replay all" if operation.startswith("replay") else "replay"
    hint = (
        "change the code so it replays this history (ctx.removed(name, kind) where a recorded entry was "
        "dropped; a ctx.get_version gate for runs already past a change; `manage.py rivet check` shows the "
        f"same), or {other}, which keeps less of the history"
    )
    raise errors.HistoryDivergedError(
        f"the history a {operation} would leave does not replay on the current code, so the workflow would "
        f"fail with HistoryDivergedError; nothing was changed. {result.message}",
        actor_id=record.actor_id,
        operation=operation,
        location=result.location,
        reached=result.reached,
        hint=hint,
    )


# --- repairs -------------------------------------------------------------------------------------------


@dataclass
class RepairResult:
    """What a replay or recover did: ``deleted`` entry keys, ``reset`` entry keys, the new workflow state."""

    actor_id: str
    deleted: list[str] = field(default_factory=list)
    reset: list[str] = field(default_factory=list)
    workflow_state: str = ports.SLEEPING

    def as_dict(self) -> dict:
        """``{"actorId", "deleted", "reset", "workflowState"}`` for JSON responses."""
        out = {"actorId": self.actor_id, "deleted": list(self.deleted), "reset": list(self.reset)}
        return {**out, "workflowState": self.workflow_state}


def _repair(
    runtime: RuntimeRole, actor_id: str, plan: Any, action: str, who: str, reason: str | None
) -> RepairResult:
    """Decide, then claim the lease, commit ``plan(record, entries) -> (deletes, upserts, archived)`` (it
    raises the refusal) with its audit row (``action`` by ``who`` for ``reason``) and wake. Every refusal is
    decided before the claim, so it writes nothing (docs/explanation/replay-and-recover.md); if the actor
    changed between the read and the claim, the plan is made again, and a refusal then gives the lease back.
    A repair that deletes entries bumps ``replay_generation`` (new idempotency keys for the steps rerun)."""
    store = runtime.store
    audit.action_record(actor_id, action, who, reason)  # refuse a bad action or who before anything
    record, entries = store.get_actor(actor_id), store.load_history(actor_id)
    refused = _not_repairable(runtime, record)
    if refused is None and inspector.in_flight(record, store.now()):
        refused = _in_flight(actor_id)
    if refused is not None:
        raise refused
    planned = plan(record, entries)  # raises the refusal: nothing claimed yet
    token = store.claim_for_operator(actor_id, runtime.owner, runtime.settings.lease_seconds)
    if token is None:  # an executor claimed it since the read
        raise _in_flight(actor_id)
    committed = False
    try:
        fresh, fresh_entries = store.get_actor(actor_id), store.load_history(actor_id)
        if (fresh.updated_at, fresh_entries) != (record.updated_at, entries):  # changed since: plan again
            record, planned = fresh, plan(fresh, fresh_entries)
        deletes, upserts, archived = planned
        commit = ports.Commit(
            deletes=list(deletes),
            upserts=list(upserts),
            output=None,
            error=None,
            workflow_state=ports.SLEEPING,
            wake_at=store.now(),
            waiting_for=[],
            step_lock_until=None,
            release=True,
            audit=audit.action_record(actor_id, action, who, reason, archived),
        )
        if commit.deletes:
            commit.replay_generation = record.replay_generation + 1
        result = store.commit(actor_id, token, commit)
        committed = True
        if not result.ok:  # another executor took the workflow over
            raise _in_flight(actor_id)
    finally:
        if not committed:  # give the lease back without changing anything
            store.commit(actor_id, token, ports.Commit(release=True))
    for woken in result.woken or [actor_id]:
        runtime.wake(woken)
    runtime.notify_history(actor_id)
    return RepairResult(
        actor_id=actor_id,
        deleted=list(deletes),
        reset=[e.key for e in upserts],
        workflow_state=ports.SLEEPING,
    )


@dataclass(frozen=True)
class ReplayPlan:
    """What a replay would do, computed without writing anything (docs/explanation/replay-and-recover.md).

    ``entry_id``: the step it replays from (None: the whole workflow); ``reset``: the history entry ids it
    would reopen (a join or race holding a replayed branch); ``deleted``: the entry ids it would delete, in
    creation order; ``rerun``: the ids of the recorded steps that run again, in the order they first ran.
    Each of those steps gets a new idempotency key when it runs again (the replay bumps the run's replay
    generation), so a side effect keyed by ``step.idempotency_key`` alone happens a second time.
    """

    entry_id: str | None
    reset: tuple[str, ...] = ()
    deleted: tuple[str, ...] = ()
    rerun: tuple[str, ...] = ()

    def as_dict(self) -> dict:
        """``{"entryId", "reset", "deleted", "rerun"}`` for JSON responses (HTTP replay with ``dryRun``)."""
        return {
            "entryId": self.entry_id,
            "reset": list(self.reset),
            "deleted": list(self.deleted),
            "rerun": list(self.rerun),
        }


def _replay_changes(
    runtime: RuntimeRole,
    record: ports.ActorRecord,
    entries: list[ports.EntryRecord],
    entry_id: str | None,
    *,
    now: datetime | None = None,
) -> tuple[list[str], list[ports.EntryRecord], list[ports.EntryRecord]]:
    """``(deletes, resets, archived)`` of a replay of ``record`` from ``entry_id``, after its refusals
    (``refusal``, with ``now`` also the lease) and its divergence check: the one computation behind both
    ``replay`` and ``replay_plan``, so a plan shows exactly what the replay then does."""
    refused = refusal(runtime, record, entries, REPLAY, entry_id, now=now)
    if refused is not None:
        raise refused
    deletes = plan_replay(entries, entry_id)
    resets = plan_replay_resets(entries, deletes)
    gone = set(deletes)
    reset = {e.key: e for e in resets}
    kept = [reset.get(e.key, e) for e in entries if e.key not in gone]
    _refuse_divergence(runtime, record, kept, _replay_name(entry_id))
    # archived: the deleted entries and the reopened joins/races, as they were before
    return deletes, resets, [e for e in entries if e.key in gone or e.key in reset]


def replay_plan(runtime: RuntimeRole, actor_id: str, entry_id: str | None = None) -> ReplayPlan:
    """The ``ReplayPlan`` of ``replay(runtime, actor_id, entry_id)``, writing nothing: no lease, no row,
    no audit, no wake-up. Raises what that replay would raise now (``WorkflowInFlightError`` while an
    executor holds the lease, ``EntryNotFoundError``, ``InvalidReplayTargetError``,
    ``WorkflowRolledBackError``, ``HistoryDivergedError``, ``ActorNotFoundError``, ...)."""
    store = runtime.store
    record = store.get_actor(actor_id)
    entries = store.load_history(actor_id)
    deletes, resets, _ = _replay_changes(runtime, record, entries, entry_id, now=store.now())
    by_key = {e.key: e for e in entries}
    steps = sorted((by_key[k] for k in deletes if by_key[k].kind == "step"), key=lambda e: e.seq)
    return ReplayPlan(
        entry_id=entry_id,
        reset=tuple(e.key for e in resets),
        deleted=tuple(deletes),
        rerun=tuple(e.key for e in steps),
    )


def replay(
    runtime: RuntimeRole,
    actor_id: str,
    entry_id: str | None = None,
    *,
    who: str = audit.PYTHON,
    reason: str | None = None,
    bulk: bool = False,
) -> RepairResult:
    """Replay ``actor_id``'s workflow from the step ``entry_id``, or from the start when it is None.

    Deletes the entries ``plan_replay`` names, clears the workflow output and error, sets the workflow
    sleeping and due now, and wakes it (ENGINE-SEMANTICS.md section 9). The same commit writes the audit
    row: action ``replay`` (``replay_all`` without ``entry_id``; ``bulk_...`` with ``bulk``) by ``who``
    (a user name, ``"token"``, ``"python"``, ``"command"``) for ``reason``, the deleted entries archived.

    Before changing anything it checks the history it would keep: refused with ``WorkflowRolledBackError``
    (409 ``rolled_back``) when a kept step was compensated by a rollback (replay from the earliest
    compensated step, named in the message and ``metadata.replay_from``, or replay all), and with
    ``HistoryDivergedError`` (409 ``history_diverged``, ``metadata.location``/``hint``) when the kept
    entries do not replay on the current code (the dry replay of ``rivet check``). Also raises
    ``WorkflowInFlightError`` (409 ``workflow_in_flight``) while an executor holds the lease,
    ``ActorNotFoundError``, ``EntryNotFoundError``, ``InvalidReplayTargetError``,
    ``WorkflowNotEnabledError`` and ``ActorTypeNotRegisteredError`` (409). Nothing is written when it raises.
    """

    def plan(record: ports.ActorRecord, entries: list[ports.EntryRecord]) -> tuple[list[str], list, list]:
        return _replay_changes(runtime, record, entries, entry_id)  # in flight: checked by _repair

    action = audit.REPLAY_ALL if entry_id is None else audit.REPLAY
    return _repair(runtime, actor_id, plan, audit.named(action, bulk), who, reason)


def recover(
    runtime: RuntimeRole,
    actor_id: str,
    *,
    who: str = audit.PYTHON,
    reason: str | None = None,
    bulk: bool = False,
) -> RepairResult:
    """Recover a failed workflow: failed/exhausted steps back to pending with 0 attempts (``plan_recover``),
    the workflow error cleared, the workflow sleeping and woken (ENGINE-SEMANTICS.md section 3). The same
    commit writes the audit row (``recover``, or ``bulk_recover``; ``who`` and ``reason`` as ``replay``)
    with the reset entries archived as they were before.

    Raises ``WorkflowNotFailedError`` (409) when the workflow is not failed, ``WorkflowRolledBackError``
    (409 ``rolled_back``) when the run was rolled back (a step's compensation ran: replay from that step or
    replay all instead), ``HistoryDivergedError`` (409 ``history_diverged``) when the history with the
    failed steps reset does not replay on the current code (checked by a dry replay up to the first step
    that would run), ``WorkflowInFlightError`` while an executor holds the lease, ``ActorNotFoundError``,
    ``WorkflowNotEnabledError`` and ``ActorTypeNotRegisteredError`` (409: the actor's type is not
    registered). Nothing is written when it raises.
    """

    def plan(record: ports.ActorRecord, entries: list[ports.EntryRecord]) -> tuple[list[str], list]:
        refused = refusal(runtime, record, entries, RECOVER)  # in flight: checked by _repair
        if refused is not None:
            raise refused
        upserts = plan_recover(entries)
        _refuse_divergence(runtime, record, history_after_recover(entries), "recover")
        reset = {e.key for e in upserts}
        return [], upserts, [e for e in entries if e.key in reset]

    return _repair(runtime, actor_id, plan, audit.bulk(audit.RECOVER) if bulk else audit.RECOVER, who, reason)


def check_recover(
    runtime: RuntimeRole, actor: ports.ActorRecord, *, now: datetime | None = None
) -> dry_run.CheckResult | None:
    """Would ``recover`` restart this failed workflow? ``rivet check --include-failed`` and ``rivet recover
    --dry-run`` ask this: first ``refusal`` (with ``now``, also the lease), then a dry replay (no step, hook
    or write) of the history as ``recover`` would leave it (failed and exhausted steps reset, the workflow
    sleeping).

    Returns a ``dry_run.CheckResult``: outcome ``refused`` (``code`` and ``message`` the refusal's
    ``code`` and ``reason``, ``replay_from`` the step to replay from instead for a rolled-back run),
    ``error`` with ``code`` ``actor_type_not_registered`` for a type not registered in this process,
    ``diverged``, ``error`` (the dry replay raised) or ``ok``; None for an actor without a workflow.
    """
    result = dry_run.CheckResult(
        actor.actor_id, actor.name, list(actor.key), actor.workflow_state, dry_run.OK
    )
    entries = runtime.store.load_history(actor.actor_id)
    refused = refusal(runtime, actor, entries, RECOVER, now=now)
    if isinstance(refused, errors.WorkflowNotEnabledError):
        return None
    if refused is not None:
        unregistered = isinstance(refused, errors.ActorTypeNotRegisteredError)
        result.outcome = dry_run.ERROR if unregistered else dry_run.REFUSED
        result.message, result.code = reason(refused), refused.code
        result.replay_from = refused.replay_from
        return result
    return dry_run.check_actor(runtime, actor, history_after_recover(entries), as_state=ports.SLEEPING)


# --- pause and resume (DESIGN.md section 12): the one place an operator pauses or resumes an actor -------
def pause(
    runtime: RuntimeRole,
    actor_id: str,
    reason: str | None = None,
    *,
    who: str = audit.PYTHON,
    bulk: bool = False,
) -> bool:
    """Pause the actor: never claimed while paused (sends kept; a running step finishes, no new one starts).
    ``reason`` is kept with it and, with ``who`` (a user name, ``"token"``, ``"python"``, ``"command"``), in
    the audit row ``pause`` (``bulk_pause`` with ``bulk``) of the same transaction (``Store.set_paused``).
    True when it paused it, False (nothing written) if paused already, finished or suspended.
    ActorNotFoundError; ValueError (bad who)."""
    row = audit.action_record(actor_id, audit.named(audit.PAUSE, bulk), who, reason)  # a bad who: refused
    return runtime.store.set_paused(actor_id, True, reason, audit=row)


def resume(
    runtime: RuntimeRole,
    actor_id: str,
    reason: str | None = None,
    *,
    who: str = audit.PYTHON,
    bulk: bool = False,
) -> bool:
    """Resume a paused actor, handing it to the dispatcher when due (what came due meanwhile runs once),
    with the audit row ``resume`` (``who``, ``reason`` as ``pause``). False (nothing written) when not paused."""
    row = audit.action_record(actor_id, audit.named(audit.RESUME, bulk), who, reason)
    if not runtime.store.set_paused(actor_id, False, audit=row):
        return False
    wake_at = runtime.store.get_actor(actor_id).wake_at
    if wake_at is not None and wake_at <= runtime.store.now():
        runtime.wake(actor_id)
    return True
