"""One listening PostgreSQL connection per process and database alias, for the waiting sends of
``PostgresStore`` (docs/howto/calling.md: a waiting send holds no database connection while it waits).

A daemon thread owns the connection (autocommit, opened with the alias's settings but outside Django's
connection handling) while at least one sender waits, and closes it when none does. A sender registers a ``NotifiedWatch`` under a channel (``sends_channel(actor_id)``)
before it stores its message; the thread LISTENs on a channel while at least one watch wants it (one LISTEN
for the whole wait, shared by every sender to the same actor) and UNLISTENs when the last one is closed,
and hands each notification to the channel's watches. While the connection is down it reconnects, listens
again and wakes every watch once, so a sender looks at what it may have missed.
"""

from __future__ import annotations

import logging
import os
import select
import socket
import threading
import time
from typing import Any

from django.db import connections

from ..engine.model import errors, watches

logger = logging.getLogger("rivet_workflows")

#: how long a sender waits for the listener to confirm its LISTEN before the send is refused as unavailable
SUBSCRIBE_TIMEOUT = 10.0
#: the pause between two connection attempts while the database is unreachable
_RECONNECT_PAUSE = 0.5


def sends_channel(actor_id: str) -> str:
    """The NOTIFY channel of the waiting sends to ``actor_id`` (an actor id is 32 hex digits): a commit that
    completes one of its messages notifies the message id, the end of its workflow or its destruction ''."""
    return f"rivet_sends_{actor_id}"


class Listener:
    """The listening connection of one database alias in this process (``listener_for``)."""

    def __init__(self, using: str) -> None:
        self.using = using
        self._lock = threading.Lock()
        self._watches: dict[str, set[watches.NotifiedWatch]] = {}
        #: channels LISTENed on the current connection (written by the thread, under ``_lock``)
        self._listening: set[str] = set()
        self._confirmed = threading.Condition(self._lock)
        self._wake_r, self._wake_w = socket.socketpair()
        self._wake_r.setblocking(False)
        self._wake_w.setblocking(False)
        self._params = self._connection_params()
        self._thread = threading.Thread(target=self._run, name=f"rivet-sends-listener-{using}", daemon=True)
        self._thread.start()

    def _connection_params(self) -> dict[str, Any]:
        wrapper = connections[self.using]
        params = dict(wrapper.get_connection_params())
        for django_only in ("cursor_factory", "context", "prepare_threshold"):
            params.pop(django_only, None)
        return params

    # --- the senders' side -----------------------------------------------------------------------------

    def watch(self, channel: str) -> watches.NotifiedWatch:
        """A watch on ``channel``, returned once the connection LISTENs on it (a notification committed
        from then on reaches it). Raises ``StoreUnavailableError`` when the listener cannot confirm within
        ``SUBSCRIBE_TIMEOUT`` (the database is unreachable)."""
        watch = watches.NotifiedWatch(on_close=lambda w: self._forget(channel, w))
        deadline = time.monotonic() + SUBSCRIBE_TIMEOUT
        with self._lock:
            self._watches.setdefault(channel, set()).add(watch)
        self._poke()
        with self._lock:
            while channel not in self._listening:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    break
                self._confirmed.wait(remaining)
            confirmed = channel in self._listening
        if not confirmed:
            watch.close()
            raise errors.StoreUnavailableError(
                "the database is unavailable: could not listen for the response of a waiting send; "
                "try again shortly"
            )
        return watch

    def _forget(self, channel: str, watch: watches.NotifiedWatch) -> None:
        with self._lock:
            channel_watches = self._watches.get(channel)
            if channel_watches is not None:
                channel_watches.discard(watch)
                if not channel_watches:
                    del self._watches[channel]
        self._poke()

    def _poke(self) -> None:
        try:
            self._wake_w.send(b"x")
        except BlockingIOError:  # the thread has enough wake-ups pending
            pass

    # --- the listener thread ---------------------------------------------------------------------------

    def _run(self) -> None:
        import psycopg

        connection = None
        lost = False
        while True:
            with self._lock:
                wanted = bool(self._watches)
            if not wanted:
                # nobody waits: hold no connection (a test database can be dropped, a pool stays small)
                if connection is not None:
                    connection.close()
                    connection = None
                    with self._lock:
                        self._listening.clear()
                select.select([self._wake_r], [], [])
                self._drain_pokes()
                continue
            try:
                if connection is None:
                    connection = psycopg.connect(**self._params, autocommit=True)
                    if lost:  # notifications sent while nothing listened are gone: every watch looks
                        self._wake_all()
                    lost = False
                self._sync_channels(connection)
                self._deliver(connection)
                select.select([connection.fileno(), self._wake_r], [], [], 60.0)
                self._drain_pokes()
            except psycopg.Error as exc:
                logger.warning("the waiting sends' listening connection failed: %s; reconnecting", exc)
                if connection is not None:
                    connection.close()
                connection, lost = None, True
                with self._lock:
                    self._listening.clear()
                time.sleep(_RECONNECT_PAUSE)

    def _wake_all(self) -> None:
        with self._lock:
            every = [w for channel_watches in self._watches.values() for w in channel_watches]
        for watch in every:
            watch.notify(None)

    def _sync_channels(self, connection: Any) -> None:
        """LISTEN on the channels some watch wants, UNLISTEN the others (one statement each)."""
        with self._lock:
            wanted = set(self._watches)
            start = sorted(wanted - self._listening)
            stop = sorted(self._listening - wanted)
        for channel in start:
            connection.execute(f'LISTEN "{channel}"')
        for channel in stop:
            connection.execute(f'UNLISTEN "{channel}"')
        if start or stop:
            with self._lock:
                self._listening.update(start)
                self._listening.difference_update(stop)
                self._confirmed.notify_all()

    def _deliver(self, connection: Any) -> None:
        for notification in connection.notifies(timeout=0):
            with self._lock:
                targets = list(self._watches.get(notification.channel, ()))
            for watch in targets:
                watch.notify(notification.payload)

    def _drain_pokes(self) -> None:
        try:
            while self._wake_r.recv(4096):
                pass
        except BlockingIOError:
            pass


_listeners: dict[tuple[int, str], Listener] = {}
_listeners_lock = threading.Lock()


def listener_for(using: str) -> Listener:
    """The process's ``Listener`` of the database alias ``using``, started on first use (a forked child
    starts its own: the parent's thread and connection do not survive a fork)."""
    key = (os.getpid(), using)
    with _listeners_lock:
        listener = _listeners.get(key)
        if listener is None:
            listener = _listeners[key] = Listener(using)
        return listener
