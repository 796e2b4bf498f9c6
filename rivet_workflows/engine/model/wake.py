"""The wake rules of the storage port, each written once (DESIGN.md section 15).

Pure functions over the values of an actor's row; every store (the ORM store, the PostgreSQL store, the
in-memory store) calls them instead of restating them. Where the PostgreSQL store restates a rule in SQL to
save a round trip, ``tests/port/test_wake_rules_sql.py`` runs generated cases through the rule here and
through the SQL and compares (Hypothesis).

* ``settle``: the wake-up of an actor after a commit (finished -> never due; a release makes it due now when
  a pending message matches its ``waiting_for``, and not before ``defer_until``).
* ``delivery_wakes`` / ``delivered_wake_at``: what a delivered message does to its target.
* ``next_in_group``: the due actor of a concurrency group to wake when a member frees its slot.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from . import ports


def matches(waiting_for: Sequence[str] | None, name: str) -> bool:
    """True when a queue wait on ``waiting_for`` (queue names; ``"*"``: any) takes a message on ``name``."""
    return bool(waiting_for) and ("*" in waiting_for or name in waiting_for)


def settle(
    *,
    workflow_state: str | None,
    wake_at: datetime | None,
    waiting_for: Sequence[str] | None,
    release: bool,
    now: datetime,
    has_matching_message: Callable[[Sequence[str]], bool],
    defer_until: Any = ports.UNSET,
) -> datetime | None:
    """The actor's ``wake_at`` at the end of a commit (the wake rule of ``ports.Store.commit``).

    ``workflow_state``, ``wake_at``, ``waiting_for``: the actor's columns after the commit's writes;
    ``release``: the commit frees the lease; ``now``: the commit's clock (aware datetime);
    ``has_matching_message(waiting_for)``: whether a pending message of the actor is on one of those queue
    names (``"*"``: any); called at most once, and only when its answer can change the result (a store may
    make the actor due in the same statement); ``defer_until``: the commit's ``defer_until`` (a datetime,
    or UNSET/None: no floor).

    Returns the final ``wake_at``: None for a finished workflow (never due); unchanged without a release;
    on a release ``now`` when the actor was not due by then and a matching message is pending, then raised
    to ``defer_until`` when it is earlier. Raises nothing.
    """
    if workflow_state in ports.FINISHED_STATES:
        return None
    if not release:
        return wake_at
    waiting = list(waiting_for or [])
    if waiting and (wake_at is None or wake_at > now) and has_matching_message(waiting):
        wake_at = now
    if isinstance(defer_until, datetime) and wake_at is not None and wake_at < defer_until:
        wake_at = defer_until  # a run left for another code version backs off
    return wake_at


def due_now(wake_at: datetime | None, now: datetime) -> bool:
    """True when an actor with ``wake_at`` is due at ``now`` (a release then names it in ``woken``)."""
    return wake_at is not None and wake_at <= now


def delivery_wakes(
    workflow_state: str | None, waiting_for: Sequence[str] | None, leased: bool, name: str
) -> bool:
    """True when a message on queue ``name`` delivered to an actor wakes it: its workflow is not finished and
    it waits on ``name`` (or ``"*"``) or a run holds its lease (a send during a run is never missed)."""
    return workflow_state not in ports.FINISHED_STATES and (leased or matches(waiting_for, name))


def delivered_wake_at(wake_at: datetime | None, now: datetime) -> datetime | None:
    """The ``wake_at`` of an actor a delivery woke at ``now``: ``now`` unless it was due already. The caller
    writes it (and ``updated_at``) only when it differs from ``wake_at``."""
    return now if wake_at is None or wake_at > now else wake_at


@dataclass(frozen=True)
class GroupMember:
    """One actor of a concurrency group, as ``next_in_group`` reads it.

    ``lease_expires_at``: when its lease ends (None: no lease); ``paused``/``destroyed``: its flags.
    """

    actor_id: str
    wake_at: datetime | None
    priority: int
    created_at: datetime | None
    lease_expires_at: datetime | None = None
    paused: bool = False
    destroyed: bool = False


def group_member_due(member: GroupMember, now: datetime) -> bool:
    """True when ``member`` may be claimed at ``now``: due, not paused or destroyed, its lease free or
    expired (``lease_expires_at`` unset or before ``now``)."""
    return (
        member.wake_at is not None
        and member.wake_at <= now
        and not member.paused
        and not member.destroyed
        and (member.lease_expires_at is None or member.lease_expires_at < now)
    )


def group_order(member: GroupMember) -> tuple:
    """The claim order inside a group: highest priority, then oldest ``wake_at``, ``created_at``, id."""
    return (-member.priority, member.wake_at, member.created_at, member.actor_id)


def next_in_group(members: Iterable[GroupMember], *, releasing: str, now: datetime) -> str | None:
    """The id of the group member to wake when ``releasing`` (an actor id) frees its slot at ``now``: the
    first due member other than it in ``group_order``; None when nobody waits. ``members``: the actors of
    the group (the releasing one may be among them)."""
    due = [m for m in members if m.actor_id != releasing and group_member_due(m, now)]
    return min(due, key=group_order).actor_id if due else None
