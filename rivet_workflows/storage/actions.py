"""Actions of ``DjangoStore`` (``run_action`` of ``ports.Store``): ``fn(state)`` serialised with the commits on
the actor, waiting out a live step lock.

A mixin: the host class provides ``now()``, ``_atomic()``, ``_actors()``, ``_serialised()``,
``_actor_locks()`` and ``poll_interval``.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import datetime
from typing import Any

from django.db.models import Case, DateTimeField, F, Value, When

from ..engine.model import errors, ports, serde
from . import mapper
from .connection import user_code


class ActionStorage:
    """``run_action`` of ``ports.Store`` on the ORM (the contract is in ``ports.Store``)."""

    # provided by the host class (DjangoStore)
    poll_interval: float
    now: Callable[[], datetime]
    _atomic: Callable[[], Any]
    _actors: Callable[[], Any]
    _serialised: Callable[..., Any]
    _actor_locks: Callable[[], Any]

    def run_action(
        self, actor_id: str, fn: Callable[[Any], Any], timeout: float, *, make_due: bool = False
    ) -> tuple[Any, Any]:
        """Run ``fn(state)`` once no live step lock is held, serialised with commits on the actor; save the state.

        ``make_due=True`` also sets ``wake_at`` to the database clock in the same write (unless it is
        earlier already, the workflow is finished or ``fn`` destroyed the actor).

        With row locks: under the actor's row lock. Without (SQLite): under the actor's file lock with
        ``fn`` running outside any transaction, so a slow action does not stall other actors. A step lock
        is live while ``step_lock_until`` and the lease are both in the future; the wait polls every
        ``poll_interval`` seconds holding no lock. WorkflowInFlightError after ``timeout`` seconds,
        ActorNotFoundError. An exception from ``fn`` propagates and the state is not saved; an action that
        changed neither the state nor the wake-up writes nothing (``updated_at`` stays). Returns
        ``(result, state)``.
        """
        deadline = time.monotonic() + timeout
        while True:
            with self._serialised(actor_id, max(deadline - time.monotonic(), 0.0)):
                if self._actor_locks() is None:
                    with self._atomic():
                        done, value = self._try_action(
                            actor_id, fn, select_for_update=True, make_due=make_due
                        )
                else:
                    done, value = self._try_action(actor_id, fn, select_for_update=False, make_due=make_due)
                if done:
                    return value
            if time.monotonic() >= deadline:
                raise errors.WorkflowInFlightError(
                    f"actor {actor_id} is running a step; the action waited {timeout}s", actor_id=actor_id
                )
            time.sleep(self.poll_interval)

    def _try_action(
        self, actor_id: str, fn: Callable[[Any], Any], *, select_for_update: bool, make_due: bool = False
    ) -> tuple[bool, tuple[Any, Any] | None]:
        """One attempt of run_action: (False, None) while a live step lock is held."""
        rows = self._actors().select_for_update() if select_for_update else self._actors()
        columns = ("state", "step_lock_until", "lease_expires_at", "destroyed", "wake_at", "workflow_state")
        row = rows.filter(pk=actor_id).values(*columns).first()
        if row is None or row["destroyed"]:
            raise errors.ActorNotFoundError(f"no actor with id {actor_id!r}", actor_id=actor_id)
        now = self.now()
        if (
            row["step_lock_until"] is not None
            and row["step_lock_until"] > now
            and row["lease_expires_at"] is not None
            and row["lease_expires_at"] > now
        ):
            return False, None
        state = serde.from_json(row["state"])
        result = user_code(fn)(state)
        stored = serde.to_json(state, where="state")
        now = self.now()
        wakes = (
            make_due
            and row["workflow_state"] not in ports.FINISHED_STATES
            and (row["wake_at"] is None or row["wake_at"] > now)
        )
        if (
            mapper.same_json(stored, row["state"]) and not wakes
        ):  # an action that changed nothing writes nothing
            return True, (result, serde.from_json(stored))
        updates: dict[str, Any] = {"state": stored, "updated_at": now}
        if make_due:  # in the same UPDATE: due now unless finished or due earlier already
            updates["wake_at"] = Case(
                When(workflow_state__in=list(ports.FINISHED_STATES), then=F("wake_at")),
                When(wake_at__lte=now, then=F("wake_at")),
                default=Value(now, output_field=DateTimeField()),
            )
        self._actors().filter(pk=actor_id).update(**updates)  # a destroyed actor matches nothing
        return True, (result, serde.from_json(stored))
