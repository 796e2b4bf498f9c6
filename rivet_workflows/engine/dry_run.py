"""Dry-run replay: check in-flight histories against the current code with no step executed (``rivet check``).

The replay runs the workflow function on a ``RunSession`` whose store is read-only: it may read the actor,
its history and its messages, but the first write (recording a step attempt, a new entry, a receipt, a
release) stops the replay, and so does any attempt to run a step body (``body_will_run`` is the hook).
``on_wake``/``on_error``/rollback handlers never run. What is left to observe is exactly what a deploy
needs: does the recorded history still match the code up to the point where new work would start?
"""

from __future__ import annotations

import copy
import dataclasses
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from asgiref.sync import async_to_sync

from . import errors, ports, serde
from .context import WorkflowContext
from .history import ROOT, History
from .session import RunSession, maybe_await

if TYPE_CHECKING:
    from .runtime import Runtime

#: outcomes of a dry-run replay
OK = "ok"  # the history matches the code up to new work (or a wait, or the end)
DIVERGED = "diverged"  # HistoryDivergedError: ``location`` says where
ERROR = "error"  # the replay raised something else (``message`` says what)
REFUSED = "refused"  # recover would be refused before any replay (``repairs.refusal``: rolled back, ...)


class ReadOnlyStore:
    """A ``ports.Store`` wrapper that lets reads through and turns every write into ``DryRunStop``."""

    _READS = frozenset(
        {"now", "get_actor", "find_actor", "load_history", "pending_messages", "get_message", "next_deadline"}
    )

    def __init__(self, store: Any) -> None:
        self._store = store

    def __getattr__(self, name: str) -> Any:
        if name in self._READS or name.startswith("cron_list"):
            return getattr(self._store, name)

        def refused(*args: Any, **kwargs: Any) -> Any:
            raise errors.DryRunStop(f"dry run: {name} not allowed")

        return refused


class _DrySession(RunSession):
    """A RunSession that never runs a step body, never fires on_error and never commits."""

    def body_will_run(self) -> None:
        raise errors.DryRunStop("dry run: a step body would run")

    async def fire_error(self, event: dict) -> None:
        raise errors.DryRunStop("dry run: on_error would fire")

    async def flush(self, **fields: Any) -> ports.CommitResult:
        raise errors.DryRunStop("dry run: a commit would be written")


@dataclass
class CheckResult:
    """The dry-run outcome of one actor: ``outcome`` (ok | diverged | error | refused), ``location`` (the
    recorded history key where it diverged, or None), ``reached`` (the key of the new entry the code reached
    there, or None), ``message`` (what diverged and how to fix it, or why recover is refused), ``error``
    (for the error outcome: the exception the replay raised, as ``serde.error_to_dict`` describes it, so a
    caller can tell the workflow's own recorded failure replayed from a new one) and, for a refused
    recover, ``code`` (the refusal's error code: ``rolled_back``, ...) and ``replay_from`` (for a
    rolled-back run: the step to replay from instead)."""

    actor_id: str
    name: str
    key: list
    workflow_state: str
    outcome: str
    location: str | None = None
    message: str = ""
    reached: str | None = None
    error: dict | None = None
    code: str | None = None
    replay_from: str | None = None


async def _replay(session: _DrySession) -> None:
    ctx = WorkflowContext(session, ROOT)
    await maybe_await(session.definition.run.fn(ctx))  # type: ignore[union-attr]
    ctx.end_scope()


def check_actor(
    runtime: Runtime,
    actor: ports.ActorRecord,
    entries: list[ports.EntryRecord] | None = None,
    *,
    as_state: str | None = None,
) -> CheckResult:
    """Replay ``actor``'s history against the registered code without side effects; return a CheckResult.

    ``entries`` replaces the stored history (the history as a replay or recover would leave it: the
    inspector checks that before it changes anything); ``as_state`` replays as if the workflow were in
    that state (e.g. ``sleeping`` for a failed run about to be recovered), with no output or error.
    Raises ``ActorNotFoundError`` for an actor type that is no longer registered.
    """
    definition = runtime.registry.get(actor.name)
    result = CheckResult(actor.actor_id, actor.name, list(actor.key), actor.workflow_state, OK)
    if definition.run is None:
        return result
    dry = copy.copy(runtime)  # no __init__: the registry stays bound to the real runtime
    dry.store = ReadOnlyStore(runtime.store)
    dry.vars = {}
    if entries is None:
        entries = runtime.store.load_history(actor.actor_id)
    history = History(copy.deepcopy(list(entries)))  # the replay marks entries; the caller keeps its own
    if as_state is not None:
        actor = dataclasses.replace(actor, workflow_state=as_state, output=None, error=None)
    session = _DrySession(dry, actor, definition, actor.lease_token, history, live_until=None)
    # New work stops at its first write, after the scope check, so a renamed step is reported as diverged.
    try:
        async_to_sync(_replay)(session)
    except errors.HistoryDivergedError as exc:
        result.outcome, result.message = DIVERGED, str(exc)
        result.location = getattr(exc, "location", None) or _location_of(exc)
        result.reached = exc.metadata.get("reached")
    except (errors.DryRunStop, errors.WaitSignal, errors.RollbackStop):
        pass
    except errors.WorkflowSignal:
        pass
    except Exception as exc:  # the workflow's own failure replayed, or a bug: report, do not hide
        if isinstance(exc, errors.RivetWorkflowsError) and getattr(exc, "_rivet_reported", False):
            return result  # a recorded step failure replayed: not a divergence
        result.outcome, result.message = ERROR, f"{type(exc).__name__}: {exc}"
        result.error = serde.error_to_dict(exc)
    return result


def _location_of(exc: BaseException) -> str | None:
    metadata = getattr(exc, "metadata", None)
    if isinstance(metadata, dict):
        return metadata.get("location")
    return None


def check_all(runtime: Runtime, actors: list[ports.ActorRecord]) -> list[CheckResult]:
    """``check_actor`` for each in-flight actor of ``actors`` (finished and run-less ones are skipped; an
    actor whose type is not registered gets an ``error`` result). Failed workflows as ``recover`` would
    restart them: ``repairs.check_recover``."""
    results = []
    for actor in actors:
        if actor.workflow_state in ports.FINISHED_STATES:
            continue
        try:
            definition = runtime.registry.get(actor.name)
        except errors.ActorNotFoundError as exc:
            results.append(
                CheckResult(
                    actor.actor_id, actor.name, list(actor.key), actor.workflow_state, ERROR, None, str(exc)
                )
            )
            continue
        if definition.run is None:
            continue
        results.append(check_actor(runtime, actor))
    return results
