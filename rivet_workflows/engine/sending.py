"""A waiting send's outcome (``SendResult``) and when it gives up (spec "Queues"; manual: HTTP API, waiting
sends).

``engine.client`` re-exports ``SendResult``; ``gave_up`` is the check its waiting sends make."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from . import errors, ports

if TYPE_CHECKING:
    from .runtime import Runtime


@dataclass(frozen=True)
class SendResult:
    """Outcome of ``handle.send(..., wait=True)``: ``status`` is ``"completed"`` (with the ``response`` the
    workflow passed to ``message.complete``) or ``"timed_out"`` (``response`` None). Spec: "Queues".

    ``detail`` says why a send gave up: the timeout passed (and what became of the message), or the
    workflow ended (completed, failed, cancelled) without completing the message, which ends the wait early.
    """

    status: Literal["completed", "timed_out"]
    response: Any = None
    detail: str | None = field(default=None, compare=False)


#: ``SendResult.detail`` of a waiting send whose actor was destroyed (its messages went with it)
DESTROYED = "the actor was destroyed before completing the message"


def gave_up(
    runtime: Runtime, message: ports.MessageRecord, actor_id: str, timed_out: bool
) -> SendResult | None:
    """None while a waiting send should go on; else the ``timed_out`` result with its ``detail``."""
    try:
        state = runtime.store.get_actor(actor_id).workflow_state
    except errors.ActorNotFoundError:
        return SendResult("timed_out", None, DESTROYED)
    if state in ports.FINISHED_STATES:
        # ``message`` was read before the state: the commit that finished the workflow may have completed it
        try:
            message = runtime.store.get_message(message.id)
        except LookupError:
            return SendResult("timed_out", None, DESTROYED)
        if message.status == ports.MESSAGE_COMPLETED:
            return SendResult("completed", message.response)
        return SendResult("timed_out", None, f"the workflow {state} without completing the message")
    if not timed_out:
        return None
    if message.status == ports.MESSAGE_RECEIVED:
        detail = (
            "the workflow received the message but has not completed it (was it received with "
            "completable=True, and does the workflow call message.complete()?)"
        )
    else:
        detail = "the workflow has not received the message yet (is it waiting on this queue?)"
    return SendResult("timed_out", None, f"timed out: {detail}")
