"""``GET /actors/{id}/streams/{name}``: a durable stream as Server-Sent Events or as a JSON page
(DESIGN.md section 17, docs/howto/streams.md)."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Iterator
from typing import Any

from asgiref.sync import sync_to_async
from django.core.handlers.asgi import ASGIRequest
from django.http import HttpRequest, StreamingHttpResponse

from ..engine.model import errors, ports
from ..engine.operate import inspector
from ..engine.run import streams

#: seconds without a new item after which an SSE response sends a comment line (proxies keep it open)
KEEPALIVE_SECONDS = 15.0


class InvalidLastEventIdError(errors.RivetWorkflowsError):
    """The ``Last-Event-ID`` header is not an offset (an int >= 0)."""

    group = "request"
    code = "invalid_last_event_id"
    http_status = 422


def start_offset(request: HttpRequest, offset: int) -> int:
    """The first offset to send: ``Last-Event-ID: N`` (the last event the client got) gives N + 1 and wins
    over ``offset``. ``InvalidLastEventIdError`` for a header that is not an int >= 0."""
    header = request.headers.get("Last-Event-ID")
    if header is None or header.strip() == "":
        return offset
    text = header.strip()
    if not text.isascii() or not text.isdigit() or len(text) > 18:
        raise InvalidLastEventIdError(
            f"Last-Event-ID must be the offset of the last event received (an int >= 0), got {header!r}",
            header=header[:40],
        )
    return int(text) + 1


def item_out(item: ports.StreamItem) -> dict[str, Any]:
    """An item as the API shows it (the value as plain JSON: ISO times, decimal strings)."""
    return {
        "offset": item.offset,
        "value": inspector.plain(item.value)[0],
        "attempt": item.attempt,
        "discarded": item.discarded,
        "at": item.at,
    }


def page(
    store: ports.Store, actor_id: str, name: str, offset: int, limit: int, include_discarded: bool
) -> dict:
    """The JSON page: ``{items, closed, next_offset}`` without waiting."""
    found = store.stream_read(actor_id, name, offset, limit, include_discarded=include_discarded)
    return {
        "items": [item_out(i) for i in found.items],
        "closed": found.closed,
        "next_offset": found.next_offset,
    }


def _event(item: ports.StreamItem | None, include_discarded: bool) -> str:
    if item is None:
        return ": keep-alive\n\n"
    value = json.dumps(inspector.plain(item.value)[0], separators=(",", ":"), ensure_ascii=False)
    head = f"id: {item.offset}\n"
    if include_discarded:  # the client asked for them: say which items are void
        head += f"event: {'discarded' if item.discarded else 'item'}\n"
    return f"{head}data: {value}\n\n"


_CLOSE = "event: close\ndata: {}\n\n"


def sse_response(
    request: HttpRequest, store: ports.Store, actor_id: str, name: str, offset: int, include_discarded: bool
) -> StreamingHttpResponse:
    """The stream from ``offset`` on as ``text/event-stream``: one event per item (``id:`` its offset,
    ``data:`` its JSON value), a comment every ``KEEPALIVE_SECONDS`` of silence, ``event: close`` at the
    end. Served by an async iterator under ASGI (no thread held while it waits) and a sync one under WSGI."""
    if isinstance(request, ASGIRequest):
        content: Any = _async_events(store, actor_id, name, offset, include_discarded)
    else:
        content = _events(store, actor_id, name, offset, include_discarded)
    response = StreamingHttpResponse(content, content_type="text/event-stream; charset=utf-8")
    response["Cache-Control"] = "no-cache"
    response["X-Accel-Buffering"] = "no"  # nginx: pass each event on at once
    return response


def _events(
    store: ports.Store, actor_id: str, name: str, offset: int, include_discarded: bool
) -> Iterator[str]:
    try:
        for item in streams.follow(store, actor_id, name, offset, KEEPALIVE_SECONDS, include_discarded):
            yield _event(item, include_discarded)
    except errors.ActorNotFoundError:  # destroyed while streaming: its items are gone with it
        pass
    finally:
        store.release_connection()
    yield _CLOSE


async def _async_events(
    store: ports.Store, actor_id: str, name: str, offset: int, include_discarded: bool
) -> AsyncIterator[str]:
    async def call(fn: Any, *args: Any) -> Any:
        return await sync_to_async(fn, thread_sensitive=False)(*args)

    try:
        async for item in streams.afollow(
            store, call, actor_id, name, offset, KEEPALIVE_SECONDS, include_discarded
        ):
            yield _event(item, include_discarded)
    except errors.ActorNotFoundError:
        pass
    yield _CLOSE
