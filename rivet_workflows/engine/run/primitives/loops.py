"""Durable loops: resume at the stored iteration and state, prune old iterations (ENGINE-SEMANTICS.md 4)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ...model import errors, ports, serde
from ...model.definitions import LoopBreak, LoopContinue
from ..history import child_key
from ..session import maybe_await

if TYPE_CHECKING:
    from ..history import History
    from .scope import WorkflowContextRole


def _iteration_of(scope_key: str) -> int | None:
    seg = scope_key.rsplit("/", 1)[-1]
    if seg.startswith("~") and seg[1:].isdigit():
        return int(seg[1:])
    return None


def prune(history: History, loop_key: str, below: int) -> list[str]:
    """Delete the history of iterations ``< below`` of the loop at ``loop_key``; returns deleted keys."""
    deleted: list[str] = []
    if below <= 0:
        return deleted
    for scope in history.child_keys(loop_key):
        i = _iteration_of(scope)
        if i is not None and i < below:
            deleted.extend(history.delete_scope(scope))
    return deleted


async def run_loop(
    ctx: WorkflowContextRole,
    key: str,
    name: str,
    fn: Callable[..., Any],
    state: Any,
    stateful: bool,
    interval: int,
    history_size: int | None,
) -> Any:
    """Run (or resume) the loop at ``key``; returns the value of ``Loop.break_``.

    Iteration ``i`` runs in scope ``key/~i``. The loop entry holds ``{state, iteration}`` and is updated
    after each iteration (it rides on the next commit); every ``interval`` completed iterations, and at
    the break, iterations older than ``completed - history_size`` are deleted.
    """
    session = ctx._session
    history = session.history
    max_bytes = session.settings.max_payload_bytes
    size = interval if history_size is None else history_size
    entry = history.visit(key, "loop", name)
    if entry is None:
        if session.rolling_back:
            raise errors.RollbackStop()
        history.check_scope(ctx._scope, before=key, before_kind="loop")
        initial = (
            serde.roundtrip(state, where=f"loop {name!r} state", max_bytes=max_bytes) if stateful else None
        )
        entry = history.new(key, "loop", {"state": initial, "iteration": 0}, now=session.stamp())
        entry.status = ports.ENTRY_RUNNING
    elif entry.status == ports.ENTRY_COMPLETED:
        return entry.data.get("output")
    iteration = int(entry.data.get("iteration", 0))
    current = entry.data.get("state")

    while True:
        scope = child_key(key, iteration)
        body_ctx = ctx.child(scope)
        result = await maybe_await(fn(body_ctx, current) if stateful else fn(body_ctx))
        body_ctx.end_scope()
        if isinstance(result, LoopBreak):
            if session.rolling_back:
                raise errors.RollbackStop()
            value = serde.roundtrip(result.value, where=f"loop {name!r} output", max_bytes=max_bytes)
            entry.data = {"state": current, "iteration": iteration, "output": value}
            entry.status = ports.ENTRY_COMPLETED
            entry.completed_at = session.stamp()
            session.writes.record(entry)
            prune(history, key, iteration + 1 - size)
            return value
        if isinstance(result, LoopContinue):
            next_state = result.state
        elif result is None and not stateful:
            next_state = None
        elif result is None:
            raise errors.RivetWorkflowsError(
                f"the body of stateful loop {name!r} returned None: return Loop.continue_(state) or "
                "Loop.break_(value)",
                loop=name,
            )
        else:
            raise errors.RivetWorkflowsError(
                f"the body of loop {name!r} returned {type(result).__name__}: return Loop.continue_(...) or "
                "Loop.break_(...)",
                loop=name,
            )
        if stateful:
            current = serde.roundtrip(next_state, where=f"loop {name!r} state", max_bytes=max_bytes)
        if session.rolling_back:  # loop progress is never written while rolling back
            raise errors.RollbackStop()
        iteration += 1
        entry.data = {"state": current, "iteration": iteration}
        session.writes.record(entry)
        if iteration % interval == 0:
            prune(history, key, iteration - size)
