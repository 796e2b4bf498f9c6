"""The queue part of ``MemoryStore``: send with the wake rule and the dispatcher hint, receipts, completions,
and the warm wait (a real blocking wait on the store's condition variable).

A mixin sharing the host's state: ``_lock`` (an RLock), ``_changed`` (a Condition on it, notified on every
change), ``_actors``, ``_messages``, ``_queue``, ``_row()`` and ``now()``.
"""

from __future__ import annotations

import asyncio
import dataclasses
import time
import uuid
from collections.abc import Callable
from datetime import datetime
from typing import Any

from ..engine.model import errors, ports, serde, wake, watches
from .memory_rows import lease_live

matches = wake.matches  # a wait on ``waiting_for`` takes a message on queue ``name`` (the port's rule)


def _message_out(message: ports.MessageRecord) -> ports.MessageRecord:
    body = serde.decode_keeping(message.body)
    out = dataclasses.replace(message, body=body.value, response=serde.from_json(message.response))
    out.encoded_body = body
    return out


class MemoryQueueMixin:
    """In-memory queue members of ``ports.Store`` (the contract is in ``ports.Store``)."""

    _lock: Any
    _changed: Any
    _actors: dict
    _messages: dict[str, ports.MessageRecord]
    _queue: dict[str, list[str]]
    _row: Callable[[str], Any]
    now: Callable[[], datetime]

    def _own_message(self, actor_id: str, message_id: str) -> ports.MessageRecord:
        message = self._messages.get(message_id)
        if message is None or message.actor_id != actor_id:
            raise LookupError(f"actor {actor_id} has no queue message {message_id!r}")
        return message

    def _deliver(
        self,
        actor_id: str,
        name: str,
        body: Any,
        completable: bool,
        now: datetime,
        trace_context: dict | None = None,
        *,
        refuse_closed: bool = False,
        dedup_id: str | None = None,
    ) -> tuple[ports.MessageRecord, bool]:
        """Store an encoded message and apply the wake rule (caller holds ``_lock``); ``(message, woke)``.
        With ``refuse_closed`` (a ``send``, not a commit's outbox) ``WorkflowFinishedError`` for a
        completed or cancelled workflow, before anything is stored. With a ``dedup_id`` a kept message of
        the actor has already: that message, nothing stored, woke False."""
        row = self._row(actor_id)
        if dedup_id is not None:
            for message_id in self._queue[actor_id]:
                if self._messages[message_id].dedup_id == dedup_id:
                    return self._messages[message_id], False
        if refuse_closed and row.workflow_state in ports.CLOSED_STATES:
            raise errors.workflow_finished(actor_id, row.workflow_state, name)
        message = ports.MessageRecord(
            id=uuid.uuid4().hex,
            actor_id=actor_id,
            name=name,
            body=body,
            created_at=now,
            completable=completable,
            trace_context=dict(trace_context) if trace_context else None,
            dedup_id=dedup_id,
        )
        self._messages[message.id] = message
        self._queue[actor_id].append(message.id)
        woke = wake.delivery_wakes(row.workflow_state, row.waiting_for, row.lease_owner is not None, name)
        if woke and wake.delivered_wake_at(row.wake_at, now) != row.wake_at:
            row.wake_at = now
            row.updated_at = now
        return message, woke

    def _write_messages(
        self,
        receipts: list[ports.MessageRecord],
        completions: list[tuple[ports.MessageRecord, Any]],
        now: datetime,
    ) -> None:
        """A commit's receipts (pending -> received) and completions (validated and encoded already)."""
        for message in receipts:
            if message.status == ports.MESSAGE_PENDING:
                message.status = ports.MESSAGE_RECEIVED
        for message, response in completions:
            message.status = ports.MESSAGE_COMPLETED
            message.response = response
            message.completed_at = now

    def send(
        self,
        actor_id: str,
        name: str,
        body: Any,
        completable: bool = False,
        *,
        trace_context: dict | None = None,
        dedup_id: str | None = None,
    ) -> ports.MessageRecord:
        """Store a message for ``actor_id`` on queue ``name`` and apply the wake rule (see ``ports``).

        Raises ``ActorNotFoundError``, ``SerializationError`` and ``WorkflowFinishedError`` (completed or
        cancelled workflow: nothing stored). Returns the stored message (a copy); with a ``dedup_id`` a
        kept message has already, that message (nothing stored).
        """
        return self.send_and_check(
            actor_id, name, body, completable, trace_context=trace_context, dedup_id=dedup_id
        )[0]

    def send_and_check(
        self,
        actor_id: str,
        name: str,
        body: Any,
        completable: bool = False,
        *,
        trace_context: dict | None = None,
        dedup_id: str | None = None,
    ) -> tuple[ports.MessageRecord, bool | None]:
        """``send`` plus the dispatcher hint read in the same critical section: True when, after the send,
        the actor is due now and no live lease is held (``delivery.wake_if_due``'s answer), else False
        (always for a deduplicated send). Raises as ``send``."""
        encoded = serde.to_json(body, where=f"queue {name!r} body")
        with self._lock:
            now = self.now()
            stored = len(self._messages)
            message, _ = self._deliver(
                actor_id,
                name,
                encoded,
                completable,
                now,
                trace_context,
                refuse_closed=True,
                dedup_id=dedup_id,
            )
            if len(self._messages) == stored:  # deduplicated: the kept message, nothing woken
                return _message_out(message), False
            row = self._actors[actor_id]
            hint = row.wake_at is not None and row.wake_at <= now and not lease_live(row, now)
            if hint:
                self._wakes.append(actor_id)
            self._changed.notify_all()
            if type(body) is serde.Encoded:  # encoded once by the caller: its value is the record's body
                return dataclasses.replace(message, body=body.value, response=None), hint
            return _message_out(message), hint

    def wait_for_wakes(self, timeout: float) -> list[str]:
        """Block up to ``timeout`` seconds (real time) until a send made a released actor due (the hint of
        ``send_and_check``); the actor ids woken since this thread's previous call (its first call starts
        listening: [] unless one comes within ``timeout``), oldest first, each once."""
        deadline = time.monotonic() + max(timeout, 0.0)
        with self._changed:
            seen = getattr(self._wake_cursor, "seen", None)
            if seen is None:
                seen = self._wake_cursor.seen = len(self._wakes)
            while len(self._wakes) == seen:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return []
                self._changed.wait(remaining)
            self._wake_cursor.seen = len(self._wakes)
            return list(dict.fromkeys(self._wakes[seen:]))

    def pending_messages(
        self, actor_id: str, names: list[str] | None, limit: int
    ) -> list[ports.MessageRecord]:
        """Up to ``limit`` pending messages of the actor, oldest first, on ``names`` (None or ``"*"``: any)."""
        with self._lock:
            self._row(actor_id)
            return self._pending(actor_id, names, limit)

    def _pending(self, actor_id: str, names: list[str] | None, limit: int) -> list[ports.MessageRecord]:
        out = []
        for message_id in self._queue.get(actor_id, []):
            if len(out) >= limit:
                break
            message = self._messages[message_id]
            if message.status != ports.MESSAGE_PENDING:
                continue
            if names is not None and not matches(list(names), message.name):
                continue
            out.append(_message_out(message))
        return out

    def wait_for_messages(self, actor_id: str, names: list[str], timeout: float) -> bool:
        """Block up to ``timeout`` seconds (real time) until a pending message on ``names`` (``"*"``: any)
        exists for ``actor_id``: True then, False when the window passed or the actor is gone. A real wait
        on the store's condition variable, woken by every send, so a warm queue wait works in memory."""
        deadline = time.monotonic() + max(timeout, 0.0)
        with self._changed:
            while True:
                if actor_id not in self._actors:
                    return False
                if self._pending(actor_id, list(names), 1):
                    return True
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return False
                self._changed.wait(remaining)

    def get_message(self, message_id: str) -> ports.MessageRecord:
        """The message ``message_id`` (a copy); ``LookupError`` if unknown."""
        with self._lock:
            message = self._messages.get(message_id)
            if message is None:
                raise LookupError(f"no queue message {message_id!r}")
            return _message_out(message)

    def watch_sends(self, actor_id: str) -> watches.SendWatch:
        """A watch woken on the store's change notification when the expected message is completed or
        gone, or the actor finished or is gone (``Store.watch_sends``)."""
        return _MemorySendWatch(self, actor_id)

    def complete_message(self, message_id: str, response: Any) -> None:
        """Mark the message completed with ``response``; ``MessageAlreadyCompletedError`` the second time."""
        encoded = serde.to_json(response, where="message response")
        with self._lock:
            message = self._messages.get(message_id)
            if message is None:
                raise LookupError(f"no queue message {message_id!r}")
            if message.status == ports.MESSAGE_COMPLETED:
                raise errors.MessageAlreadyCompletedError(message_id=message_id)
            message.status = ports.MESSAGE_COMPLETED
            message.response = encoded
            message.completed_at = self.now()
            self._changed.notify_all()


class _MemorySendWatch(watches.SendWatch):
    """``MemoryStore.watch_sends``: ``wait`` blocks on the store's condition until something the sender
    must look at happened; ``wait_async`` checks the same every few milliseconds (memory: no thread held)."""

    notifies = True

    def __init__(self, store: Any, actor_id: str) -> None:
        super().__init__()
        self._store = store
        self._actor_id = actor_id

    def _happened(self) -> bool:
        row = self._store._actors.get(self._actor_id)
        if row is None or row.workflow_state in ports.FINISHED_STATES:
            return True
        if self.message_id is None:
            return False
        message = self._store._messages.get(self.message_id)
        return message is None or message.status == ports.MESSAGE_COMPLETED

    def wait(self, timeout: float) -> bool:
        deadline = time.monotonic() + max(timeout, 0.0)
        with self._store._changed:
            while not self._happened():
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return False
                self._store._changed.wait(remaining)
            return True

    async def wait_async(self, timeout: float) -> bool:
        deadline = time.monotonic() + max(timeout, 0.0)
        while True:
            with self._store._lock:
                if self._happened():
                    return True
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return False
            await asyncio.sleep(min(remaining, 0.005))
