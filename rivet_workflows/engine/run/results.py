"""What primitives hand back to workflow code: step, try and race results and received queue messages."""

from __future__ import annotations

from collections.abc import Awaitable, Generator
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

from ..model import errors, ports, serde
from ..model.failures import StepFailure, TryFailure

if TYPE_CHECKING:
    from ..model.roles import SessionRole


@dataclass(frozen=True)
class StepResult:
    """What ``ctx.try_step`` returns: ``ok`` and ``value``, or ``ok=False`` and ``failure``, a ``StepFailure``
    ``{kind, step_name, attempts, error: {name, message, stack?, metadata?}}`` read as attributes
    (``charge.failure.error.message``) or keys (ENGINE-SEMANTICS.md 3, DESIGN.md 13)."""

    ok: bool
    value: Any = None
    failure: StepFailure | None = None


@dataclass(frozen=True)
class TryResult:
    """What ``ctx.try_`` returns: ``ok``/``value`` or ``failure``, a ``TryFailure`` ``{source, name, error,
    step?}`` (attributes or keys)."""

    ok: bool
    value: Any = None
    failure: TryFailure | None = None


@dataclass(frozen=True)
class RaceResult:
    """What ``ctx.race`` returns: the name of the winning branch and its value (ENGINE-SEMANTICS.md 6)."""

    winner: str
    value: Any = None


class _Done:
    """An already-finished awaitable, so ``msg.complete(r)`` works with and without ``await``."""

    __slots__ = ()

    def __await__(self) -> Generator[Any, None, None]:
        return
        yield  # pragma: no cover

    def __repr__(self) -> str:
        return "<done>"


_DONE = _Done()


class QueueMessage:
    """A message received by a workflow queue wait: ``.id .name .body .created_at`` and, when received with
    ``completable=True``, ``.complete(response)`` (answers a sender waiting with ``send(wait=True)``)."""

    __slots__ = ("id", "name", "body", "created_at", "completable", "_entry", "_session", "_done")

    def __init__(self, session: SessionRole, entry: ports.EntryRecord) -> None:
        data = entry.data
        self.id: str = data["id"]
        self.name: str = data["name"]
        self.body: Any = data.get("body")
        self.created_at: datetime | None = data.get("created_at")
        self.completable: bool = bool(data.get("completable"))
        self._entry = entry
        self._session = session
        self._done = False

    @property
    def completed(self) -> bool:
        """True once the message was completed (in this run or recorded in history)."""
        return bool(self._entry.data.get("completed"))

    def complete(self, response: Any = None) -> Awaitable[None]:
        """Record ``response`` for this message (with the next commit); usable with or without ``await``.

        Raises ``RivetWorkflowsError`` if the message was not received with ``completable=True``,
        ``MessageAlreadyCompletedError`` when called twice in one run, ``SerializationError``. On replay a
        message whose entry says completed is not completed again.
        """
        if not self.completable:
            raise errors.RivetWorkflowsError(
                f"message {self.id} was not received with completable=True; it cannot be completed",
                message_id=self.id,
            )
        if self._done:
            raise errors.MessageAlreadyCompletedError(
                f"message {self.id} was already completed", message_id=self.id
            )
        self._done = True
        if self._entry.data.get("completed"):
            return _DONE
        session = self._session
        response = serde.roundtrip(
            response, where=f"response to message {self.id}", max_bytes=session.settings.max_payload_bytes
        )
        self._entry.data = {**self._entry.data, "completed": True}
        self._entry.status = ports.MESSAGE_COMPLETED
        self._entry.completed_at = session.stamp()
        session.writes.record(self._entry)
        session.writes.complete(self.id, response)
        return _DONE

    def __repr__(self) -> str:
        return f"<QueueMessage {self.name!r} id={self.id}>"
