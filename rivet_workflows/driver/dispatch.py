"""Dispatchers of the Django runtime: Celery tasks for "actor X has work" hints, or a local recorder.

Importing this module imports neither Django nor Celery; ``CeleryDispatcher`` imports them when it wakes.
``LocalDispatcher`` is the engine's (``engine.runtime.local_dispatch``), named here for the ``DISPATCHER``
setting.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from ..engine.runtime.local_dispatch import LocalDispatcher

__all__ = ["CeleryDispatcher", "LocalDispatcher"]


class CeleryDispatcher:
    """``ports.Dispatcher`` sending ``rivet_workflows.run_actor(actor_id)`` once the current transaction commits.

    Hints are only hints: a lost one is caught by the periodic sweep, a duplicate finds the lease taken
    or nothing due (DESIGN.md section 5).
    """

    def wake(self, actor_id: str) -> None:
        """Queue a run of ``actor_id`` after the surrounding transaction commits (at once outside one).

        Sent with ``HINT_PRIORITY``: on brokers with priorities (Redis), work that is already due (the
        sweep's claims, timers queued with a countdown) is taken before a backlog of new hints.
        """
        from .tasks import run_actor

        _after_commit(lambda: run_actor.apply_async((actor_id,), priority=HINT_PRIORITY))

    def relay(self) -> None:
        """Queue the ``rivet_workflows.relay`` task after the surrounding transaction commits (at once outside
        one): a commit wrote relay rows (``Runtime.relay_soon``, the runtime's ``on_relay``; DESIGN.md
        section 21). A lost one is caught by the sweep, which relays every pass; a duplicate finds nothing."""
        from .tasks import relay

        _after_commit(lambda: relay.apply_async(priority=HINT_PRIORITY))


def _after_commit(send: Callable[[], Any]) -> None:
    """Call ``send`` once the caller's transaction on the default database commits, at once outside one.

    A run calls its dispatcher from its event loop after its own commit (the store committed on its own
    thread): there is no caller's transaction to wait for, and Django refuses to touch a connection from
    async code (``SynchronousOnlyOperation``), so ``send`` runs at once there.
    """
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        from django.db import transaction

        transaction.on_commit(send)
        return
    send()


#: Celery priority of wake hints. On Redis, lower numbers are served first and a message without a
#: priority counts as 0: the sweep's hand-overs and countdown timers (no priority) go before hints.
HINT_PRIORITY = 3
