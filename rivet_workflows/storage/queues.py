"""Queue storage of ``DjangoStore`` (send, the wake rule of a delivery, receipts, completions) on QueueMessage.

A mixin: the host class provides ``using``, ``now()`` (the database clock), ``_atomic()`` and
``_actors()``. A delivery locks the target actor's row, stores the message and, unless the workflow is
finished, makes the actor due when it waits on that queue name (or ``"*"``) or a run holds its lease
(ports docstring: a send during a run is never missed). ``_notify_waiter`` is the hook a dialect with
notifications uses to wake a run listening in a warm wait (``PostgresStore``).
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Any

from django.db import IntegrityError

from .. import models
from ..engine.model import errors, ports, serde, wake
from . import mapper


class QueueStorage:
    """The queue members of ``ports.Store`` on the ORM (the contract is in ``ports.Store``)."""

    # provided by the host class (DjangoStore): its alias, the database clock, a transaction, the actors
    using: str
    now: Callable[[], datetime]
    _atomic: Callable[[], Any]
    _actors: Callable[[], Any]

    def _messages(self) -> Any:
        return models.QueueMessage.objects.using(self.using)

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
        """Insert a message under the target's row lock and apply the wake rule; returns (record, woke).
        With ``refuse_closed`` (a ``send``, not a commit's outbox) ``WorkflowFinishedError`` when the
        workflow is completed or cancelled (``ports.CLOSED_STATES``), before anything is stored. With a
        ``dedup_id`` a kept message of the actor has already: that message, nothing written, woke False."""
        row = (
            self._actors()
            .select_for_update()
            .filter(pk=actor_id)
            .values("workflow_state", "waiting_for", "lease_owner", "destroyed", "wake_at")
            .first()
        )
        if row is None or row["destroyed"]:
            raise errors.ActorNotFoundError(f"no actor with id {actor_id!r}", actor_id=actor_id)
        if dedup_id is not None:
            first = self._messages().filter(actor_id=actor_id, dedup_id=dedup_id).first()
            if first is not None:
                return mapper.message_from_model(first), False
        if refuse_closed and row["workflow_state"] in ports.CLOSED_STATES:
            raise errors.workflow_finished(actor_id, row["workflow_state"], name)
        fields = {
            "actor_id": actor_id,
            "name": name,
            "body": serde.to_json(body, where=f"body of queue message {name!r}"),
            "completable": completable,
            "status": ports.MESSAGE_PENDING,
            "created_at": now,
            "trace_context": trace_context,
            "dedup_id": dedup_id,
        }
        if dedup_id is None:
            message = self._messages().create(**fields)
        else:
            try:
                # the unique (actor, dedup_id) constraint is the rule; the look above only saves the
                # insert (a database without row locks lets a concurrent sender in between)
                with self._atomic():
                    message = self._messages().create(**fields)
            except IntegrityError:
                first = self._messages().get(actor_id=actor_id, dedup_id=dedup_id)
                return mapper.message_from_model(first), False
        leased = row["lease_owner"] is not None
        woke = wake.delivery_wakes(row["workflow_state"], row["waiting_for"], leased, name)
        if woke and wake.delivered_wake_at(row["wake_at"], now) != row["wake_at"]:
            self._actors().filter(pk=actor_id).update(wake_at=now, updated_at=now)
        if woke and leased:
            self._notify_waiter(actor_id)  # a run holds the lease: it may be in a warm queue wait
        return mapper.message_from_model(message, body=body), woke

    def _notify_waiter(self, actor_id: str) -> None:
        """Tell a run of ``actor_id`` listening in a warm wait that a message arrived (delivered when the
        transaction commits). Nothing here: a store without notifications never waits warm."""

    def _notify_completed(self, actor_id: str, message_ids: list[int]) -> None:
        """Tell senders waiting on ``message_ids`` of ``actor_id`` (``Store.watch_sends``) that they are
        completed (delivered when the transaction commits). Nothing here: without notifications a sender
        polls."""

    def _notify_ended(self, actor_id: str) -> None:
        """Tell senders waiting on ``actor_id`` that its workflow finished or it is being destroyed
        (delivered when the transaction commits). Nothing here: without notifications a sender polls."""

    def _write_messages(self, actor_id: str, commit: ports.Commit, now: datetime) -> None:
        """A commit's receipts (pending -> received) and completions (-> completed with the response).

        ``LookupError`` for a message that is not this actor's, ``MessageAlreadyCompletedError`` for one
        completed already; both before anything of the completions is written.
        """
        messages = self._messages().filter(actor_id=actor_id)
        if commit.complete_messages:
            ids = [mapper.row_id(m) for m, _ in commit.complete_messages]
            statuses = dict(messages.filter(pk__in=ids).values_list("pk", "status"))
            for (message_id, _), pk in zip(commit.complete_messages, ids, strict=True):
                if pk not in statuses:
                    raise LookupError(f"actor {actor_id} has no queue message {message_id!r}")
                if statuses[pk] == ports.MESSAGE_COMPLETED:
                    raise errors.MessageAlreadyCompletedError(message_id=str(message_id))
        if commit.receive_messages:
            messages.filter(
                pk__in=[mapper.row_id(m) for m in commit.receive_messages], status=ports.MESSAGE_PENDING
            ).update(status=ports.MESSAGE_RECEIVED)
        for message_id, response in commit.complete_messages:
            messages.filter(pk=mapper.row_id(message_id)).update(
                status=ports.MESSAGE_COMPLETED,
                response=serde.to_json(response, where="message response"),
                completed_at=now,
            )
        if commit.complete_messages:
            self._notify_completed(actor_id, [mapper.row_id(m) for m, _ in commit.complete_messages])

    def _has_matching_message(self, actor_id: str, waiting_for: list[str]) -> bool:
        """True when a pending message of the actor is on one of ``waiting_for`` (``"*"``: any)."""
        if not waiting_for:
            return False
        pending = self._messages().filter(actor_id=actor_id, status=ports.MESSAGE_PENDING)
        if "*" not in waiting_for:
            pending = pending.filter(name__in=list(waiting_for))
        return pending.exists()

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
        """Store a message for ``actor_id`` and make the actor due if it waits on ``name`` or is running.

        Raises ActorNotFoundError (missing or destroyed actor), SerializationError (body) and
        WorkflowFinishedError (completed or cancelled workflow: nothing stored). With ``dedup_id`` the
        kept message that has it already, when there is one (``ports.Store.send``).
        """
        with self._atomic():
            message, _ = self._deliver(
                actor_id,
                name,
                body,
                completable,
                self.now(),
                trace_context,
                refuse_closed=True,
                dedup_id=dedup_id,
            )
        return message

    def pending_messages(
        self, actor_id: str, names: list[str] | None, limit: int
    ) -> list[ports.MessageRecord]:
        """Up to ``limit`` not-yet-received messages, oldest first; ``names`` None or containing "*" = any."""
        rows = self._messages().filter(actor_id=actor_id, status=ports.MESSAGE_PENDING)
        if names is not None and "*" not in names:
            rows = rows.filter(name__in=list(names))
        return [mapper.message_from_model(row) for row in rows.order_by("id")[: max(limit, 0)]]

    def get_message(self, message_id: str) -> ports.MessageRecord:
        """One message by id; raises ``LookupError`` if there is none."""
        row = self._messages().filter(pk=mapper.row_id(message_id)).first()
        if row is None:
            raise LookupError(f"no queue message {message_id!r}")
        return mapper.message_from_model(row)

    def complete_message(self, message_id: str, response: Any) -> None:
        """Answer a message with ``response``; MessageAlreadyCompletedError the second time, LookupError if unknown."""
        with self._atomic():
            row = self._messages().select_for_update().filter(pk=mapper.row_id(message_id)).first()
            if row is None:
                raise LookupError(f"no queue message {message_id!r}")
            if row.status == ports.MESSAGE_COMPLETED:
                raise errors.MessageAlreadyCompletedError(message_id=str(message_id))
            row.status = ports.MESSAGE_COMPLETED
            row.response = serde.to_json(response, where="message response")
            row.completed_at = self.now()
            row.save(update_fields=["status", "response", "completed_at"])
            self._notify_completed(row.actor_id, [row.pk])
