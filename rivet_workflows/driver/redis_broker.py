"""kombu's Redis transport whose channels raise a connection error, not ``AttributeError``, once detached.

Why (the manual's Celery settings): prefork workers exited with ``CRITICAL Unrecoverable error:
AttributeError("'NoneType' object has no attribute 'hostname'")`` after a Redis restart (celery 5.7.0,
kombu 5.7.0, redis-py 8.1.0). When the worker loses the broker, Celery's consumer calls
``connection.collect()`` and, since Celery 5.7.0 (celery/celery#10242), ``connection.close()`` after it,
ignoring only connection and channel errors of that close. With Redis down:

1. ``collect()`` closes the channels. The task channel's close fails reading its in-flight BRPOP (a
   connection error, swallowed) before it is marked closed; the remote-control (pidbox) channel's close
   fails deleting its auto-delete fanout queue, which ends kombu's loop over the channels (swallowed too).
   ``collect()`` then detaches the transport: ``transport.client = None``.
2. ``close()`` closes the task channel again: kombu's ``Channel.close`` drops its connection pools and then
   restores the channel's unacknowledged messages (acks-late tasks running, countdown tasks reserved),
   which builds a new pool from ``transport.client``, i.e. ``None.hostname``: ``AttributeError``, which
   escapes ``ignore_errors`` and stops the worker.
3. The same happens later when a task that was running on the old connection finishes and its message is
   acked on the old channel (``basic_ack`` builds a pool the same way), in the worker's event loop.

Here a channel whose transport was detached (or which was closed: ``channel.connection`` is ``None``)
raises ``redis.exceptions.ConnectionError`` instead when it needs a new pool: one of the transport's
``connection_errors``, so Celery treats it as the lost connection it is (the close is ignored, the late
ack is logged, the consumer reconnects). Nothing else changes. Messages that could not be restored or
acked stay in Redis's unacked hash if Redis kept its data, and kombu redelivers them after
``visibility_timeout``; for Rivet they are only wake-up hints anyway (deadlines, leases and messages live
in the database and the sweep re-creates lost hints, DESIGN.md section 5).

Use: ``CELERY_BROKER_URL = "redis://..."`` and ``CELERY_BROKER_TRANSPORT =
"rivet_workflows.driver.redis_broker:Transport"`` (``...:SentinelTransport`` for ``sentinel://`` URLs); an explicit
transport wins over the URL scheme in kombu. Checked by ``tests/system/test_redis_restarts.py``.
"""

from __future__ import annotations

from typing import Any

from kombu.transport import redis as kombu_redis
from redis.exceptions import ConnectionError as RedisConnectionError

__all__ = ["Channel", "SentinelChannel", "SentinelTransport", "Transport"]


class _DetachedGuard:
    """Mixin for kombu Redis channels: no pool is built for a channel whose transport was detached."""

    def _connparams(self, asynchronous: bool = False) -> dict[str, Any]:
        transport = self.connection  # type: ignore[attr-defined]
        if transport is None or transport.client is None:
            raise RedisConnectionError(
                "this Redis channel's broker connection was closed (kombu Connection collected or released); "
                "reconnect to use the broker"
            )
        return super()._connparams(asynchronous=asynchronous)  # type: ignore[misc]


class Channel(_DetachedGuard, kombu_redis.Channel):
    """kombu's Redis channel; a detached one raises ``redis.exceptions.ConnectionError`` for a new pool."""


class SentinelChannel(_DetachedGuard, kombu_redis.SentinelChannel):
    """kombu's Redis Sentinel channel with the same guard as ``Channel``."""


class Transport(kombu_redis.Transport):
    """kombu's Redis transport (``redis://``, ``rediss://``) with ``Channel``."""

    Channel = Channel


class SentinelTransport(kombu_redis.SentinelTransport):
    """kombu's Redis Sentinel transport (``sentinel://``) with ``SentinelChannel``."""

    Channel = SentinelChannel
