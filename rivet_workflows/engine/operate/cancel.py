"""Cancelling a workflow (ENGINE-SCENARIOS.md "Lifecycle" 1): state cancelled, wake-up cleared, no run again."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..model import errors, ports
from . import audit

if TYPE_CHECKING:
    from ..model.roles import RuntimeRole

#: how many times ``cancel`` retries when the lease changes hands under it
_ATTEMPTS = 20


def cancel(
    runtime: RuntimeRole,
    actor_id: str,
    *,
    who: str = audit.PYTHON,
    reason: str | None = None,
    bulk: bool = False,
) -> bool:
    """Cancel the workflow of ``actor_id``: ``workflow_state`` becomes ``cancelled``, ``wake_at`` and
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
