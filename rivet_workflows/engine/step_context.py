"""The step context ``step`` a step body and a rollback handler receive, and running one attempt of a body."""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from asgiref.sync import sync_to_async

from . import errors, serde
from .reentrancy import RUNNING_STEP_OF

if TYPE_CHECKING:
    from .session import RunSession


class ActorIdentity:
    """``actor_id``, ``key`` and ``name`` of the actor a run belongs to (shared by ``ctx`` and ``step``)."""

    _session: RunSession

    @property
    def actor_id(self) -> str:
        """The actor's id (uuid hex)."""
        return self._session.actor_id

    @property
    def key(self) -> list:
        """The actor's key (a list of str)."""
        return list(self._session.actor.key)

    @property
    def name(self) -> str:
        """The actor type's registered name."""
        return self._session.actor.name


class _StepQueue:
    """``step.queue``: send messages to this actor's own queues from a step body."""

    def __init__(self, step: StepContext) -> None:
        self._step = step

    def send(self, name: str, body: Any = None) -> None:
        """Queue ``body`` on this actor's queue ``name``; delivered with the step's commit (exactly once with
        the step). Raises ``QueueNotFoundError`` for an undeclared queue, ``SerializationError``."""
        session = self._step._session
        session.definition.check_queue(name)
        body = serde.roundtrip(
            body, where=f"queue {name!r} body", max_bytes=session.settings.max_payload_bytes
        )
        session.writes.send(session.actor_id, name, body)


class StepContext(ActorIdentity):
    """``step``: what a step body (and a rollback handler) receives (DESIGN.md section 2, step context).

    ``state`` is the run's one state object (mutate it in place or assign ``step.state = ...``),
    ``vars`` the ephemeral vars, ``attempt`` the 1-based attempt number, ``idempotency_key`` the stable
    ``"{actor_id}:{location}"`` for external calls.
    """

    def __init__(self, session: RunSession, location: str, attempt: int) -> None:
        self._session = session
        self.location = location
        self.attempt = attempt
        self.idempotency_key = f"{session.actor_id}:{location}"
        self.queue = _StepQueue(self)

    @property
    def state(self) -> Any:
        """The actor's state (shared by every step of this run)."""
        return self._session.state

    @state.setter
    def state(self, value: Any) -> None:
        self._session.state = value

    @property
    def vars(self) -> Any:
        """The actor's ephemeral vars (rebuilt on every wake)."""
        return self._session.vars

    @vars.setter
    def vars(self, value: Any) -> None:
        self._session.vars = value

    def client(self) -> Any:
        """A client on the runtime (call other actors)."""
        return self._session.runtime.client()

    def broadcast(self, event: str, *args: Any) -> None:
        """Broadcast ``event`` with ``args`` to the actor's subscribers (best effort; args as tagged JSON).

        Raises ``SerializationError`` if ``args`` do not serialize."""
        payload = serde.to_json(list(args), where=f"event {event!r} arguments")
        self._session.runtime.broadcast(self._session.actor_id, event, payload)

    def destroy(self) -> None:
        """Destroy the actor once this run has committed."""
        self._session.request_destroy()

    def __repr__(self) -> str:
        return f"<StepContext {self.idempotency_key} attempt={self.attempt}>"


def _is_async(fn: Callable[..., Any]) -> bool:
    return inspect.iscoroutinefunction(fn) or inspect.iscoroutinefunction(
        type(fn).__call__ if not inspect.isfunction(fn) else None
    )


async def _call_body(fn: Callable[..., Any], arg: Any) -> Any:
    # runs in its own task (a copy of the context): marks this body as a step of the actor, so a client
    # call back into the same actor fails at once (actor_context.check_not_reentrant) instead of hanging
    RUNNING_STEP_OF.set(arg.actor_id)
    if _is_async(fn):
        return await fn(arg)
    result = await sync_to_async(fn, thread_sensitive=False)(arg)
    if inspect.isawaitable(result):
        result = await result
    return result


async def run_attempt(fn: Callable[..., Any], arg: Any, timeout: float | None) -> Any:
    """Run the body; raises ``StepTimeoutError`` when it exceeds ``timeout`` (the body's task is cancelled)."""
    task = asyncio.ensure_future(_call_body(fn, arg))
    try:
        done, _ = await asyncio.wait({task}, timeout=timeout)
    except asyncio.CancelledError:
        task.cancel()
        raise
    if not done:
        task.cancel()
        raise errors.StepTimeoutError()
    return task.result()
