"""A waiting send's outcome (``SendResult``), when it gives up, and how many may wait at once (spec
"Queues"; README "Calling actors").

``engine.client`` re-exports ``SendResult``; ``gave_up`` is the check its waiting sends make;
``waiting_send_slot`` bounds the waiting sends of the process."""

from __future__ import annotations

import contextvars
import threading
from collections.abc import Iterator
from contextlib import contextmanager
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


class _WaitingSends:
    """The count of this process's waiting sends, against ``MAX_WAITING_SENDS``."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.count = 0

    def take(self, limit: int) -> bool:
        with self._lock:
            if self.count >= limit:
                return False
            self.count += 1
            return True

    def give_back(self) -> None:
        with self._lock:
            self.count -= 1


#: the waiting sends of this process (every runtime of it: the bound protects its threads and connections)
WAITING_SENDS = _WaitingSends()

#: True in a context that holds a slot already (an HTTP view takes it before reading the actor; the client's
#: send inside it must not take a second one)
_holding: contextvars.ContextVar[bool] = contextvars.ContextVar("rivet_waiting_send_slot", default=False)


@contextmanager
def waiting_send_slot(limit: int) -> Iterator[None]:
    """Hold one of the process's ``limit`` waiting-send slots (``MAX_WAITING_SENDS``) for the block.

    Raises ``TooManyWaitingSendsError`` (HTTP 429) at once when all are taken, touching nothing else, so a
    burst of waiting sends is refused before it reaches the database. Re-entrant within one context (a
    thread, or an async task and the sync calls it makes through ``sync_to_async``): a nested block holds
    the outer slot."""
    if _holding.get():
        yield
        return
    if not WAITING_SENDS.take(limit):
        raise errors.TooManyWaitingSendsError(
            f"{limit} sends of this process wait for their response already (MAX_WAITING_SENDS); "
            "try again shortly",
            limit=limit,
        )
    reset = _holding.set(True)
    try:
        yield
    finally:
        _holding.reset(reset)
        WAITING_SENDS.give_back()
