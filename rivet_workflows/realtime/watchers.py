"""Which actors have a trace page open: history pushes go only to actors someone watches (issue 19).

A history push (``broadcaster.history_changed``) tells open trace pages to re-read the history. Sending it
to the channel layer for every run cost a worker about a tenth of its CPU per step (a Redis group send per
workflow, benchmark P1), mostly for actors nobody looks at. So the WebSocket consumer registers what it
watches, and a worker skips the push of an actor it KNOWS nobody watches:

* in-memory layer (one process): consumers register in this process (``local_watch``), the check is exact;
* ``channels_redis``'s ``RedisChannelLayer``: each consumer keeps a member ``"<actor_id> <channel>"`` in the
  sorted set ``<prefix>:rivet:watched`` (score: the wall-clock second it expires, renewed every
  ``WATCH_TTL / 3`` while connected, removed on disconnect); a worker reads the set at most every
  ``WATCH_REFRESH`` seconds, and while its reading is older than that (or being refreshed) it pushes as
  before. A consumer that registered after a worker's last reading is missed by that worker for at most
  ``WATCH_REFRESH`` seconds, so the consumer sends its client one history push of its own
  ``WATCH_REFRESH + WATCH_MARGIN`` seconds after connecting (``catch_up_delay``): every change is still
  followed by a push the page receives;
* any other layer: every change is pushed, as before.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from typing import Any

logger = logging.getLogger("rivet_workflows")

#: seconds a worker trusts its reading of the watched set
WATCH_REFRESH = 1.0
#: seconds added to WATCH_REFRESH before a new consumer's own catch-up push (a reading in flight)
WATCH_MARGIN = 0.5
#: seconds a consumer's registration lives without renewal (a consumer process that died leaves it)
WATCH_TTL = 60.0

_lock = threading.Lock()
#: in-memory layer: actor id -> number of consumers of this process watching it
_local: dict[str, int] = {}
#: Redis layer: the actor ids of the last reading, when it was started (monotonic), a reading in flight
_watched: frozenset[str] = frozenset()
_read_at: float | None = None
_reading = False


def mode(layer: Any) -> str:
    """How watchers are known for ``layer``: ``"local"`` (the in-memory layer), ``"redis"``
    (``channels_redis.core.RedisChannelLayer``) or ``"unknown"`` (push everything)."""
    kind = type(layer)
    if kind.__module__ == "channels.layers" and kind.__name__ == "InMemoryChannelLayer":
        return "local"
    if kind.__module__ == "channels_redis.core" and kind.__name__ == "RedisChannelLayer":
        return "redis"
    return "unknown"


def watched_key(layer: Any) -> str:
    """The Redis sorted set of registrations of ``layer`` (a ``RedisChannelLayer``)."""
    return f"{layer.prefix}:rivet:watched"


def _member(actor_id: str, channel: str) -> str:
    return f"{actor_id} {channel}"


# --- the consumer's side (runs on the consumer's event loop) -----------------------------------------------


def local_watch(actor_id: str, delta: int) -> None:
    """In-memory layer: count one more (``delta`` 1) or one fewer (-1) consumer of this process on
    ``actor_id``."""
    with _lock:
        count = _local.get(actor_id, 0) + delta
        if count > 0:
            _local[actor_id] = count
        else:
            _local.pop(actor_id, None)


async def register(layer: Any, actor_id: str, channel: str) -> None:
    """Register (or renew) the consumer ``channel`` watching ``actor_id`` for ``WATCH_TTL`` seconds.
    Nothing for a layer other than Redis's (``local_watch`` is the in-memory one's)."""
    if mode(layer) != "redis":
        return
    key = watched_key(layer)
    conn = layer.connection(layer.consistent_hash(key))
    await conn.zadd(key, {_member(actor_id, channel): time.time() + WATCH_TTL})


async def unregister(layer: Any, actor_id: str, channel: str) -> None:
    """Remove the registration of ``register`` (the consumer disconnected)."""
    if mode(layer) != "redis":
        return
    key = watched_key(layer)
    conn = layer.connection(layer.consistent_hash(key))
    await conn.zrem(key, _member(actor_id, channel))


def catch_up_delay(layer: Any) -> float | None:
    """Seconds after connecting at which a consumer sends its client one history push of its own (the
    workers' readings may predate its registration), or None when none is needed (in-memory or unknown
    layers: their checks are exact, or there is none)."""
    return WATCH_REFRESH + WATCH_MARGIN if mode(layer) == "redis" else None


# --- the worker's side ------------------------------------------------------------------------------------


def may_be_watched(layer: Any, actor_id: str, schedule: Any) -> bool:
    """False only when no trace page can be open on ``actor_id`` (its history push can be skipped).

    ``schedule(coroutine)`` runs a coroutine on the background sender loop: used to refresh a reading of
    the Redis set older than ``WATCH_REFRESH`` (the answer is True until the new reading is in).
    """
    how = mode(layer)
    if how == "local":
        return actor_id in _local
    if how != "redis":
        return True
    global _reading
    now = time.monotonic()
    with _lock:
        fresh = _read_at is not None and now - _read_at < WATCH_REFRESH
        if fresh:
            return actor_id in _watched
        if not _reading:
            _reading = True
            try:
                schedule(_refresh(layer, now))
            except Exception:
                _reading = False
                raise
    return True


async def _refresh(layer: Any, started: float) -> None:
    """Read the actors with a live registration (and drop the expired ones) into the worker's reading."""
    global _watched, _read_at, _reading
    key = watched_key(layer)
    try:
        conn = layer.connection(layer.consistent_hash(key))
        now = time.time()
        await conn.zremrangebyscore(key, "-inf", now)
        members = await conn.zrangebyscore(key, now, "+inf")
        ids = frozenset((m.decode() if isinstance(m, bytes) else m).split(" ", 1)[0] for m in members)
        with _lock:
            _watched, _read_at = ids, started
    except Exception as exc:  # the reading stays stale: every change is pushed until one succeeds
        logger.warning("reading the watched actors failed: %r", exc)
    finally:
        with _lock:
            _reading = False


def forget() -> None:
    """Start from nothing (a forked child; tests): no local consumers, no reading."""
    global _lock, _watched, _read_at, _reading
    _lock = threading.Lock()
    _local.clear()
    _watched, _read_at, _reading = frozenset(), None, False


async def renew_forever(layer: Any, actor_id: str, channel: str) -> None:
    """Renew a consumer's registration every ``WATCH_TTL / 3`` seconds until cancelled (its disconnect)."""
    while True:
        await asyncio.sleep(WATCH_TTL / 3)
        try:
            await register(layer, actor_id, channel)
        except Exception as exc:  # Redis away for a moment: pushes resume at the next renewal
            logger.warning("renewing the watch of actor %s failed: %r", actor_id, exc)
