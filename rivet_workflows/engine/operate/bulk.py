"""One operator action over many actors, each actor's outcome reported and none failing the batch.

The admin's bulk actions and ``manage.py rivet pause|resume|cancel`` act on several actors through here
(docs/howto/admin.md, "Commands"): each actor gets the same engine call its own button makes
(``repairs.recover``, ``cancel.cancel``, ``repairs.pause``, ``repairs.resume``, ``retrying.retry``), and its outcome is one of
``changed``, ``unchanged`` (nothing to do, with why) or ``refused`` (the refusal's reason and code). One
actor's error, even an unexpected one, is reported for that actor and the others proceed.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from ..actor import audit, cancel
from ..model import errors, ports
from . import repairs, retrying

if TYPE_CHECKING:
    from ..model.roles import RuntimeRole

logger = logging.getLogger("rivet_workflows")

#: outcomes of one actor in a bulk action
CHANGED = "changed"
UNCHANGED = "unchanged"
REFUSED = "refused"


@dataclass(frozen=True)
class ActorOutcome:
    """What a bulk action did to one actor: ``outcome`` (``changed``, ``unchanged`` or ``refused``),
    ``reason`` (for ``unchanged`` why there was nothing to do, for ``refused`` the refusal's short text,
    ``repairs.reason``; empty for ``changed``) and ``code`` (the refusal's error code, e.g.
    ``workflow_in_flight``; ``error`` for an unexpected exception; None otherwise)."""

    actor_id: str
    outcome: str
    reason: str = ""
    code: str | None = None
    #: for a recover refused because the run was rolled back: the step to replay from instead
    replay_from: str | None = None


@dataclass
class BulkReport:
    """The outcome of a bulk ``action`` (``recover``, ``cancel``, ``pause``, ``resume``, ``retry``, ``replay``), one
    ``ActorOutcome`` per actor in the order acted on."""

    action: str
    outcomes: list[ActorOutcome] = field(default_factory=list)

    def ids(self, outcome: str) -> list[str]:
        """The ids of the actors whose outcome is ``outcome``."""
        return [o.actor_id for o in self.outcomes if o.outcome == outcome]

    @property
    def changed(self) -> list[str]:
        """The ids of the actors the action changed."""
        return self.ids(CHANGED)

    def of(self, outcome: str) -> list[ActorOutcome]:
        """The ``ActorOutcome`` of every actor whose outcome is ``outcome``."""
        return [o for o in self.outcomes if o.outcome == outcome]


def _recover(runtime: RuntimeRole, actor_id: str, who: str, reason: str | None, bulk: bool) -> bool:
    repairs.recover(runtime, actor_id, who=who, reason=reason, bulk=bulk)
    return True


def _cancel(runtime: RuntimeRole, actor_id: str, who: str, reason: str | None, bulk: bool) -> bool:
    return cancel.cancel(runtime, actor_id, who=who, reason=reason, bulk=bulk)


def _pause(runtime: RuntimeRole, actor_id: str, who: str, reason: str | None, bulk: bool) -> bool:
    return repairs.pause(runtime, actor_id, reason, who=who, bulk=bulk)


def _resume(runtime: RuntimeRole, actor_id: str, who: str, reason: str | None, bulk: bool) -> bool:
    return repairs.resume(runtime, actor_id, reason, who=who, bulk=bulk)


def _retry(runtime: RuntimeRole, actor_id: str, who: str, reason: str | None, bulk: bool) -> bool:
    return retrying.retry(runtime, actor_id, reason, who=who, bulk=bulk)


def _replay(runtime: RuntimeRole, actor_id: str, who: str, reason: str | None, bulk: bool) -> bool:
    repairs.replay(runtime, actor_id, None, who=who, reason=reason, bulk=bulk)
    return True


#: the bulk actions: name -> what it does to one actor (True when it changed it, False when there was
#: nothing to do; a refusal raises). Each writes an audit row per actor it changed (``bulk_<name>``, or
#: ``<name>`` for a command's action on chosen actors).
ACTIONS: dict[str, Callable[[RuntimeRole, str, str, str | None, bool], bool]] = {
    "recover": _recover,
    "cancel": _cancel,
    "pause": _pause,
    "resume": _resume,
    "retry": _retry,
    "replay": _replay,  # the whole workflow from the start (``replay_all``; DESIGN.md section 19)
}


def _nothing_to_do(runtime: RuntimeRole, action: str, actor_id: str) -> str:
    """Why ``action`` left the actor unchanged (the engine call returned False), read from its record."""
    record = runtime.store.get_actor(actor_id)
    state = record.workflow_state
    if action == "cancel":
        return f"the workflow is {state} already; nothing to cancel"
    if action == "pause":
        if state in ports.FINISHED_STATES:
            return f"the workflow is {state}; nothing to pause"
        return "paused already"
    if action == "resume":
        return "not paused; nothing to resume"
    if action == "retry":
        return f"the workflow is {state}, not suspended; nothing to retry"
    return f"the workflow is {state}; nothing to {action}"


def run(
    runtime: RuntimeRole,
    action: str,
    actor_ids: Iterable[str],
    *,
    who: str = audit.PYTHON,
    reason: str | None = None,
    bulk: bool = True,
    check: Callable[[str], None] | None = None,
) -> BulkReport:
    """Do ``action`` (a key of ``ACTIONS``) to each of ``actor_ids`` in turn (``act_on``), as ``who`` (a
    user name, ``"token"``, ``"python"``, ``"command"``) for ``reason``; returns the ``BulkReport``.
    ``bulk``: the audit rows read ``bulk_<action>`` (False: ``<action>``). ``ValueError`` for an unknown
    action or a bad ``who``, before any actor is touched. ``check(actor_id)``: the caller's permission for
    that actor, asked first; a ``RivetWorkflowsError`` it raises (e.g. forbidden) refuses that actor only."""
    if action not in ACTIONS:
        raise ValueError(f"unknown bulk action {action!r}; one of: {', '.join(ACTIONS)}")
    audit.action_record("-", audit.named(action, bulk), who, reason)  # a bad who: refused before any actor
    report = BulkReport(action)
    for actor_id in actor_ids:
        report.outcomes.append(
            act_on(runtime, action, actor_id, who=who, reason=reason, bulk=bulk, check=check)
        )
    return report


def act_on(
    runtime: RuntimeRole,
    action: str,
    actor_id: str,
    *,
    who: str = audit.PYTHON,
    reason: str | None = None,
    bulk: bool = True,
    check: Callable[[str], None] | None = None,
) -> ActorOutcome:
    """Do ``action`` to one actor of a bulk action and say how it went; never raises for the actor.

    A recover of a workflow that is not failed, a cancel of a finished one, a pause of a paused one and a
    resume of one not paused are ``unchanged`` (they write nothing); a refusal (``RivetWorkflowsError``:
    in flight, rolled back, diverged, no such actor...) is ``refused`` with its reason and code, and so is
    any other exception, which is also logged with its traceback: one actor's fault never fails the batch.
    """
    try:
        if check is not None:
            check(actor_id)
        if ACTIONS[action](runtime, actor_id, who, reason, bulk):
            return ActorOutcome(actor_id, CHANGED)
        return ActorOutcome(actor_id, UNCHANGED, _nothing_to_do(runtime, action, actor_id))
    except errors.WorkflowNotFailedError as exc:
        return ActorOutcome(actor_id, UNCHANGED, repairs.reason(exc))
    except errors.RivetWorkflowsError as exc:
        replay_from = exc.replay_from
        return ActorOutcome(actor_id, REFUSED, repairs.reason(exc), exc.code, replay_from)
    except Exception as exc:  # reported for this actor; the caller goes on with the next one
        logger.exception("bulk %s of actor %s failed", action, actor_id)
        return ActorOutcome(actor_id, REFUSED, f"error: {type(exc).__name__}: {exc}", "error")
