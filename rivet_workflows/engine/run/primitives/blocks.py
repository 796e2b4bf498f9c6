"""Try blocks, removals, version gates and rollback checkpoints (ENGINE-SEMANTICS.md sections 2, 3, 7)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ...model import errors, ports, serde
from ...model.failures import TryFailure
from .. import retry
from ..results import TryResult
from ..session import maybe_await

if TYPE_CHECKING:
    from .scope import WorkflowContextRole

#: entry kinds ``ctx.removed`` accepts ("try" is a block without an entry of its own)
REMOVABLE = frozenset(
    {"step", "loop", "sleep", "message", "rollback_checkpoint", "join", "race", "version_check", "try"}
)
#: sources ``ctx.try_`` catches by default; ``catch=("rollback",)`` adds rollback failures
DEFAULT_TRY_CATCH = frozenset({"step", "join", "race"})
#: never caught by try_/try_step: the code or its use is wrong
_NEVER = (
    errors.HistoryDivergedError,
    errors.EntryInProgressError,
    errors.RollbackCheckpointError,
)


def _clean(error: dict) -> dict:
    return {k: v for k, v in error.items() if v is not None}


def classify_failure(exc: BaseException) -> tuple[TryFailure, bool] | None:
    """The ``try_`` failure of ``exc`` (a ``TryFailure`` ``{source, name, error, step?}``) and whether it is
    a rollback failure, or None for an exception no try block may catch."""
    if isinstance(exc, _NEVER) or not isinstance(exc, Exception):
        return None
    if isinstance(exc, errors.RivetWorkflowsError) and exc.step_name and exc.kind:
        kind = exc.kind
        error = _clean(exc.error or serde.error_to_dict(exc))
        step = retry.failure_dict(kind, exc.step_name, exc.attempts or 0, error)
        return TryFailure("step", exc.step_name, error, step), kind == retry.ROLLBACK
    if isinstance(exc, errors.JoinError):
        return TryFailure("join", exc.join, _clean(serde.error_to_dict(exc))), False
    if isinstance(exc, errors.RaceError):
        return TryFailure("race", exc.race, _clean(serde.error_to_dict(exc))), False
    return TryFailure("block", None, _clean(serde.error_to_dict(exc))), isinstance(exc, errors.RollbackError)


async def run_try(
    ctx: WorkflowContextRole, key: str, name: str, fn: Callable[..., Any], catch: tuple[str, ...]
) -> TryResult:
    """``ctx.try_``: run ``fn(block_ctx)`` at ``name/...``; caught failures become ``TryResult(ok=False)``.

    Caught by default: failures of steps (critical, timeout, exhausted), joins and races; with
    ``catch=("rollback",)`` also rollback failures of steps and ``RollbackError`` raised by the block itself.
    Other exceptions of the block, waits, eviction and divergence propagate.
    """
    session = ctx._session
    session.history.enter_scope(key)
    block = ctx.child(key)
    block._checkpoint = ctx._checkpoint
    try:
        value = await maybe_await(fn(block))
    except Exception as exc:
        classified = classify_failure(exc)
        if classified is None:
            raise
        failure, is_rollback = classified
        wanted = DEFAULT_TRY_CATCH | set(catch)
        if is_rollback:
            caught = "rollback" in wanted
        else:
            caught = failure["source"] in wanted
        if not caught:
            raise
        if failure["name"] is None:
            failure["name"] = name
        return TryResult(ok=False, failure=failure)
    block.end_scope()
    return TryResult(ok=True, value=value)


async def run_removed(ctx: WorkflowContextRole, key: str, name: str, original_type: str) -> None:
    """``ctx.removed``: mark the entry once recorded at ``name`` visited (another kind diverges); with no
    entry, write a ``removed`` placeholder. For "message" the queue-wait entries ``name:*`` are covered."""
    session = ctx._session
    history = session.history
    entry = history.entries.get(key)
    found = False
    history.retired.add(key)
    if original_type == "message":
        waits = history.visit_prefixed(ctx._scope, f"{key}:")
        history.retired.update(waits)
        found = bool(waits)
    if original_type == "try" and entry is None and history.child_keys(key):
        history.enter_scope(key)
        return
    if entry is not None:
        if entry.kind not in (original_type, "removed"):
            history.visit(key, original_type, name)  # raises HistoryDivergedError
        history.visit(key, entry.kind, name)
        return
    history.visit(key, "removed", name)
    if not found and not session.rolling_back:  # nothing new is written while rolling back
        marker = history.new(
            key, "removed", {"original_type": original_type, "original_name": name}, now=session.stamp()
        )
        marker.status, marker.completed_at = ports.ENTRY_COMPLETED, marker.created_at


async def run_get_version(ctx: WorkflowContextRole, key: str, name: str, latest: int) -> int:
    """``ctx.get_version``: the recorded version, else 1 when this scope already ran under old code (it has
    unvisited entries), else ``latest``; the resolution is recorded (ENGINE-SEMANTICS.md section 2)."""
    session = ctx._session
    history = session.history
    entry = history.visit(key, "version_check", name)
    if entry is not None:
        return int(entry.data["resolved"])
    if session.rolling_back:  # code past this point never ran (a dry-run check goes on past the gate)
        raise errors.RollbackStop()
    resolved = 1 if history.has_unvisited(ctx._scope) else latest
    entry = history.new(key, "version_check", {"resolved": resolved, "latest": latest}, now=session.stamp())
    entry.status, entry.completed_at = ports.ENTRY_COMPLETED, entry.created_at
    return resolved


async def run_checkpoint(ctx: WorkflowContextRole, key: str, name: str) -> None:
    """``ctx.rollback_checkpoint``: record the checkpoint; later steps of this scope may have ``rollback=``."""
    session = ctx._session
    history = session.history
    entry = history.visit(key, "rollback_checkpoint", name)
    if entry is None:
        if session.rolling_back:
            raise errors.RollbackStop()
        history.check_scope(ctx._scope, before=key, before_kind="rollback_checkpoint")
        checkpoint = history.new(key, "rollback_checkpoint", {"name": name}, now=session.stamp())
        checkpoint.status, checkpoint.completed_at = ports.ENTRY_COMPLETED, checkpoint.created_at
    ctx._checkpoint = True


#: the entry kind ``ctx.set_attributes`` records (never a divergence when the code no longer reaches it)
ATTRIBUTES = "attributes"


async def run_set_attributes(ctx: WorkflowContextRole, key: str, name: str, values: dict[str, Any]) -> None:
    """``ctx.set_attributes``: record the call at ``key`` and merge ``values`` into the actor's attributes
    with the next commit; a replay recording the same values writes nothing (DESIGN.md section 19)."""
    session = ctx._session
    history = session.history
    entry = history.visit(key, ATTRIBUTES, name)
    if entry is not None and entry.data.get("attributes") == values:
        return
    if session.rolling_back:  # nothing new is written while rolling back
        return
    if entry is None:
        entry = history.new(key, ATTRIBUTES, {"attributes": values}, now=session.stamp())
        entry.status, entry.completed_at = ports.ENTRY_COMPLETED, entry.created_at
    else:
        entry.data = {"attributes": values}
        session.writes.record(entry)
    session.writes.set_attributes(values)
