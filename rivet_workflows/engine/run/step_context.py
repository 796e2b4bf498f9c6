"""The step context ``step`` a step body and a rollback handler receive, and running one attempt of a body."""

from __future__ import annotations

import asyncio
import inspect
import logging
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from asgiref.sync import sync_to_async

from ..model import errors, serde
from ..model.attributes import check_attributes
from .reentrancy import RUNNING_STEP_OF
from .streams import StepStream

if TYPE_CHECKING:
    from ..model.roles import SessionRole

logger = logging.getLogger("rivet_workflows")


class ActorIdentity:
    """``actor_id``, ``key`` and ``name`` of the actor a run belongs to (shared by ``ctx`` and ``step``)."""

    _session: SessionRole

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
        if self._step.outbox is not None:  # an atomic step: sent with its own commit, or not at all
            self._step.outbox.append((session.actor_id, name, body, False))
            return
        session.writes.send(session.actor_id, name, body)


def idempotency_key(actor_id: str, location: str, generation: int = 0) -> str:
    """``step.idempotency_key`` of the entry at ``location``: ``"{actor_id}:{location}"``, with
    ``"#{generation}"`` appended when the entry was recorded after the actor's ``generation``-th replay
    (``EntryRecord.data["generation"]``, absent for 0: first runs keep the plain key)."""
    return f"{actor_id}:{location}" + (f"#{generation}" if generation else "")


class StepContext(ActorIdentity):
    """``step``: what a step body (and a rollback handler) receives (DESIGN.md section 2, step context).

    ``state`` is the run's one state object (mutate it in place or assign ``step.state = ...``),
    ``vars`` the ephemeral vars, ``attempt`` the 1-based attempt number, ``idempotency_key`` the stable
    ``"{actor_id}:{location}"`` for external calls (the same on every attempt and every executor: bodies
    run at least once, so an external call keyed by it is applied once); an entry recorded after the
    actor's ``n``-th replay gets ``"{actor_id}:{location}#{n}"`` (``generation``), so a redone step is a new
    call for an idempotent external API, not the original one. ``cancelled`` is a
    ``threading.Event`` set when the attempt is cancelled (its ``timeout`` passed, the run lost its lease,
    a race it ran in was decided); a sync body should check it (``step.cancelled.is_set()`` or
    ``step.cancelled.wait(seconds)`` instead of ``time.sleep``) and return (DESIGN.md section 12).
    """

    def __init__(self, session: SessionRole, location: str, attempt: int, generation: int = 0) -> None:
        self._session = session
        #: an atomic attempt's own sends (delivered by its commit only); None: the run's write buffer
        self.outbox: list[tuple[str, str, Any, bool]] | None = None
        self.location = location
        self.attempt = attempt
        self.idempotency_key = idempotency_key(session.actor_id, location, generation)
        self.queue = _StepQueue(self)
        self.cancelled = threading.Event()
        #: names of the durable streams this attempt wrote to (``stream``)
        self.streams_written: set[str] = set()

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
        """A client on the runtime (call other actors). The actors it creates record this actor as their
        parent (``handle.children()``, ``cancel(children=True)``, ``parent_close``; DESIGN.md section 20).
        Its sends to an actor on another shard are written with this step (``send_with_step``)."""
        return self._session.runtime.client(parent_id=self._session.actor_id, step=self)

    def send_with_step(self, definition: Any, actor_id: str, name: str, body: Any) -> None:
        """Queue ``body`` on queue ``name`` of the actor ``actor_id`` (of type ``definition``, an
        ``ActorDefinition``) with this step's commit, as ``step.queue.send`` does for the actor's own
        queues: exactly once with the step. The client of a step sends so to an actor on another shard,
        where the store keeps it as a relay row delivered after the commit (DESIGN.md section 21).
        ``QueueNotFoundError``, ``NoWorkflowError``, ``SerializationError``/``PayloadTooLargeError``."""
        session = self._session
        definition.check_queue(name)
        body = serde.roundtrip(
            body, where=f"queue {name!r} body", max_bytes=session.settings.max_payload_bytes
        )
        if self.outbox is not None:  # an atomic step: sent with its own commit, or not at all
            self.outbox.append((actor_id, name, body, False))
            return
        session.writes.send(actor_id, name, body)

    def create_with_step(self, entry: Any) -> None:
        """Commit ``entry`` (a ``ports.RelayCreate``: a ``get_or_create`` of an actor on another shard from
        this step's client, its key and input checked already) with this step, as ``send_with_step`` does a
        send: the store writes it as a relay row of kind ``create`` on this actor's shard, ahead of the
        sends recorded after it, and the relay creates the actor (DESIGN.md section 21)."""
        if self.outbox is not None:  # an atomic step: with its own commit, or not at all
            self.outbox.append(entry)
            return
        self._session.writes.create_on_other_shard(entry)

    def broadcast(self, event: str, *args: Any) -> None:
        """Broadcast ``event`` with ``args`` to the actor's subscribers (best effort; args as tagged JSON).

        Raises ``SerializationError`` if ``args`` do not serialize."""
        payload = serde.to_json(list(args), where=f"event {event!r} arguments")
        self._session.runtime.broadcast(self._session.actor_id, event, payload)

    def stream(self, name: str) -> Any:
        """The actor's durable stream ``name`` for this attempt (DESIGN.md section 17):
        ``step.stream(name).write(value)`` commits the item at once (a reader sees it while the step
        runs) and returns its offset; ``await step.stream(name).awrite(value)`` in an async body. Items of
        an attempt that does not complete are marked discarded. ``ValueError`` for a bad name."""
        return StepStream(self, name)

    def set_attributes(self, attributes: dict[str, Any]) -> None:
        """Merge ``attributes`` (a dict of str -> JSON scalar) into the actor's search attributes; written
        with this step's commit (DESIGN.md section 19). ``InvalidAttributesError`` (a ``CriticalError``: the
        step fails, not retried) for another value."""
        self._session.writes.set_attributes(check_attributes(attributes))

    def destroy(self) -> None:
        """Destroy the actor once this run has committed."""
        self._session.request_destroy()

    def __repr__(self) -> str:
        return f"<StepContext {self.idempotency_key} attempt={self.attempt}>"


def is_async(fn: Callable[..., Any]) -> bool:
    """True when ``fn`` is an ``async def`` function (or an object whose ``__call__`` is one)."""
    return _is_async(fn)


def _is_async(fn: Callable[..., Any]) -> bool:
    return inspect.iscoroutinefunction(fn) or inspect.iscoroutinefunction(
        type(fn).__call__ if not inspect.isfunction(fn) else None
    )


class _Body:
    """One body's progress, shared by the loop and the body's thread (a handshake under a lock): the body
    either begins (``begin`` True) and later ``returned`` is set, or it is settled before it began
    (``settled`` True) and then never runs."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._began = False
        self._skip = False
        self.returned = threading.Event()

    def begin(self) -> bool:
        """Called first thing by the body (in its thread for a sync body): False when it must not run."""
        with self._lock:
            if self._skip:
                return False
            self._began = True
            return True

    def settled(self) -> bool:
        """True when the body returned, or had not begun (it never will now)."""
        with self._lock:
            if not self._began:
                self._skip = True
                return True
        return self.returned.is_set()


async def _call_body(fn: Callable[..., Any], arg: StepContext, body: _Body) -> Any:
    # runs in its own task (a copy of the context): marks this body as a step of the actor, so a client
    # call back into the same actor fails at once (actor_context.check_not_reentrant) instead of hanging
    RUNNING_STEP_OF.set(arg.actor_id)
    if _is_async(fn):
        if not body.begin():
            raise asyncio.CancelledError()
        try:
            return await fn(arg)
        finally:
            body.returned.set()

    def call(step: StepContext) -> Any:
        if not body.begin():  # the attempt was settled (timed out) before this thread picked it up
            return None
        try:
            return fn(step)
        finally:
            body.returned.set()  # the thread is done: a retry may start

    result = await sync_to_async(call, thread_sensitive=False)(arg)
    if inspect.isawaitable(result):
        result = await result
    return result


def _retrieve_outcome(task: asyncio.Future) -> None:
    """Done-callback of a body's task the attempt no longer awaits (cancelled or timed out): read its
    exception, so a body that raised while being cancelled is not reported by asyncio as "Task exception
    was never retrieved" (the attempt's outcome is decided already)."""
    if not task.cancelled():
        task.exception()


async def _await_return(task: asyncio.Future, body: _Body, seconds: float) -> bool:
    """Wait up to ``seconds`` for a cancelled body to return (a sync body's thread outlives its cancelled
    task); True when it did."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + seconds
    await asyncio.wait({task}, timeout=seconds)
    while not body.settled():
        remaining = deadline - loop.time()
        if remaining <= 0:
            return False
        await asyncio.sleep(min(0.01, remaining))
    return True


async def run_attempt(fn: Callable[..., Any], arg: StepContext, timeout: float | None) -> Any:
    """Run one attempt of a body (a step or a rollback handler) with ``arg``, its step context.

    When it exceeds ``timeout`` (seconds) the attempt is cancelled: an async body's task is cancelled, a
    sync body finds ``arg.cancelled`` set. This returns (raising ``StepTimeoutError``) only once the body
    returned, or ``settings.step_abandon_seconds`` after the timeout (logged as abandoned), so a retry never
    overlaps the attempt it replaces (DESIGN.md section 12). When the run itself is cancelled (its lease is
    lost, a race is decided) the body is cancelled the same way and ``CancelledError`` propagates at once.
    """
    session = arg._session
    body = _Body()
    task = asyncio.ensure_future(_call_body(fn, arg, body))
    with session.bodies.guard(arg):
        try:
            done, _ = await asyncio.wait({task}, timeout=timeout)
        except asyncio.CancelledError:
            arg.cancelled.set()
            task.cancel()
            task.add_done_callback(_retrieve_outcome)
            raise
        if done:
            return task.result()
        arg.cancelled.set()
        task.cancel()
        task.add_done_callback(_retrieve_outcome)
        abandon = session.settings.step_abandon_seconds
        if not await _await_return(task, body, abandon):
            logger.warning(
                "step %r of actor %s (%s) attempt %d did not return %gs after its %gs timeout; abandoned "
                "(a retry may now run beside it)",
                arg.location,
                session.actor_id,
                session.actor.name,
                arg.attempt,
                abandon,
                timeout,
            )
        raise errors.StepTimeoutError()
