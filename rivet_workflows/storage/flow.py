"""Flow controls of ``DjangoStore`` (DESIGN.md section 12): the due actors and the sweep's batch claim with
the admission check of a claim, run starts of rate-limited actors, the next actor of a group that freed a slot, the rate window's end, pause and resume.

A mixin: the host class provides ``using``, ``now()``, ``_atomic()``, ``_actors()`` and ``_write_audit()`` (``AuditStorage``).
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any

from django.db.models import F, Q

from .. import models
from ..engine.model import errors, ports
from . import mapper


def lease_free(now: datetime) -> Q:
    """Actors whose lease is free or expired at ``now`` (a claim may take them)."""
    return Q(lease_expires_at__isnull=True) | Q(lease_expires_at__lt=now)


#: how many batches of due actors ``claim_due`` looks at to fill its batch past full groups
_SCAN_BATCHES = 8

#: the actor columns a claim reads to apply the flow rules
FLOW_VALUES = (
    "actor_id",
    "name",
    "concurrency_key",
    "concurrency_limit",
    "rate_count",
    "rate_per",
    "lease_token",
)


def _window(store: Any, row: dict[str, Any], now: datetime):
    """The run starts of ``row``'s group within its rate window (``FlowStart`` rows)."""
    return models.FlowStart.objects.using(store.using).filter(
        name=row["name"],
        group=row["concurrency_key"],
        started_at__gt=now - timedelta(seconds=row["rate_per"]),
    )


class Admission:
    """The flow check of one claim transaction (portable): per group, the live leases and the run starts in
    the rate window, counted once and updated as this claim admits actors."""

    def __init__(self, store: Any, now: datetime) -> None:
        self.store = store
        self.now = now
        self.live: dict[tuple[str, str], int] = {}
        self.starts: dict[tuple[str, str], int] = {}

    def admit(self, row: dict[str, Any]) -> bool:
        """True (and the slot counted) when ``row`` (``FLOW_VALUES``) may be claimed now."""
        if row["concurrency_key"] is None:
            return True
        group = (row["name"], row["concurrency_key"])
        limit, rate = row["concurrency_limit"], row["rate_count"]
        if limit is not None:
            if group not in self.live:
                self.live[group] = (
                    self.store._actors()
                    .filter(
                        name=row["name"],
                        concurrency_key=row["concurrency_key"],
                        lease_owner__isnull=False,
                        lease_expires_at__gt=self.now,
                        destroyed=False,
                    )
                    .count()
                )
            if self.live[group] >= limit:
                return False
        if rate is not None:
            if group not in self.starts:
                self.starts[group] = _window(self.store, row, self.now).count()
            if self.starts[group] >= rate:
                return False
            self.starts[group] += 1
        if limit is not None:
            self.live[group] += 1
        return True


class FlowStorage:
    """The flow-control members of ``ports.Store`` on the ORM (the contract is in ``ports.Store``)."""

    # provided by the host class (DjangoStore)
    using: str
    now: Callable[[], datetime]
    _atomic: Callable[[], Any]
    _actors: Callable[[], Any]
    _write_audit: Callable[..., Any]

    def due_queryset(self, now: datetime, *, expired_only: bool = False):
        """The actors due at ``now`` and not paused, highest priority first, then earliest ``wake_at``
        (served by the partial index rivet_actor_prio_due_idx); with ``expired_only`` only those whose
        lease expired."""
        return (
            self._actors()
            .filter(
                Q(lease_expires_at__lt=now) if expired_only else lease_free(now),
                wake_at__isnull=False,
                wake_at__lte=now,
                destroyed=False,
                paused_at__isnull=True,
            )
            .order_by("-priority", "wake_at", "created_at", "actor_id")
        )

    def claim_due(
        self, owner: str, limit: int, lease_seconds: float, *, expired_only: bool = False
    ) -> list[tuple[str, int]]:
        """Claim up to ``limit`` due actors (wake_at <= now, lease free or expired, not paused, within their
        flow limits), highest priority first, then earliest wake_at; with ``expired_only`` only those whose
        lease expired (``ports.Store.claim_due``).

        Returns ``[(actor_id, token), ...]``. Rows locked by a concurrent sweep are skipped (row-locking
        databases; SQLite has one writer at a time). Candidates over their group's limits are passed over
        (up to ``_SCAN_BATCHES`` batches are looked at), so a full group does not hold up other actors.
        The flow limits are exact where writers are serialised (SQLite); on PostgreSQL ``PostgresStore``
        decides them in the database.
        """
        if limit <= 0:
            return []
        with self._atomic():
            now = self.now()
            admission = Admission(self, now)
            chosen: list[dict[str, Any]] = []
            due = (
                self.due_queryset(now, expired_only=expired_only)
                .select_for_update(skip_locked=True)
                .values(*FLOW_VALUES)
            )
            batch = limit  # rows are locked as they are read: read no more than a batch needs
            for round_ in range(_SCAN_BATCHES):
                candidates = list(due[round_ * batch : (round_ + 1) * batch])
                for candidate in candidates:
                    if len(chosen) < limit and admission.admit(candidate):
                        chosen.append(candidate)
                if len(chosen) >= limit or len(candidates) < batch:
                    break
            if not chosen:
                return []
            ids = [c["actor_id"] for c in chosen]
            expires = now + timedelta(seconds=lease_seconds)
            self._actors().filter(lease_free(now), pk__in=ids).update(
                lease_owner=owner,
                lease_expires_at=expires,
                lease_token=F("lease_token") + 1,
                step_lock_until=None,
            )
            rows = dict(
                self._actors()
                .filter(pk__in=ids, lease_owner=owner, lease_expires_at=expires)
                .values_list("pk", "lease_token")
            )
            self._record_starts([c for c in chosen if c["actor_id"] in rows], now)
        return [(actor_id, rows[actor_id]) for actor_id in ids if actor_id in rows]

    def _record_starts(self, claimed: list[dict[str, Any]], now: datetime) -> None:
        """Record a run start for each claimed rate-limited actor (``FlowStart``, token = the new token)."""
        starts = [
            models.FlowStart(
                name=c["name"],
                group=c["concurrency_key"],
                actor_id=c["actor_id"],
                lease_token=c["lease_token"] + 1,
                started_at=now,
            )
            for c in claimed
            if c["concurrency_key"] is not None and c["rate_count"] is not None
        ]
        if starts:
            models.FlowStart.objects.using(self.using).bulk_create(starts, ignore_conflicts=True)

    def _next_in_group(self, actor_id: str, name: str, group: str | None, now: datetime) -> str | None:
        """The next due actor of the concurrency group ``(name, group)`` in which ``actor_id`` just freed a
        slot (highest priority, then oldest ``wake_at``), to wake at once; None when nobody waits."""
        if group is None:
            return None
        return (
            self.due_queryset(now)
            .filter(name=name, concurrency_key=group)
            .exclude(pk=actor_id)
            .values_list("pk", flat=True)
            .first()
        )

    def flow_retry_at(self, actor_id: str) -> datetime | None:
        """When the rate limit lets the due actor ``actor_id`` be claimed (``ports.Store.flow_retry_at``)."""
        now = self.now()
        row = (
            self._actors()
            .filter(pk=actor_id, destroyed=False, paused_at__isnull=True, wake_at__lte=now)
            .values(*FLOW_VALUES)
            .first()
        )
        if row is None or row["concurrency_key"] is None or row["rate_count"] is None:
            return None
        starts = list(_window(self, row, now).order_by("started_at").values_list("started_at", flat=True))
        if len(starts) < row["rate_count"]:
            return None
        return mapper.utc(starts[0]) + timedelta(seconds=row["rate_per"])

    def suspended_by_other_version(self, code_version: str, limit: int) -> list[str]:
        """Ids of suspended actors not suspended under ``code_version`` (``ports.Store``), one indexed query."""
        rows = (
            self._actors()
            .filter(workflow_state=ports.SUSPENDED, destroyed=False)
            .exclude(code_version=code_version)  # NULL (unversioned) is another version too
            .order_by("updated_at")
            .values_list("pk", flat=True)
        )
        return list(rows[:limit])

    def set_paused(
        self,
        actor_id: str,
        paused: bool,
        reason: str | None = None,
        *,
        audit: ports.OperatorActionRecord | None = None,
    ) -> bool:
        """Pause (recording ``reason``) or resume the actor in one conditional UPDATE, with the ``audit`` row
        in the same transaction when it changed; True when it changed. Pausing a finished or suspended
        workflow, or resuming a finished one, changes nothing. ActorNotFoundError for an unknown actor."""
        with self._atomic():
            now = self.now()
            rows = self._actors().filter(pk=actor_id, destroyed=False)
            if paused:
                changed = (
                    rows.filter(paused_at__isnull=True)
                    .exclude(workflow_state__in=list(ports.HALTED_STATES))
                    .update(paused_at=now, pause_reason=reason, updated_at=now)
                )
            else:
                changed = (
                    rows.filter(paused_at__isnull=False)
                    .exclude(workflow_state__in=list(ports.FINISHED_STATES))
                    .update(paused_at=None, pause_reason=None, updated_at=now)
                )
            if not changed and not rows.exists():
                raise errors.ActorNotFoundError(f"no actor with id {actor_id!r}", actor_id=actor_id)
            if changed and audit is not None:
                self._write_audit(actor_id, audit, now)
        return changed == 1
