"""The client: get or create actors, call their actions, send to their queues (DESIGN.md section 2, "Client")."""

from __future__ import annotations

import asyncio
import copy
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from asgiref.sync import sync_to_async

from . import actions, errors, ports, repairs, serde
from .actor_context import ActorContext
from .cancel import cancel as cancel_workflow
from .delivery import send_message
from .reentrancy import check_not_reentrant
from .settings import to_seconds

if TYPE_CHECKING:
    from .definitions import ActorDefinition
    from .runtime import Runtime

logger = logging.getLogger("rivet_workflows")


ActorAlreadyExistsError = errors.ActorAlreadyExistsError  # re-exported for older imports


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


#: how often (seconds) a waiting send also checks whether the workflow ended without answering
_ENDED_CHECK_SECONDS = 0.25
#: the longest pause (seconds) between two checks of a waiting send's message (case C55)
MAX_SEND_POLL_SECONDS = 0.5


class _Backoff:
    """The pauses of a waiting send (case C55): the first is ``first`` seconds (``poll_interval``), each next
    one twice as long up to ``MAX_SEND_POLL_SECONDS`` (or ``first`` when that is longer), and none runs past
    ``deadline`` (a ``time.monotonic()`` value), so the last check happens at the deadline itself.

    A reply that comes at once is seen within a few ``poll_interval``s; a send that waits long costs about
    two store reads per ``MAX_SEND_POLL_SECONDS`` instead of two per ``poll_interval`` (4/s, was ~54/s).
    PostgreSQL's LISTEN/NOTIFY wake on the message's completion will replace the pause itself
    (``ActorHandle._pause``), not this schedule.
    """

    def __init__(self, first: float, deadline: float) -> None:
        self.pause = max(first, 0.001)
        self.cap = max(MAX_SEND_POLL_SECONDS, self.pause)
        self.deadline = deadline

    def next_pause(self) -> float:
        """Seconds to pause before the next check (0 at or after the deadline)."""
        pause = min(self.pause, max(self.deadline - time.monotonic(), 0.0))
        self.pause = min(self.pause * 2, self.cap)
        return pause


#: ``SendResult.detail`` of a waiting send whose actor was destroyed (its messages went with it)
_DESTROYED = "the actor was destroyed before completing the message"


def _gave_up(
    runtime: Runtime, message: ports.MessageRecord, actor_id: str, timed_out: bool
) -> SendResult | None:
    """None while a waiting send should go on; else the ``timed_out`` result with its ``detail``."""
    try:
        state = runtime.store.get_actor(actor_id).workflow_state
    except errors.ActorNotFoundError:
        return SendResult("timed_out", None, _DESTROYED)
    if state in ports.FINISHED_STATES:
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


def normalize_key(key: Any) -> list:
    """An actor key as stored: a ``str`` becomes ``[str]``, a list or tuple becomes a list.

    Raises ``TypeError`` for anything else (keys are strings or sequences of JSON values).
    """
    if isinstance(key, str):
        return [key]
    if isinstance(key, (list, tuple)):
        return list(key)
    raise TypeError(f"an actor key is a str or a list of values, got {type(key).__name__}")


def _twin(method: Callable[..., Any]) -> Callable[..., Any]:
    """The ``a``-prefixed async twin of a sync client method (runs it with ``sync_to_async``)."""

    async def twin(self: Any, *args: Any, **kwargs: Any) -> Any:
        return await sync_to_async(method, thread_sensitive=True)(self, *args, **kwargs)

    twin.__name__ = f"a{method.__name__}"
    twin.__doc__ = f"Async twin of ``{method.__name__}``."
    return twin


class Client:
    """Entry point to the actors of one runtime: ``client.payment_actor`` or ``client["payment_actor"]``
    (an ``ActorTypeClient``). Unknown names raise ``AttributeError`` / ``ActorNotFoundError``."""

    def __init__(self, runtime: Runtime) -> None:
        self.runtime = runtime

    def __getitem__(self, name: str) -> ActorTypeClient:
        return ActorTypeClient(self.runtime, self.runtime.registry.get(name))

    def __getattr__(self, name: str) -> ActorTypeClient:
        runtime = self.__dict__.get("runtime")
        if name.startswith("_") or runtime is None or name not in runtime.registry:
            raise AttributeError(
                f"no actor type named {name!r} (registered: {self.runtime.registry.names()})"
            )
        return self[name]

    def __dir__(self) -> list[str]:
        return [*super().__dir__(), *self.runtime.registry.names()]


class ActorTypeClient:
    """Handles on actors of one type (``client.payment_actor``); sync methods with ``a``-prefixed twins."""

    def __init__(self, runtime: Runtime, definition: ActorDefinition) -> None:
        self.runtime = runtime
        self.definition = definition
        self.name = definition.name or ""

    def _handle(self, record: ports.ActorRecord) -> ActorHandle:
        return ActorHandle(self.runtime, self.definition, record.actor_id, record.key)

    def get_or_create(self, key: Any, input: Any = None) -> ActorHandle:
        """The actor with ``key`` (str or list), creating it with ``input`` if needed.

        Creation order (ENGINE-SEMANTICS.md section 10): state (``create_state``/``state``), ``on_create(c)``
        or ``on_create(c, input)`` (serialised like an action), then, for a workflow actor, it is due (created
        due in one store write, or made due by ``on_create``'s own write, so the hook always runs before the
        workflow) and handed to the dispatcher (vars and ``on_wake`` run in the executor). Raises
        ``SerializationError``/``PayloadTooLargeError`` for an unserializable or oversized input/state.
        """
        handle, _ = self._get_or_create(normalize_key(key), input, lookup_first=True)
        return handle

    def create(self, key: Any, input: Any = None) -> ActorHandle:
        """Create a new actor with ``key``; ``ActorAlreadyExistsError`` if one exists. See ``get_or_create``.

        The initial state is built before the insert (one store write creates the actor, already due for
        a workflow actor without ``on_create``), so ``create_state`` also runs when the key turns out to
        exist; ``on_create`` runs only for the actor actually created.
        """
        handle, created = self._get_or_create(normalize_key(key), input, lookup_first=False)
        if not created:
            raise ActorAlreadyExistsError(
                f"actor {self.name!r} with key {handle.key!r} already exists", name=self.name, key=handle.key
            )
        return handle

    def get(self, key: Any) -> ActorHandle:
        """The existing actor with ``key``; ``ActorNotFoundError`` if there is none."""
        key = normalize_key(key)
        record = self.runtime.store.find_actor(self.name, key)
        if record is None:
            raise errors.ActorNotFoundError(
                f"no actor {self.name!r} with key {key!r}", name=self.name, key=key
            )
        return self._handle(record)

    def get_for_id(self, actor_id: str) -> ActorHandle:
        """The existing actor with id ``actor_id``; ``ActorNotFoundError`` if unknown or of another type."""
        record = self.runtime.store.get_actor(actor_id)
        if record.name != self.name:
            raise errors.ActorNotFoundError(
                f"actor {actor_id} is a {record.name!r}, not a {self.name!r}", actor_id=actor_id
            )
        return self._handle(record)

    aget_or_create = _twin(get_or_create)
    acreate = _twin(create)
    aget = _twin(get)
    aget_for_id = _twin(get_for_id)

    def _get_or_create(self, key: list, input: Any, *, lookup_first: bool = True) -> tuple[ActorHandle, bool]:
        """Get or create the actor; ``lookup_first`` False builds the state up front and inserts at once
        (``store.create_actor``: one write when the key is new), True looks the key up first (``create_state``
        then runs only when creating). A workflow actor is created due, or, with ``on_create``, made due
        by the hook's own write; it is then handed to the dispatcher. If ``on_create`` raises, the new actor
        is deleted again and the hook's exception propagates (nothing is left behind)."""
        runtime, definition = self.runtime, self.definition
        limit = runtime.settings.max_payload_bytes
        serde.to_json(key, where="actor key (MAX_KEY_BYTES)", max_bytes=runtime.settings.max_key_bytes)
        input = serde.roundtrip(input, where="actor input", max_bytes=limit)

        def create_state() -> Any:
            state = definition.initial_state(serde.roundtrip(input), key=key)
            serde.to_json(state, where="initial actor state", max_bytes=limit)
            return state

        workflow = definition.run is not None
        due = workflow and definition.on_create is None  # on_create runs before the actor is due
        store = runtime.store

        def flow(state: Any) -> ports.Flow | None:
            return flow_of(runtime, definition, key, state)

        if lookup_first:
            record, created = store.get_or_create_actor(
                self.name, key, input, create_state, due=due, flow=flow if definition.has_flow else None
            )
        else:
            try:
                state = create_state()
            except Exception:  # for an existing key, create() reports that rather than the state's error
                existing = store.find_actor(self.name, key)
                if existing is None:
                    raise
                return self._handle(existing), False
            record, created = store.create_actor(self.name, key, input, state, due=due, flow=flow(state))
        handle = self._handle(record)
        if created:
            if definition.on_create is not None:
                actions.run_create_hook(runtime, definition, record.actor_id, key, input, make_due=workflow)
            if workflow:
                runtime.wake(record.actor_id)
        return handle, created


def flow_of(runtime: Runtime, definition: ActorDefinition, key: list, state: Any) -> ports.Flow | None:
    """The ``ports.Flow`` recorded on a new actor of ``definition`` (None when the type has no flow control).

    ``Concurrency.key(c)`` is called once, here, on an actor context with the new actor's ``key`` and initial
    ``state`` (no actor id yet); its value's text is the concurrency group (``str(value)``; None -> ``""``).
    A rate limit without a keyed concurrency limits the whole type (group ``""``). DESIGN.md section 12.
    """
    if not definition.has_flow:
        return None
    concurrency, rate = definition.concurrency, definition.rate_limit
    group: str | None = None
    if concurrency is not None or rate is not None:
        group = ""
        if concurrency is not None and concurrency.key is not None:
            c = ActorContext(runtime, definition, "", key, copy.deepcopy(state))
            value = concurrency.key(c)
            group = "" if value is None else str(value)
    return ports.Flow(
        concurrency_key=group,
        concurrency_limit=None if concurrency is None else concurrency.limit,
        rate_count=None if rate is None else rate.count,
        rate_per=None if rate is None else rate.per,
        priority=definition.priority,
        timeout=definition.timeout,
    )


class ActorHandle:
    """One actor: ``.actor_id`` (str), ``.key`` (list), ``.name``; ``call``/``acall`` actions (or
    ``handle.action_name(*args)``), ``send``/``asend`` to its queues, ``destroy``, ``recover``, and
    read-only ``state()``/``workflow_state()``/``record()``."""

    def __init__(self, runtime: Runtime, definition: ActorDefinition, actor_id: str, key: list) -> None:
        self.runtime = runtime
        self.definition = definition
        self.actor_id = actor_id
        self.key = list(key)
        self.name = definition.name or ""

    def __repr__(self) -> str:
        return f"<ActorHandle {self.name} {self.key!r} {self.actor_id}>"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, ActorHandle) and other.actor_id == self.actor_id

    def __hash__(self) -> int:
        return hash(self.actor_id)

    def __getattr__(self, name: str) -> Callable[..., Any]:
        definition = self.__dict__.get("definition")
        if name.startswith("_") or definition is None or name not in definition.actions:
            raise AttributeError(f"actor handle has no action or attribute {name!r}")

        def action(*args: Any) -> Any:
            return self.call(name, *args)

        action.__name__ = name
        return action

    # --- actions ------------------------------------------------------------------------------------

    def call(self, action: str, *args: Any) -> Any:
        """Run action ``action`` with ``args`` and return its result (serialised with step bodies).

        The action runs as ``fn(c, *args)`` (sync, or async run to completion) under the actor's row lock,
        after any running step has committed; its state changes are saved when it returns. Arguments and
        result go through the serializer (the caller gets a copy). Raises ``ActionNotFoundError``,
        ``ActorNotFoundError``, ``WorkflowInFlightError`` (a step held the lock past
        ``settings.action_timeout``), ``SerializationError``/``PayloadTooLargeError``, or what the action
        raised (then no state change is saved).
        """
        fn = self.definition.get_action(action)
        check_not_reentrant(self.actor_id, f"call action {action!r}")
        runtime = self.runtime
        limit = runtime.settings.max_payload_bytes
        args = serde.roundtrip(list(args), where=f"action {action!r} arguments", max_bytes=limit)
        return actions.run_action(
            runtime, self.definition, self.actor_id, self.key, fn, args, label=f"action {action!r}"
        )

    async def acall(self, action: str, *args: Any) -> Any:
        """Async twin of ``call``."""
        return await sync_to_async(self.call, thread_sensitive=True)(action, *args)

    # --- queues -------------------------------------------------------------------------------------

    def send(
        self, queue: str, body: Any = None, wait: bool = False, timeout: float | None = None
    ) -> SendResult | None:
        """Send ``body`` to the actor's queue ``queue``; wakes the workflow if it waits on that queue.

        With ``wait=False`` returns None. With ``wait=True`` the message is completable and this blocks
        until the workflow calls ``message.complete(response)`` -> ``SendResult("completed", response)``, or
        ``timeout`` seconds (float/timedelta; None means ``settings.action_timeout``) pass, or the workflow
        ends or the actor is destroyed without completing it -> ``SendResult("timed_out", None, detail)``.
        It polls the store: first after ``settings.poll_interval`` s, then backing off to every
        ``MAX_SEND_POLL_SECONDS`` s, with a last check at the deadline. Raises ``QueueNotFoundError``,
        ``ActorNotFoundError``, ``SerializationError``/``PayloadTooLargeError`` (spec: "Queues").
        """
        if wait:
            check_not_reentrant(self.actor_id, "send to a queue and wait for the response")
        message = send_message(self.runtime, self.definition, self.actor_id, queue, body, completable=wait)
        if not wait:
            return None
        limit = to_seconds(timeout)
        deadline = time.monotonic() + (limit if limit is not None else self.runtime.settings.action_timeout)
        backoff = _Backoff(self.runtime.settings.poll_interval, deadline)
        next_check = time.monotonic() + _ENDED_CHECK_SECONDS
        while True:
            try:
                current = self.runtime.store.get_message(message.id)
            except LookupError:  # destroying the actor deleted the message
                return SendResult("timed_out", None, _DESTROYED)
            if current.status == ports.MESSAGE_COMPLETED:
                return SendResult("completed", current.response)
            remaining = deadline - time.monotonic()
            if remaining <= 0 or time.monotonic() >= next_check:
                next_check = time.monotonic() + _ENDED_CHECK_SECONDS
                result = _gave_up(self.runtime, current, self.actor_id, remaining <= 0)
                if result is not None:
                    return result
            self._pause(backoff.next_pause())

    def _pause(self, seconds: float) -> None:
        """The pause between two checks of a waiting send. The hook of a store that can wake the sender
        when the message is completed (PostgreSQL LISTEN/NOTIFY, like ``wait_for_messages``): it would
        block here up to ``seconds`` and return early on the notification."""
        time.sleep(seconds)

    async def asend(
        self, queue: str, body: Any = None, wait: bool = False, timeout: float | None = None
    ) -> SendResult | None:
        """Async twin of ``send`` (the same backoff, pausing with ``asyncio.sleep``: the loop is not blocked)."""
        if wait:
            check_not_reentrant(self.actor_id, "send to a queue and wait for the response")
        message = await sync_to_async(send_message, thread_sensitive=True)(
            self.runtime, self.definition, self.actor_id, queue, body, wait
        )
        if not wait:
            return None
        limit = to_seconds(timeout)
        deadline = time.monotonic() + (limit if limit is not None else self.runtime.settings.action_timeout)
        backoff = _Backoff(self.runtime.settings.poll_interval, deadline)
        get = sync_to_async(self.runtime.store.get_message, thread_sensitive=True)
        gave_up = sync_to_async(_gave_up, thread_sensitive=True)
        next_check = time.monotonic() + _ENDED_CHECK_SECONDS
        while True:
            try:
                current = await get(message.id)
            except LookupError:  # destroying the actor deleted the message
                return SendResult("timed_out", None, _DESTROYED)
            if current.status == ports.MESSAGE_COMPLETED:
                return SendResult("completed", current.response)
            remaining = deadline - time.monotonic()
            if remaining <= 0 or time.monotonic() >= next_check:
                next_check = time.monotonic() + _ENDED_CHECK_SECONDS
                result = await gave_up(self.runtime, current, self.actor_id, remaining <= 0)
                if result is not None:
                    return result
            await asyncio.sleep(backoff.next_pause())

    # --- lifecycle ----------------------------------------------------------------------------------

    def destroy(self) -> None:
        """Run ``on_destroy(c)`` (after any running step) and remove the actor, its history and messages.

        A running executor's next write is rejected and it stops. ``ActorNotFoundError`` if already gone.
        """
        check_not_reentrant(self.actor_id, "destroy the actor through the client (use step.destroy())")
        actions.destroy(self.runtime, self.definition, self.actor_id, self.key)

    def recover(self) -> bool:
        """Restart a failed workflow (ENGINE-SEMANTICS.md section 3, "Recover").

        Failed and exhausted steps go back to pending with 0 attempts, the workflow error is cleared, the
        workflow becomes sleeping and is woken. Returns False (nothing done) when the workflow is not
        failed; raises ``WorkflowInFlightError`` when an executor holds the actor, and, changing nothing,
        ``HistoryDivergedError`` when the history with the failed steps reset does not replay on the current
        code and ``WorkflowRolledBackError`` when the run was rolled back (replay it instead); see
        ``repairs.recover``.
        """
        if self.runtime.store.get_actor(self.actor_id).workflow_state != ports.FAILED:
            return False
        try:
            repairs.recover(self.runtime, self.actor_id)
        except errors.WorkflowNotFailedError:  # finished or restarted meanwhile
            return False
        return True

    def cancel(self) -> bool:
        """Cancel the workflow: state ``cancelled``, wake-up cleared, never run again; no rollback runs.

        A run in progress is fenced out (its next write is rejected). Returns False when the workflow had
        already finished. The actor itself, its state and actions stay (``destroy()`` removes it).
        """
        return cancel_workflow(self.runtime, self.actor_id)

    def pause(self, reason: str | None = None) -> bool:
        """Pause the actor (DESIGN.md section 12): it is not run until ``resume()``; ``workflow_state()``
        reads ``"paused"``. Sends are accepted and kept; a step running now finishes and no new step starts.
        ``reason`` (str or None) is kept with the pause. True when this paused it, False when it was paused
        already or its workflow has finished. ``ActorNotFoundError``."""
        return repairs.pause(self.runtime, self.actor_id, reason)

    def resume(self) -> bool:
        """Resume a paused actor: it runs again, and what came due while it was paused (a send, a sleep's
        end, the workflow's timeout) takes effect once. True when it was paused, False (a no-op) otherwise."""
        return repairs.resume(self.runtime, self.actor_id)

    adestroy = _twin(destroy)
    arecover = _twin(recover)
    acancel = _twin(cancel)
    apause = _twin(pause)
    aresume = _twin(resume)

    # --- reads --------------------------------------------------------------------------------------

    def record(self) -> ports.ActorRecord:
        """The actor's stored record (a copy); ``ActorNotFoundError`` if destroyed."""
        return self.runtime.store.get_actor(self.actor_id)

    def state(self) -> Any:
        """The actor's current stored state (a copy), without running an action."""
        return self.record().state

    def workflow_state(self) -> str:
        """The workflow status: pending, running, sleeping, completed, rolling_back, failed, cancelled or
        paused (an operator paused the actor: ``pause()``)."""
        return self.record().workflow_state

    arecord = _twin(record)
    astate = _twin(state)
    aworkflow_state = _twin(workflow_state)
