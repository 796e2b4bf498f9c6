"""Flow controls of ``MemoryStore`` (DESIGN.md section 12): the sweep's batch claim in priority order, the
admission check of a claim (concurrency per group, run starts in the rate window), the next actor of a
group that freed a slot, the rate window's end, pause and resume.

A mixin: the host class (``MemoryStore``) provides ``_lock``, ``_changed``, ``_actors``, ``_starts``,
``now()``, ``_row()``, ``claim()`` and ``_write_audit()``; every method here but the public ones is called
with ``_lock`` held.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any

from ..engine.model import ports, wake
from . import memory_rows as rows
from .memory_audit import encode_action


class MemoryFlowMixin:
    """``claim_due``, ``flow_retry_at`` and ``set_paused`` of ``ports.Store``, and the flow checks of a claim."""

    # provided by the host class (MemoryStore)
    _lock: Any
    _changed: Any
    _actors: dict[str, rows.ActorRow]
    _starts: dict[tuple[str, str], list[datetime]]
    now: Callable[[], datetime]
    _row: Callable[[str], rows.ActorRow]
    claim: Callable[..., int | None]
    _write_audit: Callable[..., Any]

    def claim_due(
        self, owner: str, limit: int, lease_seconds: float, *, expired_only: bool = False
    ) -> list[tuple[str, int]]:
        """Claim up to ``limit`` due actors (``wake_at <= now``, lease free or expired; only expired ones
        with ``expired_only``), earliest first."""
        with self._lock:
            now = self.now()
            due = sorted(
                (
                    r
                    for r in self._actors.values()
                    if r.wake_at is not None
                    and r.wake_at <= now
                    and not rows.lease_live(r, now)
                    and (not expired_only or r.lease_expires_at is not None)
                ),
                key=lambda r: (-r.priority, r.wake_at, r.created_at, r.actor_id),
            )
            claimed = []
            for row in due:
                if len(claimed) >= limit:
                    break
                token = self.claim(row.actor_id, owner, lease_seconds)
                if token is not None:
                    claimed.append((row.actor_id, token))
            return claimed

    def _group(self, row: rows.ActorRow) -> tuple[str, str]:
        return (row.name, row.concurrency_key or "")

    def _admit(self, row: rows.ActorRow, now: datetime) -> bool:
        """True when the flow limits of ``row``'s group let it be claimed at ``now`` (caller holds the lock)."""
        if row.concurrency_key is None:
            return True
        group = self._group(row)
        if row.concurrency_limit is not None:
            live = sum(
                1
                for other in self._actors.values()
                if self._group(other) == group
                and other.concurrency_key is not None
                and rows.lease_live(other, now)
            )
            if live >= row.concurrency_limit:
                return False
        if row.rate_count is not None and row.rate_per is not None:
            if len(self._window(group, row.rate_per, now)) >= row.rate_count:
                return False
        return True

    def _window(self, group: tuple[str, str], per: float, now: datetime) -> list[datetime]:
        """The run starts of ``group`` within the last ``per`` seconds (older ones are dropped)."""
        since = now - timedelta(seconds=per)
        starts = [at for at in self._starts.get(group, []) if at > since]
        self._starts[group] = starts
        return starts

    def _record_start(self, row: rows.ActorRow, now: datetime) -> None:
        if row.concurrency_key is not None and row.rate_count is not None:
            self._starts.setdefault(self._group(row), []).append(now)

    def _next_in_group(self, row: rows.ActorRow, now: datetime) -> str | None:
        """The due, unleased, unpaused actor of ``row``'s group to wake when ``row`` frees a slot
        (``engine.wake.next_in_group``)."""
        if row.concurrency_key is None or row.concurrency_limit is None:
            return None
        group = self._group(row)
        members = (
            wake.GroupMember(
                actor_id=r.actor_id,
                wake_at=r.wake_at,
                priority=r.priority,
                created_at=r.created_at,
                lease_expires_at=r.lease_expires_at if rows.lease_live(r, now) else None,
                paused=r.paused_at is not None,
            )
            for r in self._actors.values()
            if r.concurrency_key is not None and self._group(r) == group
        )
        return wake.next_in_group(members, releasing=row.actor_id, now=now)

    def flow_retry_at(self, actor_id: str) -> datetime | None:
        """When the rate limit lets the due actor ``actor_id`` be claimed (see ``ports.Store.flow_retry_at``)."""
        with self._lock:
            row = self._actors.get(actor_id)
            if row is None or row.concurrency_key is None or row.rate_count is None or row.rate_per is None:
                return None
            now = self.now()
            if row.wake_at is None or row.wake_at > now or row.paused_at is not None:
                return None
            starts = self._window(self._group(row), row.rate_per, now)
            if len(starts) < row.rate_count:
                return None
            return min(starts) + timedelta(seconds=row.rate_per)

    def set_paused(
        self,
        actor_id: str,
        paused: bool,
        reason: str | None = None,
        *,
        audit: ports.OperatorActionRecord | None = None,
    ) -> bool:
        """Pause or resume the actor (see ``ports.Store.set_paused``), with the ``audit`` row when that
        changed it; True when it did."""
        stored = encode_action(audit) if audit is not None else None
        with self._lock:
            row = self._row(actor_id)
            if paused:
                if row.paused_at is not None or row.workflow_state in ports.HALTED_STATES:
                    return False
                row.paused_at, row.pause_reason = self.now(), reason
            else:
                if row.paused_at is None or row.workflow_state in ports.FINISHED_STATES:
                    return False
                row.paused_at, row.pause_reason = None, None
            row.updated_at = self.now()
            if stored is not None:
                self._write_audit(actor_id, stored, row.updated_at)
            self._changed.notify_all()
            return True
