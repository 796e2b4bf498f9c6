"""Dispatchers of the Django runtime: Celery tasks for "actor X has work" hints, or a local recorder.

Importing this module imports neither Django nor Celery; ``CeleryDispatcher`` imports them when it wakes.
``LocalDispatcher`` is the engine's (``engine.runtime.local_dispatch``), named here for the ``DISPATCHER``
setting.
"""

from __future__ import annotations

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
        from django.db import transaction

        from .tasks import run_actor

        transaction.on_commit(lambda: run_actor.apply_async((actor_id,), priority=HINT_PRIORITY))

    def relay(self) -> None:
        """Queue the ``rivet_workflows.relay`` task after the surrounding transaction commits (at once outside
        one): a commit wrote relay rows (``Runtime.relay_soon``, the runtime's ``on_relay``; DESIGN.md
        section 21). A lost one is caught by the sweep, which relays every pass; a duplicate finds nothing.

        Called by a run's session on its event loop, after the store's commit returned: it reads only the
        ``in_atomic_block`` flag of the thread's default connection (Django refuses ``on_commit`` there: it
        would open a connection in an async context, so the task was never queued and every delivery
        waited for a sweep) and queues the task at once unless a transaction is open."""
        from django.db import DEFAULT_DB_ALIAS, connections, transaction

        from .tasks import relay

        def send() -> None:
            relay.apply_async(priority=HINT_PRIORITY)

        if connections[DEFAULT_DB_ALIAS].in_atomic_block:
            transaction.on_commit(send)
        else:
            send()


#: Celery priority of wake hints. On Redis, lower numbers are served first and a message without a
#: priority counts as 0: the sweep's hand-overs and countdown timers (no priority) go before hints.
HINT_PRIORITY = 3
