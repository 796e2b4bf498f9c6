"""The lease heartbeat: one process-wide keeper thread renews the lease of every run in progress."""

from __future__ import annotations

import asyncio
import logging
import os
import threading
import time
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ..model.roles import SessionRole

logger = logging.getLogger("rivet_workflows")

#: seconds the last run's ``stop`` waits at most for the keeper to close its connections
CLOSE_WAIT_SECONDS = 5.0


class Heartbeat:
    """Keeps a run's lease: between ``start()`` and ``stop()`` the keeper thread renews it every
    lease_seconds/3 from its own thread, so a workflow that blocks its event loop (an async step body
    calling ``time.sleep``) still keeps its lease. A failed renew means the lease is lost: the run is marked
    evicted, the step bodies it guards are cancelled (a sync body finds ``step.cancelled`` set at once, from
    the keeper thread) and its workflow task is cancelled (an async body's task with it), so a body does not
    go on beside the new holder's attempt (manual: Failures and what happens). A store error is logged and
    retried at the next beat (the database may come back while the step runs).

    One keeper thread serves every run of the process (``_Keeper``; a thread started and joined per run
    cost about 2% of a short run's CPU): renews of different runs are made one after the other, so a renew
    that hangs (a database that does not answer) delays the others' as it delays its own."""

    def __init__(self, session: SessionRole, loop: asyncio.AbstractEventLoop, main: asyncio.Future) -> None:
        self.session = session
        self.loop = loop
        self.main = main
        self.interval = max(session.settings.lease_seconds / 3.0, 0.01)
        #: monotonic time of the next renew; written by the keeper (and by ``start`` before registering)
        self.due = 0.0
        self._lock = threading.Lock()  # held by a renew of this run in flight; ``stop`` waits for it
        self._stopped = False

    def start(self) -> None:
        """Register the run with the keeper (starting the keeper thread if none runs): its first renew is
        due lease_seconds/3 from now."""
        self.due = time.monotonic() + self.interval
        _keeper.add(self)

    def stop(self) -> None:
        """Stop renewing and wait for a renew in flight (so none lands after the run released the lease).
        Idempotent; called from the run's thread."""
        _keeper.remove(self)
        with self._lock:
            self._stopped = True

    def beat(self) -> bool:
        """Renew the lease once (called by the keeper thread). False when this run is done with: stopped,
        or its lease was lost (the run evicted as the class docstring says)."""
        session = self.session
        with self._lock:
            if self._stopped:
                return False
            try:
                ok = session.store.renew(session.actor_id, session.token, session.settings.lease_seconds)
            except Exception:  # the database is away: keep trying while the step runs
                logger.exception("lease renewal of actor %s failed; retrying", session.actor_id)
                ok = True
            if ok:
                self.due = time.monotonic() + self.interval
                return True
            self._stopped = True
            session.evict()
            session.bodies.cancel_all()
            try:
                self.loop.call_soon_threadsafe(self.main.cancel)
            except RuntimeError:  # the loop already closed: the run is over anyway
                pass
            return False


class _Keeper:
    """The process's lease-keeper: one daemon thread, started by the first ``add`` (again by a later one
    if it died), that renews each registered ``Heartbeat`` when it is due. Its database connection stays
    open from beat to beat while runs are registered (Django applies ``CONN_MAX_AGE`` only around requests,
    and a store call checks a connection left idle for over ``CONNECTION_IDLE_CHECK`` and reconnects if the
    server closed it); when the last registered run stops, the keeper closes the connections it renewed
    over before that ``stop`` returns, as a per-run heartbeat thread closed its own when its run stopped it
    (so nothing holds a connection to a database a test then drops). A run that renewed nothing costs no
    close. A forked child starts its own keeper."""

    def __init__(self) -> None:
        lock = threading.Lock()
        self._cond = threading.Condition(lock)  # the keeper waits on it for a beat due (or the last stop)
        self._idle = threading.Condition(lock)  # the last stop waits on it for the keeper's close
        self._beats: set[Heartbeat] = set()
        self._thread: threading.Thread | None = None
        self._deadline = float("inf")  # when the keeper's current wait ends: an earlier beat wakes it
        self._stores: dict[int, Any] = {}  # the stores renewed over since the keeper last closed them

    def add(self, beat: Heartbeat) -> None:
        """Register ``beat``; its ``due`` is set."""
        with self._cond:
            self._beats.add(beat)
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._run, name="rivet-lease-keeper", daemon=True)
                self._deadline = 0.0
                self._thread.start()
            elif beat.due < self._deadline:
                self._cond.notify()

    def remove(self, beat: Heartbeat) -> None:
        """Unregister ``beat`` (no-op when it is not registered). The last registered beat waits (at most
        ``CLOSE_WAIT_SECONDS``) for the keeper to close the connections it renewed over, if any."""
        with self._cond:
            self._beats.discard(beat)
            if self._beats or not self._stores or self._thread is None or not self._thread.is_alive():
                return
            self._cond.notify()
            self._idle.wait_for(lambda: self._beats or not self._stores, CLOSE_WAIT_SECONDS)

    def _run(self) -> None:
        while True:
            try:
                self._round()
            except Exception:  # never let the keeper die of one run's failure
                logger.exception("the lease keeper failed; going on")

    def _round(self) -> None:
        """Wait until a beat is due, then renew the due ones in turn; with no beat left, close the
        connections renewed over."""
        with self._cond:
            if not self._beats:
                if not self._stores:
                    self._deadline = float("inf")
                    self._cond.wait()
                    return
                stores, due = list(self._stores.values()), []
            else:
                self._deadline = min(beat.due for beat in self._beats)
                now = time.monotonic()
                if self._deadline > now:
                    self._cond.wait(self._deadline - now)
                    return  # woken early (a new beat due sooner) or on time: look again
                due = [beat for beat in self._beats if beat.due <= now]
                self._deadline = float("-inf")  # renewing: a new beat does not need to wake the keeper
                stores = []
                for beat in due:  # their renews open the keeper's connections to these stores
                    self._stores.setdefault(id(beat.session.store), beat.session.store)
        if stores:
            try:
                for store in stores:  # outside the lock: closing may take a round trip
                    store.close_thread_connection()
            finally:
                with self._cond:
                    self._stores.clear()  # no renew ran meanwhile: this thread makes them all
                    self._idle.notify_all()
            return
        done = []
        for beat in due:
            if not beat.beat():
                done.append(beat)
        if done:
            with self._cond:
                self._beats.difference_update(done)

    def forget(self) -> None:
        """In a forked child: the parent's keeper thread did not come along; the next run starts one."""
        lock = threading.Lock()
        self._cond = threading.Condition(lock)
        self._idle = threading.Condition(lock)
        self._beats = set()
        self._thread = None
        self._deadline = float("inf")
        self._stores = {}


_keeper = _Keeper()

if hasattr(os, "register_at_fork"):  # POSIX
    os.register_at_fork(after_in_child=_keeper.forget)
