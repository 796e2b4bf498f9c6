"""Operations behind ``manage.py rivet check|gates|recover|prune`` (DESIGN.md section 8).

Each function takes the Django runtime (``django_runtime.get_runtime()``) or works on the models directly
and returns plain data; the management command only formats it.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from django.db.models import Q

from . import models
from .engine import dry_run, errors, inspector, ports, repairs, serde


def _workflow_rows(runtime: Any, names: list[str] | None = None) -> Any:
    """Live actors (of the types ``names``, or all) that have a workflow: actors whose type is registered
    without a run function have no workflow state to wait on, so no command counts them."""
    rows = models.Actor.objects.filter(destroyed=False)
    if names:
        rows = rows.filter(name__in=names)
    run_less = inspector.run_less_types(runtime.registry)
    return rows.exclude(name__in=run_less) if run_less else rows


def _in_flight_rows(runtime: Any, names: list[str] | None = None, *, include_failed: bool = False) -> Any:
    finished = set(ports.FINISHED_STATES) - ({ports.FAILED} if include_failed else set())
    rows = _workflow_rows(runtime, names).exclude(workflow_state__in=sorted(finished))
    return rows.order_by("name", "created_at")


def check(
    runtime: Any, names: list[str] | None = None, *, include_failed: bool = False
) -> list[dry_run.CheckResult]:
    """Dry-run replay of every in-flight actor (of the types ``names``, or all) against the current code.

    With ``include_failed`` failed workflows are checked too, as ``recover`` would restart them
    (``repairs.check_recover``: refused when the run was rolled back, else a dry replay with the failed
    steps reset). Nothing is written and no step, hook or rollback runs (engine.dry_run). Actors without a
    workflow (no run function) are not checked. Returns one CheckResult per workflow actor checked;
    ``outcome`` is ok, diverged (with ``location``), error or refused (with ``replay_from``).
    """
    rows = _in_flight_rows(runtime, names, include_failed=include_failed)
    results: list[dry_run.CheckResult] = []
    for pk in rows.values_list("pk", flat=True):
        actor = runtime.store.get_actor(pk)
        if actor.workflow_state == ports.FAILED:
            result = repairs.check_recover(runtime, actor)
            results.extend([result] if result is not None else [])
        else:
            results.extend(dry_run.check_all(runtime, [actor]))
    return results


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
    flight = _in_flight_rows(runtime, names)
    report = GatesReport(in_flight=dict(Counter(flight.values_list("name", flat=True))))
    entries = models.HistoryEntry.objects.filter(
        actor__in=flight, kind__in=["version_check", "removed"]
    ).values_list("actor__name", "key", "kind", "data")
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
) -> RecoverReport:
    """Wake actors whose lease expired (their executor died; any worker takes them over) and restart failed
    workflows (``repairs.recover``: failed/exhausted steps back to pending). ``dry`` lists without acting:
    a failed workflow is listed as recovered only when ``repairs.check_recover`` finds nothing against it
    (the refusal predicate of the HTTP API and the admin, then the dry replay), else as refused; with
    ``replay_check`` False only the predicate is asked (no replay: cheap for a summary of many failed
    workflows). Actors without a workflow are never counted. Filters: actor type ``names``,
    ``actor_ids``. Returns a RecoverReport.
    """
    report = RecoverReport()
    now = runtime.store.now()
    rows = _workflow_rows(runtime, names)
    if actor_ids:
        rows = rows.filter(pk__in=actor_ids)
    if leases:
        expired = rows.filter(lease_owner__isnull=False, lease_expires_at__lt=now).exclude(
            workflow_state__in=list(ports.FINISHED_STATES)
        )
        for actor_id in expired.values_list("pk", flat=True):
            report.expired_leases.append(actor_id)
            if not dry:
                # due now (it keeps its place if already due); the sweep or this hint runs it
                models.Actor.objects.filter(pk=actor_id).filter(
                    Q(wake_at__isnull=True) | Q(wake_at__gt=now)
                ).update(wake_at=now)
                runtime.wake(actor_id)
    if failed:
        for actor_id in rows.filter(workflow_state=ports.FAILED).values_list("pk", flat=True):
            if dry and not replay_check:
                record = runtime.store.get_actor(actor_id)
                entries = runtime.store.load_history(actor_id)
                refused = repairs.refusal(runtime, record, entries, repairs.RECOVER, now=now)
                if refused is None:
                    report.recovered.append(actor_id)
                else:
                    replay_from = refused.metadata.get("replay_from")
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
            try:
                repairs.recover(runtime, actor_id)
            except errors.WorkflowNotFailedError:  # finished or restarted meanwhile
                continue
            except errors.RivetWorkflowsError as exc:
                replay_from = exc.metadata.get("replay_from")
                report.refused.append(Refused(actor_id, exc.code, repairs.reason(exc), replay_from))
                continue
            report.recovered.append(actor_id)
    return report


def prune(runtime: Any, older_than_days: float, *, dry: bool = False) -> int:
    """Delete finished actors (completed, failed, cancelled) not updated for ``older_than_days`` days, with
    their history, messages and schedules, and one-off scheduled actions that fired before then. Returns how many actors were (or, with ``dry``, would be) deleted.
    Raises ValueError for a negative age.
    """
    if older_than_days < 0:
        raise ValueError("--older-than must be >= 0 days")
    cutoff = runtime.store.now() - timedelta(days=older_than_days)
    rows = models.Actor.objects.filter(workflow_state__in=list(ports.FINISHED_STATES), updated_at__lt=cutoff)
    count = rows.count()
    if not dry:
        if count:
            rows.delete()
        # one-off scheduled actions that fired long ago (their fire log goes with them)
        models.CronEntry.objects.filter(
            interval_seconds__isnull=True,
            expression__isnull=True,
            next_fire_at__isnull=True,
            last_fired_at__lt=cutoff,
        ).delete()
    return count
