"""Retry of suspended runs (DESIGN.md section 16, docs/explanation/failures.md).

A code error suspends a run (``suspension``); once the code is fixed the run goes on from where it stopped:
completed steps replay their recorded outputs, the statement that raised runs again. ``retry`` is the one
operation behind ``handle.retry``, HTTP ``POST .../inspector/workflow/retry``, the admin's button and bulk
action and ``manage.py rivet retry``; ``retry_on_new_code`` is the automatic retry a process of another
``CODE_VERSION`` does once, at once, from its sweep (a deploy with the fix).
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from ..actor import audit
from ..model import ports

if TYPE_CHECKING:
    from ..model.roles import RuntimeRole

logger = logging.getLogger("rivet_workflows")

__all__ = ["retry", "retry_on_new_code"]


def retry(
    runtime: RuntimeRole,
    actor_id: str,
    reason: str | None = None,
    *,
    who: str = audit.PYTHON,
    bulk: bool = False,
) -> bool:
    """Retry ``actor_id``'s suspended run: the workflow becomes sleeping and due now, its error is cleared,
    and the dispatcher runs it; the same commit writes the audit row ``retry`` (``bulk_retry`` with
    ``bulk``) by ``who`` (a user name, ``"token"``, ``"python"``, ``"command"``, ``"deploy"``) for
    ``reason`` (str or None). Returns True when it retried; False, writing nothing, when the run is not
    suspended (or another retry took it first). The lease is an operator's (``Store.claim_for_operator``):
    a paused actor or a full concurrency group does not refuse the retry; the flow rules apply when a
    worker then claims the run. ``ActorNotFoundError``; ``ValueError`` for a bad ``who``."""
    row = audit.action_record(actor_id, audit.named(audit.RETRY, bulk), who, reason)
    store = runtime.store
    if store.get_actor(actor_id).workflow_state != ports.SUSPENDED:
        return False
    token = store.claim_for_operator(actor_id, runtime.owner, runtime.settings.lease_seconds)
    if token is None:  # a suspended run holds no lease: another retry has it
        return False
    result = None
    try:
        if store.get_actor(actor_id).workflow_state == ports.SUSPENDED:
            commit = ports.Commit(
                workflow_state=ports.SLEEPING,
                error=None,
                wake_at=store.now(),
                waiting_for=[],
                step_lock_until=None,
                release=True,
                audit=row,
            )
            result = store.commit(actor_id, token, commit)
    finally:
        if result is None:  # not suspended any more, or the commit raised: give the lease back unchanged
            store.commit(actor_id, token, ports.Commit(release=True))
    if not result.ok:
        return False
    for woken in result.woken or [actor_id]:
        runtime.wake(woken)
    runtime.notify_history(actor_id)
    return True


def retry_on_new_code(runtime: RuntimeRole, limit: int = 100) -> list[str]:
    """Retry, once, every run suspended under a code version other than this process's ``CODE_VERSION``
    (at most ``limit`` per call; nothing when this process is unversioned): the sweep and ``drain`` of a
    process that runs newer code call it, so a deploy with the fix resumes the runs a code error suspended.
    A run that suspends again under this version is left for an operator or the next deploy. Audited as
    ``retry`` by ``"deploy"``. Returns the ids retried."""
    version = runtime.settings.code_version
    if not version:
        return []
    retried = []
    for actor_id in runtime.store.suspended_by_other_version(version, limit):
        try:
            before = runtime.store.get_actor(actor_id).code_version
            why = f"automatic retry: suspended on code version {before!r}, this process runs {version!r}"
            if retry(runtime, actor_id, why, who=audit.DEPLOY):
                retried.append(actor_id)
        except Exception:  # one actor's trouble (destroyed meanwhile...) does not stop the others
            logger.exception(
                "automatic retry of suspended actor %s failed; the next sweep tries again", actor_id
            )
    if retried:
        logger.info("retried %d run(s) suspended on another code version than %r", len(retried), version)
    return retried
