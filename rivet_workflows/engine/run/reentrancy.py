"""Which actor's step body runs in this context, so a body cannot call back into its own actor."""

from __future__ import annotations

from contextvars import ContextVar

from ..model import errors

#: the actor id whose step body (or ``on_error`` hook) runs in this context: set by the step primitive in
#: the body's own task (a copy of the context) and by the run around the hook; read by the workflow
#: context (steps do not nest) and by the client (no call back into the actor whose step lock is held)
RUNNING_STEP_OF: ContextVar[str | None] = ContextVar("rivet_running_step_of", default=None)


def in_step_of(actor_id: str) -> bool:
    """True when the calling code runs inside a step body (or ``on_error`` hook) of ``actor_id``."""
    return RUNNING_STEP_OF.get() == actor_id


def check_not_reentrant(actor_id: str, what: str) -> None:
    """Raise ``ReentrantCallError`` when called from a step body of ``actor_id`` itself: the step holds the
    actor's step lock, so ``what`` (an action, a waiting send, destroy) would wait for the step that waits
    for it until its timeout. A critical error: the step fails at once, without retries."""
    if in_step_of(actor_id):
        raise errors.ReentrantCallError(
            f"a step of actor {actor_id} cannot {what} on its own actor: the step holds the actor's step lock "
            "and would wait for itself; change step.state directly, or use step.queue.send / step.destroy()",
            actor_id=actor_id,
        )
