"""The lease heartbeat: a thread that renews a run's lease while its workflow runs."""

from __future__ import annotations

import asyncio
import logging
import threading
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ..model.roles import SessionRole

logger = logging.getLogger("rivet_workflows")


class Heartbeat(threading.Thread):
    """Renews a run's lease every lease_seconds/3 from its own thread, so a workflow that blocks its event
    loop (an async step body calling ``time.sleep``) still keeps its lease. A failed renew means the lease
    is lost: the run is marked evicted, the step bodies it guards are cancelled (a sync body finds
    ``step.cancelled`` set at once, from this thread) and its workflow task is cancelled (an async body's
    task with it), so a body does not go on beside the new holder's attempt (manual: Failures and what
    happens). A store error is logged and retried at the next beat (the database may come back while the step
    runs)."""

    def __init__(self, session: SessionRole, loop: asyncio.AbstractEventLoop, main: asyncio.Future) -> None:
        super().__init__(name=f"rivet-heartbeat-{session.actor_id}", daemon=True)
        self.session = session
        self.loop = loop
        self.main = main
        self._stopped = threading.Event()
        self._used_store = False

    def stop(self) -> None:
        """Stop beating and wait for a renew in flight (so none lands after the run released the lease)."""
        self._stopped.set()
        if self.is_alive():
            self.join()

    def run(self) -> None:
        session = self.session
        store = session.store
        lease = session.settings.lease_seconds
        try:
            while not self._stopped.wait(max(lease / 3.0, 0.01)):
                self._used_store = True
                try:
                    ok = store.renew(session.actor_id, session.token, lease)
                except Exception:  # the database is away: keep trying while the step runs
                    logger.exception("lease renewal of actor %s failed; retrying", session.actor_id)
                    continue
                if not ok and not self._stopped.is_set():
                    session.evict()
                    session.bodies.cancel_all()
                    try:
                        self.loop.call_soon_threadsafe(self.main.cancel)
                    except RuntimeError:  # the loop already closed: the run is over anyway
                        pass
                    return
        finally:
            if self._used_store:
                store.close_thread_connection()
