"""The SQL of ``PostgresStore``'s flow controls (DESIGN.md section 12): a new actor's flow columns, the claim's
admission check (the SQL functions of migration 0009_flow_controls) and the sweep's candidate query.
"""

from __future__ import annotations

from typing import Any

from ..engine.model import ports


def flow_params(flow: ports.Flow | None) -> list[Any]:
    """The INSERT parameters of a new actor's flow columns: group, limit, rate count and window, priority and
    the timeout in seconds (NULL: no deadline)."""
    if flow is None:
        return [None, None, None, None, 0, None]
    return [
        flow.concurrency_key,
        flow.concurrency_limit,
        flow.rate_count,
        flow.rate_per,
        flow.priority,
        flow.timeout,
    ]


def admit(wait: bool) -> str:
    """The claim's flow check on the actor row aliased ``a``: no group, or the group's limits let one more
    in; ``wait``: wait for the group's lock (else skip it)."""
    flag = "true" if wait else "false"
    return (
        "(CASE WHEN a.concurrency_key IS NULL OR (a.concurrency_limit IS NULL AND a.rate_count IS NULL) "
        "THEN true WHEN a.rate_count IS NULL THEN rivet_flow_slot(a.name, a.concurrency_key, a.concurrency_limit, "
        f"a.actor_id, {flag}) "
        "ELSE rivet_flow_admit(a.name, a.concurrency_key, a.concurrency_limit, a.rate_count, a.rate_per, "
        f"a.actor_id, a.lease_token + 1, {flag}) END)"
    )


#: the live leases of the candidate ``a``'s group on the statement's snapshot, counted up to its limit
_LIVE_IN_GROUP = (
    "(SELECT count(*) FROM (SELECT 1 FROM {actor} AS b WHERE b.name = a.name "
    "AND b.concurrency_key = a.concurrency_key AND b.lease_owner IS NOT NULL "
    "AND b.lease_expires_at > statement_timestamp() LIMIT a.concurrency_limit) AS live)"
)

#: the free slots of the candidate's group (NULL: no concurrency limit)
_ROOM = (
    "(CASE WHEN a.concurrency_limit IS NULL THEN NULL ELSE a.concurrency_limit - " + _LIVE_IN_GROUP + " END)"
)

#: claim_due reads (and locks, SKIP LOCKED) this many candidates per actor it may claim: 1, so that
#: concurrent sweeps spread over the due actors; a group with fewer free slots than due candidates makes a
#: short batch, and the next claim passes the full group over (``_GROUP_HAS_ROOM``)
OVERFETCH = 1

#: a quick pre-filter of claim_due's candidates: a group already at its concurrency limit is passed over
#: (so it does not fill the batch); ``admit`` decides exactly
_GROUP_HAS_ROOM = "(a.concurrency_limit IS NULL OR " + _LIVE_IN_GROUP + " < a.concurrency_limit)"


def candidates(actor_table: str, priority: str, order: str, *, expired_only: bool = False) -> str:
    """One branch of claim_due's candidates from ``actor_table``: due, unpaused actors with a free lease whose
    group has room, matching ``priority`` (``a.priority = 0``: by wake_at on rivet_actor_due_idx; ``<> 0``:
    on the partial rivet_actor_prio_due_idx), in ``order``, locked with SKIP LOCKED; LIMIT is the
    statement's parameter. ``expired_only``: only actors whose lease expired (a takeover), not free ones."""
    lease = (
        "a.lease_expires_at < statement_timestamp()"
        if expired_only
        else "(a.lease_expires_at IS NULL OR a.lease_expires_at < statement_timestamp())"
    )
    return (
        "SELECT a.actor_id, a.name, a.concurrency_key, a.priority, a.wake_at, a.created_at, "
        f"{_ROOM.format(actor=actor_table)} AS room FROM {actor_table} AS a "
        f"WHERE a.wake_at <= statement_timestamp() AND {priority} AND NOT a.destroyed AND a.paused_at IS NULL "
        f"AND {lease} AND {_GROUP_HAS_ROOM.format(actor=actor_table)} "
        f"ORDER BY {order}, a.created_at, a.actor_id LIMIT %s FOR UPDATE OF a SKIP LOCKED"
    )
