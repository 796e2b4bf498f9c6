"""A waiting send's outcome (``SendResult``), when it gives up, and how many may wait at once (spec
"Queues"; docs/howto/calling.md).

``engine.client`` re-exports ``SendResult``; ``WaitingSend`` is the wait of its waiting sends, ``gave_up``
their ended check, ``waiting_send_slot`` and ``database_turn`` their bounds."""

from __future__ import annotations

import contextvars
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from ..model import errors, ports, serde
from ..model.settings import to_seconds
from ..model.watches import SendWatch

if TYPE_CHECKING:
    from ..model.roles import RuntimeRole


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
    runtime: RuntimeRole, message: ports.MessageRecord, actor_id: str, timed_out: bool
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


#: how often (seconds) a waiting send on a store that cannot notify senders also checks whether the
#: workflow ended without answering
_ENDED_CHECK_SECONDS = 0.25
#: the longest pause (seconds) between two looks of a waiting send at its message on such a store
MAX_SEND_POLL_SECONDS = 0.5


class _Backoff:
    """The pauses of a waiting send on a store whose ``SendWatch`` cannot notify it (docs/howto/calling.md):
    the first is ``first`` seconds (``poll_interval``), each next one twice as long up to
    ``MAX_SEND_POLL_SECONDS`` (or ``first`` when that is longer), and none runs past ``deadline`` (a
    ``time.monotonic()`` value), so the last look happens at the deadline itself.

    A reply that comes at once is seen within a few ``poll_interval``s; a send that waits long costs about
    two store reads per ``MAX_SEND_POLL_SECONDS``. A notifying watch (PostgreSQL, memory) needs none of
    this: the sender sleeps until it is told, then looks.
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


#: how many waiting sends of this process use the database at the same moment (to send, and to look at
#: the message when told or at the deadline); each gives its connection back before it leaves, so a burst
#: of waiting sends that all wake at once (a shared deadline) opens at most this many connections
DATABASE_TURNS = 8
_turns = threading.BoundedSemaphore(DATABASE_TURNS)


@contextmanager
def database_turn(store: ports.Store) -> Iterator[None]:
    """One of the ``DATABASE_TURNS`` of the process's waiting sends for the block (blocking until one is
    free), giving the calling thread's connection back at its end (``Store.release_connection``)."""
    with _turns:
        try:
            yield
        finally:
            store.release_connection()


class WaitingSend:
    """The wait of one ``send(wait=True)`` on ``watch`` (docs/howto/calling.md), for the sync and the async
    client alike: ``begin`` sends, then ``pause`` and ``look`` alternate until one returns the
    ``SendResult``. ``begin`` and ``look`` are sync store work done in a ``database_turn``; a pause holds no
    connection.

    The ended check (``gave_up``) runs in ``begin``, then on every look after a notifying watch was woken
    and at the deadline (on a polling watch every ``_ENDED_CHECK_SECONDS``, the looks on a backoff)."""

    def __init__(self, runtime: RuntimeRole, actor_id: str, watch: SendWatch, timeout: Any) -> None:
        self.runtime = runtime
        self.actor_id = actor_id
        self.watch = watch
        limit = to_seconds(timeout)
        self.deadline = time.monotonic() + (limit if limit is not None else runtime.settings.action_timeout)
        self._backoff = _Backoff(runtime.settings.poll_interval, self.deadline)
        self._next_check = 0.0
        self._message: ports.MessageRecord | None = None

    def begin(self, send: Callable[[], ports.MessageRecord]) -> SendResult | None:
        """Store the message (``send()``, with the watch already taken) and check the workflow did not end
        already (a failed workflow accepts the message but ends the wait); the result when it did."""
        with database_turn(self.runtime.store):
            self._message = send()
            self.watch.expect(self._message.id)
            return self._ended(self._message, timed_out=False)

    def pause(self) -> float:
        """Seconds to wait on the watch before the next look: until the deadline when it notifies."""
        if self.watch.notifies:
            return max(self.deadline - time.monotonic(), 0.0)
        return self._backoff.next_pause()

    def look(self, woke: bool) -> SendResult | None:
        """Read the message after a pause (``woke``: the watch was notified); the result when the wait is over."""
        assert self._message is not None, "begin() first"
        timed_out = time.monotonic() >= self.deadline
        with database_turn(self.runtime.store):
            try:
                current = self.runtime.store.get_message(self._message.id)
            except LookupError:  # destroying the actor deleted the message
                return SendResult("timed_out", None, DESTROYED)
            if current.status == ports.MESSAGE_COMPLETED:
                return SendResult("completed", current.response)
            due = woke if self.watch.notifies else time.monotonic() >= self._next_check
            if timed_out or due:
                return self._ended(current, timed_out)
            return None

    def _ended(self, message: ports.MessageRecord, timed_out: bool) -> SendResult | None:
        self._next_check = time.monotonic() + _ENDED_CHECK_SECONDS
        return gave_up(self.runtime, message, self.actor_id, timed_out)


def sent_with_step(handle: Any, queue: str, body: Any, wait: bool, dedup_id: str | None) -> bool:
    """Write a send of ``handle`` (an ``ActorHandle``) with the step whose body uses it, when it goes to an
    actor on another shard (DESIGN.md section 21); True when it did (then nothing is stored now).

    It does when the handle came from ``step.client()`` (``handle.step``), the send does not wait and has
    no ``dedup_id`` (a waiting send needs the message stored now; a ``dedup_id`` makes the direct send
    idempotent already) and the target's shard is not the step's actor's (``Store.same_shard``). The
    message then rides on the step's commit like ``step.queue.send`` (``StepContext.send_with_step``): the
    store keeps it as a relay row on the sender's shard, delivered after the commit, exactly once and in
    order; a target that is completed or cancelled is not known here (the relay records that refusal).
    ``QueueNotFoundError``, ``NoWorkflowError``, ``SerializationError``/``PayloadTooLargeError`` as a send.
    False (nothing done) for every other send, which is stored at once as from outside a run."""
    step = handle.step
    if step is None or wait or dedup_id is not None:
        return False
    if handle.runtime.store.same_shard(step.actor_id, handle.actor_id):
        return False
    step.send_with_step(handle.definition, handle.actor_id, queue, body)
    return True


def created_with_step(types: Any, key: list, input: Any) -> str | None:
    """Write a ``get_or_create(key, input)`` of ``types`` (an ``ActorTypeClient``) with the step whose body
    uses it, when the actor lives on another shard (DESIGN.md section 21); its id when it did (nothing is
    stored now), else None (the caller creates it directly).

    It does when the client came from ``step.client()`` (``types.step``), the store computes the actor's id
    from its key (``Store.actor_id_for_key``: a sharded store) and that id's shard is not the step's actor's
    (``Store.same_shard``). ``key`` (normalized) and ``input`` are checked here as a direct create checks
    them (``SerializationError``/``PayloadTooLargeError``); the create itself (``create_state``, flow,
    ``on_create``, the parent link, the due wake) runs when the relay delivers it, idempotently (an actor
    that exists already is kept as it is)."""
    step = types.step
    if step is None:
        return None
    runtime = types.runtime
    target = runtime.store.actor_id_for_key(types.name, key)
    if target is None or runtime.store.same_shard(step.actor_id, target):
        return None
    settings = runtime.settings
    serde.to_json(key, where="actor key (MAX_KEY_BYTES)", max_bytes=settings.max_key_bytes)
    input = serde.roundtrip(input, where="actor input", max_bytes=settings.max_payload_bytes)
    step.create_with_step(ports.RelayCreate(target, types.name, list(key), input, types.parent_id))
    return target


def remote_id(types: Any, key: list) -> str | None:
    """The id of the actor ``key`` of ``types`` (an ``ActorTypeClient``) for ``get`` from a step body when
    it lives on another shard and its id is computed from its key (``Store.actor_id_for_key``): the handle
    is then made without reading that shard (a send through it is relayed; one to an actor that does not
    exist fails at delivery, marked failed and logged). None: look the key up as usual."""
    step = types.step
    if step is None:
        return None
    store = types.runtime.store
    target = store.actor_id_for_key(types.name, key)
    if target is None or store.same_shard(step.actor_id, target):
        return None
    return target
