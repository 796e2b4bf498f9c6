"""History pushes go only to actors a trace page watches (issue 19), and a page never misses a change.

The in-memory layer's check is exact (one process); on Redis a worker reads the registrations at most every
``WATCH_REFRESH`` seconds, pushes while its reading is stale, and a new page gets one push of its own once
every worker's reading includes it.
"""

from __future__ import annotations

import asyncio
import os
import time
import uuid

import pytest
from channels.layers import InMemoryChannelLayer

from rivet_workflows.realtime import broadcaster, watchers


@pytest.fixture
def fresh(monkeypatch):
    """No registration and no reading from earlier tests; short delays."""
    watchers.forget()
    monkeypatch.setattr(broadcaster, "_consumer_loop", None)
    monkeypatch.setattr(broadcaster, "HISTORY_PUSH_DELAY", 0.05)
    monkeypatch.setattr(broadcaster, "_history_due", {})
    yield
    watchers.forget()


def _recording(layer, monkeypatch) -> list[str]:
    """Record the groups ``layer`` is asked to send to (the real send still runs)."""
    sent: list[str] = []
    real = layer.group_send

    async def group_send(group, message):
        sent.append(group)
        await real(group, message)

    monkeypatch.setattr(layer, "group_send", group_send)
    monkeypatch.setattr(broadcaster, "_layer", lambda: layer)
    return sent


def _settle(seconds: float = 0.3) -> None:
    time.sleep(seconds)  # the pushes are sent by the background sender loop


def test_in_memory_layer_pushes_only_while_a_page_watches(fresh, monkeypatch):
    layer = InMemoryChannelLayer()
    sent = _recording(layer, monkeypatch)
    broadcaster.history_changed("nobody-looks")
    _settle()
    assert sent == []
    watchers.local_watch("watched", 1)
    broadcaster.history_changed("watched")
    broadcaster.history_changed("nobody-looks")
    _settle()
    assert sent == [broadcaster.group_name("watched")]
    watchers.local_watch("watched", 1)  # a second page on it, then the first closes
    watchers.local_watch("watched", -1)
    broadcaster.history_changed("watched")
    _settle()
    assert sent == [broadcaster.group_name("watched")] * 2
    watchers.local_watch("watched", -1)
    broadcaster.history_changed("watched")
    _settle()
    assert len(sent) == 2


def test_an_unknown_layer_gets_every_push(fresh, monkeypatch):
    class OtherLayer:
        def __init__(self):
            self.sent = []

        async def group_send(self, group, message):
            self.sent.append(group)

    layer = OtherLayer()
    monkeypatch.setattr(broadcaster, "_layer", lambda: layer)
    broadcaster.history_changed("a1")
    _settle()
    assert layer.sent == [broadcaster.group_name("a1")]


redis_only = pytest.mark.skipif(not os.environ.get("REDIS_URL"), reason="needs Redis (REDIS_URL)")


@pytest.fixture
def redis_layer():
    from channels_redis.core import RedisChannelLayer

    layer = RedisChannelLayer(hosts=[os.environ["REDIS_URL"]], prefix=f"test-watch-{uuid.uuid4().hex[:8]}")
    yield layer

    async def clean():
        conn = layer.connection(layer.consistent_hash(watchers.watched_key(layer)))
        await conn.delete(watchers.watched_key(layer))

    on_sender_loop(clean())


def on_sender_loop(coroutine) -> None:
    """Run ``coroutine`` on the broadcaster's sender loop (where the layer's connections of the pushes are
    made) and wait for it."""
    asyncio.run_coroutine_threadsafe(coroutine, broadcaster._background_loop()).result(5)


@redis_only
def test_redis_layer_pushes_while_its_reading_is_stale_then_only_to_registered_pages(
    fresh, monkeypatch, redis_layer
):
    monkeypatch.setattr(watchers, "WATCH_REFRESH", 0.5)
    sent = _recording(redis_layer, monkeypatch)
    on_sender_loop(watchers.register(redis_layer, "watched", "page-1"))
    # no reading yet: pushed (and a reading is started)
    broadcaster.history_changed("nobody-looks")
    _settle(0.3)
    assert sent == [broadcaster.group_name("nobody-looks")]
    broadcaster.history_changed("nobody-looks")
    broadcaster.history_changed("watched")
    _settle(0.2)
    assert sent[1:] == [broadcaster.group_name("watched")]
    # the page closes: once the reading is older than WATCH_REFRESH, a new one no longer lists it
    on_sender_loop(watchers.unregister(redis_layer, "watched", "page-1"))
    _settle(0.6)
    broadcaster.history_changed("watched")  # stale reading: pushed, and a new reading starts
    _settle(0.3)
    broadcaster.history_changed("watched")
    _settle(0.2)
    assert sent[2:] == [broadcaster.group_name("watched")]


@redis_only
def test_an_expired_registration_is_not_a_watcher(fresh, monkeypatch, redis_layer):
    monkeypatch.setattr(watchers, "WATCH_TTL", 0.2)
    on_sender_loop(watchers.register(redis_layer, "left-open", "page-9"))
    _settle(0.4)  # its consumer process died: nobody renews it
    on_sender_loop(watchers._refresh(redis_layer, time.monotonic()))
    assert not watchers.may_be_watched(redis_layer, "left-open", broadcaster._schedule)
