"""Operations behind ``manage.py rivet check|gates|recover|prune`` (DESIGN.md section 8).

Each function takes the Django runtime (``django_runtime.get_runtime()``) or works on the models directly
and returns plain data; the management command only formats it.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from django.db.models import Q

from . import models, sharding, states
from .engine.actor import audit
from .engine.model import ports, serde
from .engine.operate import bulk, dry_run, inspector, repairs

#: ``track(items, total, description)`` yields ``items`` while showing progress (the commands pass a rich
#: progress bar on a terminal); the default shows nothing
Track = Callable[[Iterable[Any], int, str], Iterable[Any]]


def _no_progress(items: Iterable[Any], total: int, description: str) -> Iterable[Any]:
    return items


#: actor states ``list_actors`` shows and filters on (``states.SHOWN_STATES``: the stored workflow states,
#: ``paused`` and ``no_workflow``)
LIST_STATES = states.SHOWN_STATES


@dataclass
class ActorRow:
    """One line of ``rivet list``: the actor's id, type, key, shown workflow state (``states.shown``:
    ``no_workflow`` for a type without a run function, ``paused`` for a paused unfinished one), next wake-up, the queues it waits on, and when it last changed."""

    actor_id: str
    name: str
    key: list
    workflow_state: str
    wake_at: Any
    waiting_for: list
    updated_at: Any
    #: what the run does now (``inspector.activity``): ``running``, ``due``, ``waiting`` or ""; ``wake_at``
    #: and ``waiting_for`` are kept only while it waits (a finished wait is not shown as if it waited)
    doing: str = ""


def list_actors(
    runtime: Any, name: str | None = None, state: str | None = None, *, limit: int = 100
) -> tuple[list[ActorRow], int]:
    """Live actors (of type ``name``; in workflow state ``state``, one of ``LIST_STATES``), the most
    recently changed first, at most ``limit``: ``(rows, total matching)``. ``ValueError`` for an unknown
    state or a limit < 1."""
    if limit < 1:
        raise ValueError("--limit must be >= 1")
    run_less = inspector.run_less_types(runtime.registry)

    def matching(alias: str) -> Any:
        rows = models.Actor.objects.using(alias).filter(destroyed=False)
        if name:
            rows = rows.filter(name=name)
        if state is not None:
            rows = states.filter_state(rows, state, run_less)  # ValueError for an unknown state
        return rows

    total = sharding.total(lambda alias: matching(alias).count())
    fields = (
        "actor_id",
        "name",
        "key",
        "workflow_state",
        "wake_at",
        "waiting_for",
        "updated_at",
        "lease_owner",
        "lease_expires_at",
        "paused_at",
    )
    found = []
    now = runtime.store.now()
    newest = sharding.each(
        lambda alias: matching(alias).order_by("-updated_at", "actor_id").values_list(*fields)[:limit]
    )
    newest.sort(key=lambda values: values[0])  # the shards merged: most recently changed first, then id
    newest.sort(key=lambda values: values[6], reverse=True)
    for values in newest[:limit]:
        row = ActorRow(*values[:-3])
        row.workflow_state = states.shown(row.name, row.workflow_state, values[-1], run_less)
        row.key = list(row.key or [])
        now_doing = inspector.activity(values[-3], values[-2], row.wake_at, row.waiting_for, now)
        row.doing, row.waiting_for, row.wake_at = (
            now_doing.doing,
            list(now_doing.waiting_for),
            now_doing.wake_at,
        )
        found.append(row)
    return found, total


def _workflow_rows(runtime: Any, names: list[str] | None = None, alias: str | None = None) -> Any:
    """Live actors (of the types ``names``, or all) that have a workflow, on the shard ``alias`` (None: the
    first): actors whose type is registered without a run function have no workflow state to wait on, so no
    command counts them."""
    rows = models.Actor.objects.using(alias or sharding.first()).filter(destroyed=False)
    if names:
        rows = rows.filter(name__in=names)
    run_less = inspector.run_less_types(runtime.registry)
    return rows.exclude(name__in=run_less) if run_less else rows


def _in_flight_rows(
    runtime: Any, names: list[str] | None = None, *, include_failed: bool = False, alias: str | None = None
) -> Any:
    finished = set(ports.FINISHED_STATES) - ({ports.FAILED} if include_failed else set())
    rows = _workflow_rows(runtime, names, alias).exclude(workflow_state__in=sorted(finished))
    return rows.order_by("name", "created_at")


def check(
    runtime: Any,
    names: list[str] | None = None,
    *,
    include_failed: bool = False,
    track: Track = _no_progress,
) -> list[dry_run.CheckResult]:
    """Dry-run replay of every in-flight or suspended actor (of the types ``names``, or all) against the
    current code (``blocks_deploy`` says which results fail the deploy gate).

    With ``include_failed`` failed workflows are checked too, as ``recover`` would restart them
    (``repairs.check_recover``: refused when the run was rolled back, else a dry replay with the failed
    steps reset). Nothing is written and no step, hook or rollback runs (engine.dry_run). Actors without a
    workflow (no run function) are not checked. Returns one CheckResult per workflow actor checked;
    ``outcome`` is ok, diverged (with ``location``), error or refused (with ``replay_from``). ``track``
    shows the progress over the workflows.
    """
    results: list[dry_run.CheckResult] = []
    pks = sharding.each(
        lambda alias: _in_flight_rows(runtime, names, include_failed=include_failed, alias=alias).values_list(
            "pk", flat=True
        )
    )
    for pk in track(pks, len(pks), "checking"):
        actor = runtime.store.get_actor(pk)
        if actor.workflow_state == ports.FAILED:
            result = repairs.check_recover(runtime, actor)
            results.extend([result] if result is not None else [])
        else:
            results.extend(dry_run.check_all(runtime, [actor]))
    return results


def blocks_deploy(result: dry_run.CheckResult) -> bool:
    """True when ``result`` (of ``check``) is a run the deployed code would break, which makes ``rivet check``
    exit 1 (DESIGN.md section 16, the deploy gate): an in-flight run whose replay diverges or raises, a
    suspended run whose replay diverges, a failed run that ``recover`` would make diverge. A suspended run
    that still raises its code error, and a failed or rolled-back run ``recover`` refuses, are listed only:
    the deploy changes nothing for them."""
    if result.outcome == dry_run.OK:
        return False
    if result.workflow_state in (ports.SUSPENDED, ports.FAILED):
        return result.outcome == dry_run.DIVERGED
    return result.outcome != dry_run.REFUSED


@dataclass
class GateRow:
    """One version gate or removal marker: actor type, history location, kind (version_check | removed),
    the version recorded (None for removals) and how many in-flight instances hold it."""

    actor: str
    location: str
    kind: str
    version: int | None
    in_flight: int


@dataclass
class GatesReport:
    """``rows`` (GateRow list) and ``in_flight`` (in-flight instances per actor type)."""

    rows: list[GateRow] = field(default_factory=list)
    in_flight: dict[str, int] = field(default_factory=dict)


def gates(runtime: Any, names: list[str] | None = None) -> GatesReport:
    """Version gates (``ctx.get_version``) and removal markers (``ctx.removed``) recorded by in-flight actors.

    A gate can be retired (replaced by ``removed(name, "version_check")``) once no in-flight instance is
    pinned to an old version; a ``removed`` call can go once no in-flight instance holds its marker or the
    original entry. Counts come from the stored histories (no replay); actors without a workflow (their
    type has no run function) are never in flight.
    """
    report = GatesReport(
        in_flight=dict(
            Counter(
                sharding.each(
                    lambda alias: _in_flight_rows(runtime, names, alias=alias).values_list("name", flat=True)
                )
            )
        )
    )
    entries = sharding.each(
        lambda alias: (
            models.HistoryEntry.objects.using(alias)
            .filter(
                actor__in=_in_flight_rows(runtime, names, alias=alias), kind__in=["version_check", "removed"]
            )
            .values_list("actor__name", "key", "kind", "data")
        )
    )
    counts: Counter = Counter()
    for name, key, kind, data in entries:
        version = None
        if kind == "version_check":
            decoded = serde.from_json(data) or {}
            version = decoded.get("resolved")
        counts[(name, key, kind, version)] += 1
    report.rows = [
        GateRow(name, key, kind, version, n)
        for (name, key, kind, version), n in sorted(counts.items(), key=lambda kv: tuple(map(str, kv[0])))
    ]
    return report


@dataclass
class Refused:
    """A failed workflow ``recover`` did not (or, in a dry run, would not) restart: the refusal's ``code``
    (``rolled_back``, ``history_diverged``, ``workflow_in_flight``, ...), ``reason`` (a short text:
    ``repairs.reason``) and, for a rolled-back run, ``replay_from``: the step to replay from instead."""

    actor_id: str
    code: str
    reason: str
    replay_from: str | None = None


@dataclass
class RecoverReport:
    """What ``recover`` did: actors with an expired lease woken, failed workflows restarted, and the failed
    workflows refused (``Refused``)."""

    expired_leases: list[str] = field(default_factory=list)
    recovered: list[str] = field(default_factory=list)
    refused: list[Refused] = field(default_factory=list)


def recover(
    runtime: Any,
    *,
    names: list[str] | None = None,
    actor_ids: list[str] | None = None,
    leases: bool = True,
    failed: bool = True,
    dry: bool = False,
    replay_check: bool = True,
    track: Track = _no_progress,
    who: str = audit.COMMAND,
    reason: str | None = None,
) -> RecoverReport:
    """Wake actors whose lease expired (their executor died; any worker takes them over) and restart failed
    workflows (``repairs.recover``: failed/exhausted steps back to pending). ``dry`` lists without acting:
    a failed workflow is listed as recovered only when ``repairs.check_recover`` finds nothing against it
    (the refusal predicate of the HTTP API and the admin, then the dry replay), else as refused; with
    ``replay_check`` False only the predicate is asked (no replay: cheap for a summary of many failed
    workflows). Actors without a workflow are never counted. Filters: actor type ``names``,
    ``actor_ids``; ``track`` shows the progress. Each restart writes an audit row by ``who`` for
    ``reason``. Returns a RecoverReport.
    """
    report = RecoverReport()
    now = runtime.store.now()

    def rows(alias: str) -> Any:
        chosen = _workflow_rows(runtime, names, alias)
        return chosen.filter(pk__in=actor_ids) if actor_ids else chosen

    if leases:
        expired_ids = sharding.each(
            lambda alias: (
                rows(alias)
                .filter(lease_owner__isnull=False, lease_expires_at__lt=now)
                .exclude(workflow_state__in=list(ports.FINISHED_STATES))
                .values_list("pk", flat=True)
            )
        )
        for actor_id in track(expired_ids, len(expired_ids), "expired leases"):
            report.expired_leases.append(actor_id)
            if not dry:
                # due now (it keeps its place if already due); the sweep or this hint runs it
                models.Actor.objects.using(sharding.alias_for_actor(actor_id)).filter(pk=actor_id).filter(
                    Q(wake_at__isnull=True) | Q(wake_at__gt=now)
                ).update(wake_at=now)
                runtime.wake(actor_id)
    if failed:
        failed_ids = sharding.each(
            lambda alias: rows(alias).filter(workflow_state=ports.FAILED).values_list("pk", flat=True)
        )
        for actor_id in track(failed_ids, len(failed_ids), "failed workflows"):
            if dry and not replay_check:
                record = runtime.store.get_actor(actor_id)
                entries = runtime.store.load_history(actor_id)
                refused = repairs.refusal(runtime, record, entries, repairs.RECOVER, now=now)
                if refused is None:
                    report.recovered.append(actor_id)
                else:
                    replay_from = refused.replay_from
                    report.refused.append(
                        Refused(actor_id, refused.code, repairs.reason(refused), replay_from)
                    )
                continue
            if dry:
                result = repairs.check_recover(runtime, runtime.store.get_actor(actor_id), now=now)
                if result is not None and result.code is not None:  # refused before any replay
                    report.refused.append(Refused(actor_id, result.code, result.message, result.replay_from))
                elif result is not None and result.outcome == dry_run.DIVERGED:  # recover refuses it too
                    where = f" at {result.location}" if result.location else ""
                    why = f"refused: history diverged{where}: {result.message}"
                    report.refused.append(Refused(actor_id, "history_diverged", why))
                else:  # ok, or a replay error recover does not check for (the run then fails again)
                    report.recovered.append(actor_id)
                continue
            outcome = bulk.act_on(runtime, "recover", actor_id, who=who, reason=reason, bulk=False)
            if outcome.outcome == bulk.CHANGED:
                report.recovered.append(actor_id)
            elif outcome.outcome == bulk.REFUSED:  # an error of one actor is reported; the others go on
                report.refused.append(Refused(actor_id, outcome.code, outcome.reason, outcome.replay_from))
            # unchanged: finished or restarted meanwhile
    return report


#: actors deleted per transaction by ``prune`` (a progress step)
PRUNE_BATCH = 500


def prune(runtime: Any, older_than_days: float, *, dry: bool = False, track: Track = _no_progress) -> int:
    """Delete finished actors (completed, failed, cancelled) not updated for ``older_than_days`` days, with
    their history, messages and schedules (``PRUNE_BATCH`` actors at a time, ``track`` showing the
    progress), one-off scheduled actions that fired before then, and the fire log rows of schedules stored
    as data whose tick is before then. Returns how many actors were (or,
    with ``dry``, would be) deleted. Raises ValueError for a negative age.
    """
    if older_than_days < 0:
        raise ValueError("--older-than must be >= 0 days")
    cutoff = runtime.store.now() - timedelta(days=older_than_days)

    def rows(alias: str) -> Any:
        return models.Actor.objects.using(alias).filter(
            workflow_state__in=list(ports.FINISHED_STATES), updated_at__lt=cutoff
        )

    count = sharding.total(lambda alias: rows(alias).count())
    if not dry:
        pks = sharding.each(lambda alias: ((alias, pk) for pk in rows(alias).values_list("pk", flat=True)))
        batches = [pks[i : i + PRUNE_BATCH] for i in range(0, len(pks), PRUNE_BATCH)]
        for batch in track(batches, len(batches), f"pruning {len(pks)} actors"):
            for alias in sharding.aliases():
                chosen = [pk for where, pk in batch if where == alias]
                if chosen:
                    rows(alias).filter(pk__in=chosen).delete()
        for alias in sharding.aliases():  # one-off scheduled actions that fired long ago (with their log)
            models.CronEntry.objects.using(alias).filter(
                interval_seconds__isnull=True,
                expression__isnull=True,
                next_fire_at__isnull=True,
                last_fired_at__lt=cutoff,
            ).delete()
        # the fire log of schedules stored as data (on the first shard): ticks before the cutoff are
        # forgotten (a backfill of that range would fire them again)
        models.ScheduleFire.objects.using(sharding.first()).filter(tick__lt=cutoff).delete()
    return count


#: the actions ``act`` does to the actors a command chooses (``engine.bulk.ACTIONS``)
COMMAND_ACTIONS = ("cancel", "pause", "resume", "retry")


def act(
    runtime: Any,
    action: str,
    *,
    actor_ids: list[str] | None = None,
    names: list[str] | None = None,
    reason: str | None = None,
    who: str = audit.COMMAND,
) -> bulk.BulkReport:
    """``rivet cancel|pause|resume|retry``: ``action`` (one of ``COMMAND_ACTIONS``) on the actors ``actor_ids``
    and every unfinished (for ``retry``: suspended) actor of the types ``names``, oldest first, each through ``engine.bulk.act_on``
    (the engine call its own button makes; each change writes an audit row ``<action>`` by ``who`` for
    ``reason``). Returns the ``bulk.BulkReport``: per actor changed, unchanged (with why) or refused (with
    why: an unknown actor id, a refusal, an error), never stopping at one actor. ``ValueError`` when
    neither ids nor names are given or for an unknown action."""
    if action not in COMMAND_ACTIONS:
        raise ValueError(f"unknown action {action!r}; one of: {', '.join(COMMAND_ACTIONS)}")
    if not actor_ids and not names:
        raise ValueError("say which actors: --actor ID or --name TYPE")
    chosen = list(dict.fromkeys(actor_ids or []))
    if names:

        def rows(alias: str) -> Any:
            found = _workflow_rows(runtime, names, alias)
            if action == "retry":  # only a suspended run has anything to retry
                return found.filter(workflow_state=ports.SUSPENDED)
            return found.exclude(workflow_state__in=sorted(ports.FINISHED_STATES))

        found = sorted(sharding.each(lambda alias: rows(alias).values_list("created_at", "pk")))
        chosen += [pk for _, pk in found if pk not in chosen]
    return bulk.run(runtime, action, chosen, who=who, reason=reason, bulk=False)
