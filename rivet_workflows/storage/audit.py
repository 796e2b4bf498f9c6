"""The operator audit of ``DjangoStore`` (DESIGN.md section 12) on OperatorAction: a row written inside the
commit that makes the change, or on its own, and read back newest first.

A mixin: the host class provides ``using``, ``now()``, ``_atomic()`` and ``_actors()``.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Any

from .. import models
from ..engine.model import errors, ports
from . import mapper


class AuditStorage:
    """``record_operator_action``/``operator_actions`` of ``ports.Store`` on the ORM."""

    # provided by the host class (DjangoStore)
    using: str
    now: Callable[[], datetime]
    _atomic: Callable[[], Any]
    _actors: Callable[[], Any]

    def _write_audit(
        self, actor_id: str, action: ports.OperatorActionRecord, now: datetime
    ) -> ports.OperatorActionRecord:
        row = models.OperatorAction.objects.using(self.using).create(
            actor_id=actor_id,
            action=action.action,
            who=action.who,
            reason=action.reason,
            at=now,
            archived_entries=mapper.audit_archive(action),
        )
        return mapper.operator_action_from_model(row)

    def record_operator_action(self, action: ports.OperatorActionRecord) -> ports.OperatorActionRecord:
        """Write ``action`` on its own (``ports.Store``); ``ActorNotFoundError``, ``SerializationError``."""
        with self._atomic():
            if not self._actors().filter(pk=action.actor_id, destroyed=False).exists():
                raise errors.ActorNotFoundError(
                    f"no actor with id {action.actor_id!r}", actor_id=action.actor_id
                )
            return self._write_audit(action.actor_id, action, self.now())

    def operator_actions(
        self, actor_id: str, *, limit: int | None = None
    ) -> list[ports.OperatorActionRecord]:
        """The actor's audit rows, newest first (served by ``rivet_opaction_actor_idx``)."""
        rows = models.OperatorAction.objects.using(self.using).filter(actor_id=actor_id).order_by("-id")
        if limit is not None:
            rows = rows[:limit]
        return [mapper.operator_action_from_model(row) for row in rows]
