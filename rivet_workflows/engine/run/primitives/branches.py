"""Join and race: concurrent branches at ``name/branch`` with merged waits (ENGINE-SEMANTICS.md section 6)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping
from datetime import datetime
from typing import TYPE_CHECKING, Any

from ...model import errors, ports, serde
from .. import suspension
from ..history import check_name, child_key
from ..results import RaceResult
from ..session import maybe_await

if TYPE_CHECKING:
    from .scope import WorkflowContextRole

Branches = list[tuple[str, Callable[..., Any]]]

#: errors that mean the code or its use is wrong: never collected into JoinError/RaceError
_FATAL = (errors.HistoryDivergedError, errors.EntryInProgressError, errors.RollbackCheckpointError)
#: statuses of a join whose every branch settled
_FINISHED = frozenset({ports.ENTRY_COMPLETED, ports.ENTRY_FAILED})


def _branch_fn(name: str, value: Any) -> Callable[..., Any]:
    if isinstance(value, Mapping):
        value = value.get("run")
    if not callable(value):
        raise TypeError(f"branch {name!r} needs a callable (fn or {{'run': fn}}), got {type(value).__name__}")
    return value


def _unique(spec: Branches) -> Branches:
    seen: set[str] = set()
    for name, _ in spec:
        check_name(name, "branch")
        if name in seen:
            raise ValueError(f"duplicate branch name {name!r}")
        seen.add(name)
    if not spec:
        raise ValueError("join/race needs at least one branch")
    return spec


def normalize_join(branches: Any) -> Branches:
    """``{"a": fn | {"run": fn}, ...}`` -> ``[("a", fn), ...]``; ``TypeError``/``ValueError`` when malformed."""
    if not isinstance(branches, Mapping):
        raise TypeError("ctx.join(name, branches) needs a dict {branch_name: fn}")
    return _unique([(name, _branch_fn(name, value)) for name, value in branches.items()])


def normalize_race(branches: Any) -> Branches:
    """``[("a", fn), ...]``, ``[{"name": "a", "run": fn}, ...]`` or ``{"a": fn}`` -> ``[("a", fn), ...]``."""
    if isinstance(branches, Mapping):
        return normalize_join(branches)
    spec: Branches = []
    for item in branches:
        if isinstance(item, Mapping):
            spec.append((item.get("name"), _branch_fn(str(item.get("name")), item)))
        elif isinstance(item, (tuple, list)) and len(item) == 2:
            spec.append((item[0], _branch_fn(str(item[0]), item[1])))
        else:
            raise TypeError("race branches are (name, fn) pairs or {'name': ..., 'run': fn} dicts")
    return _unique(spec)


async def _run_branch(ctx: WorkflowContextRole, fn: Callable[..., Any]) -> tuple[str, Any]:
    """Run one branch to an outcome: ("ok", value), ("wait", WaitSignal), ("stop", signal), ("fatal",
    error) or ("err", error). Cancellation propagates. A code error of the branch (not a failure type:
    ``suspension.suspends``) is fatal: it suspends the whole run instead of being collected into
    ``JoinError``/``RaceError`` (DESIGN.md section 16).

    Every other control-flow signal (eviction, a dry run's stop, a rollback's stop, another code version)
    is returned as ``stop`` rather than raised, so no branch task ends with an exception: when several
    branches stop at once, the join or race raises the first and the others were still retrieved (an
    unretrieved task exception is printed by asyncio as "Task exception was never retrieved")."""
    try:
        value = await maybe_await(fn(ctx))
        ctx.end_scope()
        return "ok", value
    except errors.WaitSignal as signal:
        return "wait", signal
    except errors.WorkflowSignal as signal:
        return "stop", signal
    except _FATAL as exc:
        return "fatal", exc
    except Exception as exc:
        if not ctx._session.rolling_back and suspension.suspends(exc, ctx._session.settings):
            return "fatal", exc
        return "err", exc


def _merge_waits(signals: list[errors.WaitSignal]) -> errors.WaitSignal:
    deadlines: list[datetime] = [s.wake_at for s in signals if s.wake_at is not None]
    names: set[str] = set()
    for s in signals:
        names |= s.queue_names
    return errors.WaitSignal(min(deadlines) if deadlines else None, frozenset(names))


async def _cancel(tasks: list[asyncio.Future]) -> None:
    for task in tasks:
        task.cancel()
    if tasks:
        await asyncio.gather(*tasks, return_exceptions=True)


async def run_join(ctx: WorkflowContextRole, key: str, name: str, spec: Branches) -> dict:
    """Join at ``key``: run unfinished branches concurrently, await all; returns ``{branch: value}``.

    Completed branches replay their recorded output without running. Raises ``JoinError(errors={branch:
    error})`` once every branch settled with at least one failure, a merged ``WaitSignal`` while any branch
    waits.
    """
    session = ctx._session
    history = session.history
    entry = history.visit(key, "join", name)
    if entry is None:
        if session.rolling_back:
            raise errors.RollbackStop()
        history.check_scope(ctx._scope, before=key, before_kind="join")
        entry = history.new(
            key, "join", {"branches": {b: {"status": "pending"} for b, _ in spec}}, now=session.stamp()
        )
        entry.status = ports.ENTRY_RUNNING
    # A finished join (completed, or failed with every branch settled) is decided: its replay returns or
    # raises what was recorded and writes nothing (manual: HTTP API). Only a rollback replays its branches, to
    # collect their steps' rollback handlers, and even then the entry stays as recorded.
    finished = entry.status in _FINISHED
    if finished and not session.rolling_back:
        return _recorded_join(entry, name, spec)
    recorded: dict[str, dict] = {b: dict(v) for b, v in (entry.data.get("branches") or {}).items()}
    results: dict[str, Any] = {}
    tasks: dict[str, asyncio.Future] = {}
    replayed: set[str] = set()
    for branch, fn in spec:
        if recorded.get(branch, {}).get("status") == "completed":
            results[branch] = recorded[branch].get("output")
            if not session.rolling_back:
                continue
            # Rolling back: replay the finished branch (its steps return recorded outputs) so the rollback
            # handlers of its steps are collected; its recorded outcome stays as it is.
            replayed.add(branch)
        else:
            recorded[branch] = {"status": "running"}
        tasks[branch] = asyncio.ensure_future(_run_branch(ctx.child(child_key(key, branch)), fn))
    try:
        if tasks:
            await asyncio.wait(list(tasks.values()))
    except asyncio.CancelledError:
        await _cancel(list(tasks.values()))
        raise
    outcomes = {b: t.result() for b, t in tasks.items()}

    waits: list[errors.WaitSignal] = []
    failures: dict[str, dict] = {}
    for branch, (kind, value) in outcomes.items():
        if kind in ("stop", "fatal"):
            raise value
        if branch in replayed:
            continue
        if kind == "ok":
            value = serde.roundtrip(
                value, where=f"join {name!r} branch {branch!r}", max_bytes=session.settings.max_payload_bytes
            )
            results[branch] = value
            recorded[branch] = {"status": "completed", "output": value}
        elif kind == "wait":
            waits.append(value)
            recorded[branch] = {"status": "running"}
        else:
            error = serde.error_to_dict(value)
            failures[branch] = error
            recorded[branch] = {"status": "failed", "error": error}
    if finished:
        return _recorded_join(entry, name, spec)
    if not waits:
        entry.data = {**entry.data, "branches": recorded}
        entry.status = ports.ENTRY_FAILED if failures else ports.ENTRY_COMPLETED
        entry.completed_at = session.stamp()
        session.writes.record(entry)
    elif recorded != entry.data.get("branches"):  # some branch settled: record its progress
        entry.data = {**entry.data, "branches": recorded}
        session.writes.record(entry)
    if waits:
        raise _merge_waits(waits)
    if failures:
        raise _join_error(name, failures)
    return {branch: results[branch] for branch, _ in spec}


def _join_error(name: str, failures: dict[str, dict]) -> errors.JoinError:
    return errors.JoinError(
        f"join {name!r}: branch(es) {', '.join(sorted(failures))} failed: "
        + "; ".join(f"{b}: {e.get('name')}: {e.get('message')}" for b, e in sorted(failures.items())),
        join=name,
        errors=failures,
    )


def _recorded_join(entry: ports.EntryRecord, name: str, spec: Branches) -> dict:
    """The outcome a finished join recorded: ``{branch: output}``, or its ``JoinError`` raised again."""
    recorded = entry.data.get("branches") or {}
    failures = {b: v.get("error") or {} for b, v in recorded.items() if v.get("status") == "failed"}
    if entry.status == ports.ENTRY_FAILED or failures:
        raise _join_error(name, failures)
    return {branch: recorded.get(branch, {}).get("output") for branch, _ in spec}


def _recorded_race_error(entry: ports.EntryRecord, name: str) -> errors.RaceError:
    """The ``RaceError`` a race whose every branch failed recorded, raised again on replay."""
    branches = entry.data.get("branches") or {}
    return _race_error(name, {b: v.get("error") or {} for b, v in branches.items() if "error" in v})


def _race_error(name: str, failures: dict[str, dict]) -> errors.RaceError:
    return errors.RaceError(
        f"race {name!r}: every branch failed: "
        + "; ".join(f"{b}: {e.get('name')}: {e.get('message')}" for b, e in sorted(failures.items())),
        race=name,
        errors=failures,
    )


async def run_race(ctx: WorkflowContextRole, key: str, name: str, spec: Branches) -> RaceResult:
    """Race at ``key``: the first branch to finish wins (recorded, never re-decided); losers are cancelled
    and their history deleted. Raises ``RaceError`` when every branch failed, a merged ``WaitSignal`` when
    none finished and some wait."""
    session = ctx._session
    history = session.history
    entry = history.visit(key, "race", name)
    if entry is None:
        if session.rolling_back:
            raise errors.RollbackStop()
        history.check_scope(ctx._scope, before=key, before_kind="race")
        entry = history.new(
            key,
            "race",
            {"winner": None, "branches": {b: {"status": "pending"} for b, _ in spec}},
            now=session.stamp(),
        )
        entry.status = ports.ENTRY_RUNNING
    elif entry.data.get("winner") is not None:
        winner = entry.data["winner"]
        fn = dict(spec).get(winner)
        if session.rolling_back and fn is not None:
            # replay the winning branch so the rollback handlers of its steps are collected
            kind, value = await _run_branch(ctx.child(child_key(key, winner)), fn)
            if kind in ("stop", "fatal"):
                raise value
        return RaceResult(winner, entry.data.get("output"))
    # Every branch failed: decided, like a winner. The replay raises the recorded errors and writes nothing
    # (manual: HTTP API); a rollback replays the branches only to collect their steps' rollback handlers.
    decided = entry.status == ports.ENTRY_FAILED
    if decided and not session.rolling_back:
        raise _recorded_race_error(entry, name)

    tasks = {b: asyncio.ensure_future(_run_branch(ctx.child(child_key(key, b)), fn)) for b, fn in spec}
    outcomes: dict[str, tuple[str, Any]] = {}
    pending = set(tasks.values())
    winner: str | None = None
    try:
        while pending and winner is None:
            done, pending = await asyncio.wait(pending, return_when=asyncio.FIRST_COMPLETED)
            for branch, task in tasks.items():  # declared order breaks ties
                if task in done:
                    outcomes[branch] = task.result()
                    kind, value = outcomes[branch]
                    if kind in ("stop", "fatal"):
                        raise value
                    if kind == "ok" and winner is None:
                        winner = branch
    except BaseException:
        await _cancel(list(pending))
        raise
    await _cancel(list(pending))
    if decided:
        raise _recorded_race_error(entry, name)

    if winner is not None:
        value = serde.roundtrip(
            outcomes[winner][1],
            where=f"race {name!r} branch {winner!r}",
            max_bytes=session.settings.max_payload_bytes,
        )
        for branch, _ in spec:
            if branch != winner:
                history.delete_scope(child_key(key, branch))
        entry.data = {
            "winner": winner,
            "output": value,
            "branches": {b: {"status": "completed" if b == winner else "cancelled"} for b, _ in spec},
        }
        entry.status = ports.ENTRY_COMPLETED
        entry.completed_at = session.stamp()
        session.writes.record(entry)
        await session.flush()
        return RaceResult(winner, value)

    waits = [v for k, v in outcomes.values() if k == "wait"]
    failures = {b: serde.error_to_dict(v) for b, (k, v) in outcomes.items() if k == "err"}
    branches = {
        b: ({"status": "failed", "error": failures[b]} if b in failures else {"status": "running"})
        for b, _ in spec
    }
    if not waits or branches != entry.data.get("branches"):  # no write for a replay that changed nothing
        entry.data = {**entry.data, "branches": branches}
        if not waits:
            entry.status = ports.ENTRY_FAILED
        session.writes.record(entry)
    if waits:
        raise _merge_waits(waits)
    raise _race_error(name, failures)
