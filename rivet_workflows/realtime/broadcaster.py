"""The runtime's realtime hooks on the Channels layer: ``broadcast`` (events) and ``history_changed``.

Wired into the Django runtime (``django_runtime.build_runtime``) as ``Runtime(broadcaster=broadcast,
on_history_change=history_changed)``. Both are fire-and-forget and never raise (realtime is best effort):

* a message goes to the group ``group_name(actor_id)`` of the layer ``CHANNEL_LAYER_ALIAS``;
* the in-memory layer is not thread-safe, so when a consumer of this process is listening, the send is
  scheduled on that consumer's event loop (``run_coroutine_threadsafe``); otherwise it runs on the caller's
  loop (a task) or, from plain sync code, through ``async_to_sync``. With the Redis layer any loop works.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from typing import Any

from asgiref.sync import async_to_sync

logger = logging.getLogger("rivet_workflows")

CHANNEL_LAYER_ALIAS = "default"
_loop_lock = threading.Lock()
_consumer_loop: asyncio.AbstractEventLoop | None = None
_pending: set = set()


def group_name(actor_id: str) -> str:
    """The channel-layer group of one actor's subscribers (``rivet.actor.<actor_id>``)."""
    return f"rivet.actor.{actor_id}"[:99]


def remember_consumer_loop(loop: asyncio.AbstractEventLoop) -> None:
    """Called by a consumer on connect: sends from other threads are scheduled on this loop."""
    global _consumer_loop
    with _loop_lock:
        _consumer_loop = loop


def _layer() -> Any:
    from channels.layers import get_channel_layer

    return get_channel_layer(CHANNEL_LAYER_ALIAS)


def _running_loop() -> asyncio.AbstractEventLoop | None:
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return None


def _log_failure(future: Any) -> None:
    _pending.discard(future)
    try:
        exc = future.exception()
    except (asyncio.CancelledError, Exception):  # cancelled at shutdown
        return
    if exc is not None:
        logger.warning("realtime send failed: %r", exc)


def send_to_group(actor_id: str, message: dict) -> None:
    """Send ``message`` (a channel-layer event dict with ``type``) to the actor's group; never raises."""
    try:
        layer = _layer()
        if layer is None:
            return
        group = group_name(actor_id)
        running = _running_loop()
        target = _consumer_loop
        if target is not None and (target.is_closed() or not target.is_running()):
            target = None
        if target is not None and target is not running:
            future = asyncio.run_coroutine_threadsafe(layer.group_send(group, message), target)
        elif running is not None:
            future = running.create_task(layer.group_send(group, message))
        else:
            async_to_sync(layer.group_send)(group, message)
            return
        _pending.add(future)
        future.add_done_callback(_log_failure)
    except Exception:  # realtime is best effort: never fail a step or an action
        logger.exception("realtime send to actor %s failed", actor_id)


def broadcast(actor_id: str, name: str, args: list) -> None:
    """``Runtime.broadcaster``: deliver event ``name`` with ``args`` to the actor's WebSocket clients."""
    send_to_group(actor_id, {"type": "rivet.event", "name": name, "args": list(args)})


def history_changed(actor_id: str) -> None:
    """``Runtime.on_history_change``: tell open trace pages that the actor's history changed."""
    send_to_group(actor_id, {"type": "rivet.history", "actor_id": actor_id})
