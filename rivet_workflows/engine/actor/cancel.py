"""Cancelling a workflow (ENGINE-SCENARIOS.md "Lifecycle" 1): state cancelled, wake-up cleared, no run again;
and its children with it (``children=True``, ``parent_close="cancel"``; DESIGN.md section 20)."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from ..model import errors, ports
from . import audit

if TYPE_CHECKING:
    from ..model.roles import RuntimeRole

#: how many times ``cancel`` retries when the lease changes hands under it
_ATTEMPTS = 20

logger = logging.getLogger("rivet_workflows")


def cancel(
    runtime: RuntimeRole,
    actor_id: str,
    *,
    who: str = audit.PYTHON,
    reason: str | None = None,
    bulk: bool = False,
    children: bool = False,
) -> bool:
    """Cancel the workflow of ``actor_id`` and, with ``children``, every unfinished descendant (``cancel_tree``);
    the children of a type declaring ``parent_close="cancel"`` are cancelled with it either way
    (``close_children``). Returns whether the workflow of ``actor_id`` itself was cancelled by this call.
    """
    done = cancel_one(runtime, actor_id, who=who, reason=reason, bulk=bulk)
    if children:
        cancel_tree(runtime, actor_id, who=who, reason=reason)
    elif done:
        close_children(runtime, actor_id, who=who, reason=reason)
    return done


def cancel_one(
    runtime: RuntimeRole,
    actor_id: str,
    *,
    who: str = audit.PYTHON,
    reason: str | None = None,
    bulk: bool = False,
) -> bool:
    """Cancel the workflow of ``actor_id`` alone: ``workflow_state`` becomes ``cancelled``, ``wake_at`` and
    ``waiting_for`` are cleared, and no executor runs it again. Rollback handlers do not run. The same
    commit writes the audit row (``cancel``, ``bulk_cancel`` with ``bulk``) by ``who`` for ``reason``;
    nothing is recorded when the workflow had finished already.

    A run in progress is fenced out: the lease is taken over (``store.handoff`` bumps the fencing token), so
    that run's next write is rejected and it stops (a step body already running finishes, but its outcome
    is not recorded). A paused actor is cancelled too (``Store.claim_for_operator``). Returns False, having
    written nothing, when the workflow had already finished (completed, failed or cancelled). Raises
    ``ActorNotFoundError`` for a destroyed actor, and ``WorkflowInFlightError`` (409) in the unlikely case
    the lease changed hands on every one of its attempts. Sync.
    """
    store, settings = runtime.store, runtime.settings
    owner = f"{runtime.owner}:cancel"
    row = audit.action_record(actor_id, audit.bulk(audit.CANCEL) if bulk else audit.CANCEL, who, reason)
    for _ in range(_ATTEMPTS):
        # decided on a read before anything is claimed: a cancel of a finished workflow writes nothing
        record = store.get_actor(actor_id)
        if record.workflow_state in ports.FINISHED_STATES:
            return False
        # paused or held back by its flow limits, the actor is still the operator's to cancel
        token = store.claim_for_operator(actor_id, owner, settings.lease_seconds)
        if token is None:  # an executor holds the lease: take it over
            token = store.handoff(actor_id, record.lease_token, owner, settings.lease_seconds)
        if token is None:  # the lease changed hands meanwhile: look again
            continue
        if store.get_actor(actor_id).workflow_state in ports.FINISHED_STATES:  # it finished meanwhile
            store.release(actor_id, token)
            return False
        result = store.commit(
            actor_id,
            token,
            ports.Commit(
                workflow_state=ports.CANCELLED,
                wake_at=None,
                waiting_for=[],
                step_lock_until=None,
                release=True,
                audit=row,
            ),
        )
        if result.ok:
            runtime.observer.workflow_finished(record.name, ports.CANCELLED)
            runtime.notify_history(actor_id)  # open trace pages show the cancelled state at once
            return True
    raise errors.WorkflowInFlightError(
        f"could not cancel actor {actor_id}: its lease kept changing hands; try again",
        actor_id=actor_id,
        reason="refused: the lease kept changing hands",
    )


def _child_reason(parent_id: str, reason: str | None) -> str:
    return f"cancelled with its parent {parent_id}" + (f": {reason}" if reason else "")


def cancel_tree(runtime: RuntimeRole, actor_id: str, *, who: str, reason: str | None = None) -> list[str]:
    """Cancel every unfinished descendant of ``actor_id`` (``Store.list_children``, breadth first), each in
    its own audited commit (``cancel_one``, ``who``, reason ``"cancelled with its parent <id>: <reason>"``);
    a finished descendant is left as it is, but its own descendants are still visited. Returns the ids it
    cancelled, parents before children (DESIGN.md section 20)."""
    cancelled: list[str] = []
    seen = {actor_id}
    level = [actor_id]
    while level:
        following: list[str] = []
        for parent_id in level:
            for child in runtime.store.list_children(parent_id):
                if child.actor_id in seen:
                    continue
                seen.add(child.actor_id)
                following.append(child.actor_id)
                if child.workflow_state in ports.FINISHED_STATES:
                    continue
                try:
                    if cancel_one(runtime, child.actor_id, who=who, reason=_child_reason(parent_id, reason)):
                        cancelled.append(child.actor_id)
                except errors.ActorNotFoundError:  # destroyed meanwhile
                    continue
        level = following
    return cancelled


def close_children(
    runtime: RuntimeRole, actor_id: str, *, who: str = audit.PARENT_CLOSE, reason: str | None = None
) -> list[str]:
    """The parent's workflow of ``actor_id`` failed or was cancelled: cancel its unfinished children whose
    type declares ``parent_close="cancel"`` (each audited; through ``cancel``, so their own such children
    follow), leaving the others (``"abandon"``). Returns the ids of the children it cancelled. Never
    raises for a child: an error is logged and the next child is handled (DESIGN.md section 20)."""
    cancelled: list[str] = []
    registry = runtime.registry
    for child in runtime.store.list_children(actor_id):
        if child.workflow_state in ports.FINISHED_STATES or child.name not in registry:
            continue
        if registry.get(child.name).parent_close != "cancel":
            continue
        try:
            if cancel(runtime, child.actor_id, who=who, reason=_child_reason(actor_id, reason)):
                cancelled.append(child.actor_id)
        except Exception:
            logger.exception("could not cancel child %s of actor %s (parent_close)", child.actor_id, actor_id)
    return cancelled
