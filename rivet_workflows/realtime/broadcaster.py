"""The runtime's realtime hooks on the Channels layer: ``broadcast`` (events) and ``history_changed``.

Wired into the Django runtime (``django_runtime.build_runtime``) as ``Runtime(broadcaster=broadcast,
on_history_change=history_changed)``. Both are fire-and-forget and never raise (realtime is best effort):

* a message goes to the group ``group_name(actor_id)`` of the layer ``CHANNEL_LAYER_ALIAS``;
* the in-memory layer is not thread-safe, so when a consumer of this process is listening, the send is
  scheduled on that consumer's event loop (``run_coroutine_threadsafe``); otherwise on a background
  sender loop (a daemon thread). The caller never waits for the layer.
* history pushes are coalesced per actor: a run commits once per step, and a group send to the Redis layer
  per commit cost about a third of a worker's CPU per run (benchmark P6). The push only tells the trace page
  to re-read the history, so one push at most ``HISTORY_PUSH_DELAY`` seconds after the first change of a
  burst, sent after every change of it, carries the same information.
* history pushes go only to actors a trace page may be watching (``watchers``): a worker skips the push of
  an actor it knows nobody watches (most of them), which was a tenth of its CPU per step (benchmark P1).
"""

from __future__ import annotations

import asyncio
import logging
import os
import threading
import time
from typing import Any

from . import watchers

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


_sender_loop: asyncio.AbstractEventLoop | None = None


def _background_loop() -> asyncio.AbstractEventLoop:
    """A daemon thread's event loop that performs sends nobody in this process listens to directly
    (e.g. from a worker to the Redis layer). Started on first use."""
    global _sender_loop
    with _loop_lock:
        if _sender_loop is None or _sender_loop.is_closed():
            loop = asyncio.new_event_loop()
            thread = threading.Thread(target=loop.run_forever, name="rivet-realtime-sender", daemon=True)
            thread.start()
            _sender_loop = loop
        return _sender_loop


def _log_failure(future: Any) -> None:
    _pending.discard(future)
    try:
        exc = future.exception()
    except (asyncio.CancelledError, Exception):  # cancelled at shutdown
        return
    if exc is not None:
        logger.warning("realtime send failed: %r", exc)


def send_to_group(actor_id: str, message: dict) -> None:
    """Send ``message`` (a channel-layer event dict with ``type``) to the actor's group; never blocks or raises.

    The send is scheduled on the loop of this process's consumers when one is listening (the in-memory layer
    is bound to it), else on a background sender loop: never on the caller's loop, whose pending tasks may
    be cancelled when an executor run ends.
    """
    try:
        layer = _layer()
        if layer is None:
            return
        _schedule(layer.group_send(group_name(actor_id), message))
    except Exception:  # realtime is best effort: never fail a step or an action
        logger.exception("realtime send to actor %s failed", actor_id)


def broadcast(actor_id: str, name: str, args: list) -> None:
    """``Runtime.broadcaster``: deliver event ``name`` with ``args`` to the actor's WebSocket clients."""
    send_to_group(actor_id, {"type": "rivet.event", "name": name, "args": list(args)})


def stream_item(actor_id: str, name: str, offset: int, value: Any) -> None:
    """``Runtime.on_stream_item``: push item ``offset`` of the stream ``name`` (``value`` in tagged JSON form)
    to the actor's WebSocket clients as ``{"type": "stream", "name", "offset", "value"}`` (best effort: a
    client that must not miss one reads the stream itself, DESIGN.md section 17)."""
    send_to_group(actor_id, {"type": "rivet.stream", "name": name, "offset": offset, "value": value})


#: seconds a history push waits so the further changes of a burst (a run's next steps) ride on it
HISTORY_PUSH_DELAY = 0.1
#: seconds after which a scheduled push that never started (its loop stopped) no longer holds back others
HISTORY_PUSH_STALE = 5.0
#: actor id -> monotonic time its history push was scheduled, until the push starts (any thread touches it;
#: single dict operations are atomic)
_history_due: dict[str, float] = {}


async def _push_history(actor_id: str) -> None:
    await asyncio.sleep(HISTORY_PUSH_DELAY)
    # Leave the set before sending: a change committed from now on schedules a push of its own, and any
    # change committed before this line is visible to whoever re-reads the history on this push.
    _history_due.pop(actor_id, None)
    layer = _layer()
    if layer is not None:
        await layer.group_send(group_name(actor_id), {"type": "rivet.history", "actor_id": actor_id})


def history_changed(actor_id: str) -> None:
    """``Runtime.on_history_change``: tell open trace pages that the actor's history, workflow state or
    lease changed (they re-read the whole page part: header, buttons and trace). Nothing is sent when no
    page can be open on the actor (``watchers.may_be_watched``).

    Coalesced: the first change schedules one push ``HISTORY_PUSH_DELAY`` seconds later; changes until
    that push starts ride on it. Every change is therefore followed by a push sent after it was committed
    (a race of two threads costs at most one extra push, never a missed one). Never blocks or raises.
    """
    try:
        layer = _layer()
        if layer is None or not watchers.may_be_watched(layer, actor_id, _schedule):
            return  # nobody has this actor's trace page open (watchers module)
    except Exception:  # realtime is best effort: never fail a step or an action
        logger.exception("realtime history push for actor %s failed", actor_id)
        return
    now = time.monotonic()
    scheduled = _history_due.get(actor_id)
    if scheduled is not None and now - scheduled < HISTORY_PUSH_STALE:
        return
    _history_due[actor_id] = now
    try:
        _schedule(_push_history(actor_id))
    except Exception:  # realtime is best effort: never fail a step or an action
        _history_due.pop(actor_id, None)
        logger.exception("realtime history push for actor %s failed", actor_id)


def _schedule(coroutine: Any) -> None:
    """Run ``coroutine`` on the loop of this process's consumers when one is listening (the in-memory layer
    is bound to it), else on the background sender loop; fire and forget, failures logged."""
    target = _consumer_loop
    if target is None or target.is_closed() or not target.is_running():
        target = _background_loop()
    future = asyncio.run_coroutine_threadsafe(coroutine, target)
    _pending.add(future)
    future.add_done_callback(_log_failure)


def _forget_parent_state() -> None:
    """In a forked child: the parent's event-loop threads did not come along, so its loops never run here,
    and a push the parent had scheduled would hold back this actor's pushes (``_history_due``) until
    ``HISTORY_PUSH_STALE``. Start from nothing, as a fresh process does."""
    global _loop_lock, _consumer_loop, _sender_loop
    _loop_lock = threading.Lock()
    _consumer_loop = None
    _sender_loop = None
    _pending.clear()
    _history_due.clear()
    watchers.forget()


if hasattr(os, "register_at_fork"):  # POSIX
    os.register_at_fork(after_in_child=_forget_parent_state)
