"""The WebSocket consumer of ``ws/rivet/actors/<actor_id>/`` (DESIGN.md section 7)."""

from __future__ import annotations

import asyncio
from typing import Any
from urllib.parse import parse_qs

from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncJsonWebsocketConsumer
from django.http import HttpRequest

from ..engine.model import errors, serde
from ..engine.operate import inspector
from . import broadcaster, watchers

#: close codes: no or a wrong credential; a caller that may not read this actor; an unknown actor
CLOSE_UNAUTHORIZED = 4401
CLOSE_FORBIDDEN = 4403
CLOSE_NOT_FOUND = 4404
#: a close frame's reason holds at most 123 bytes of UTF-8 (RFC 6455 5.5)
_MAX_REASON_BYTES = 120


def principal(scope: dict) -> Any:
    """The caller of a connection (``rivet_workflows.access``): ``access.DEV_MODE`` while DEV_MODE is on;
    else the API or inspector token given as ``?token=`` or ``Authorization: Bearer`` (constant-time;
    unset tokens never match; a wrong one is None, not a fall-back to the session); else the
    authenticated session user of ``AuthMiddlewareStack``; None when there is no caller."""
    from .. import access
    from ..conf import rivet_settings

    if rivet_settings.get().DEV_MODE:
        return access.DEV_MODE
    query = parse_qs((scope.get("query_string") or b"").decode("latin-1"))
    token = (query.get("token") or [None])[0]
    if token is None:
        token = access.bearer(access.ConnectionRequest.from_scope(scope, None).headers)
    if token is not None:
        return access.token_principal(token)
    user = scope.get("user")
    if user is not None and getattr(user, "is_authenticated", False) and user.is_active:
        return user
    return None


#: the reasons sent with each close code (a client shows them; the code is what it acts on)
CLOSE_REASONS = {
    CLOSE_UNAUTHORIZED: "not logged in: log in, or pass ?token=",
    CLOSE_FORBIDDEN: "not allowed to read this actor",
    CLOSE_NOT_FOUND: "no such actor",
}


class _Handshake(HttpRequest):
    """The WebSocket handshake as the ``HttpRequest`` Django's CSRF origin check reads: its headers as
    ``META``, ``https`` for a ``wss`` connection."""

    def __init__(self, scope: dict) -> None:
        super().__init__()
        for name, value in scope.get("headers") or []:
            key = name.decode("latin-1").upper().replace("-", "_")
            self.META[key if key in ("CONTENT_TYPE", "CONTENT_LENGTH") else f"HTTP_{key}"] = value.decode(
                "latin-1"
            )
        server = scope.get("server") or ("", "")  # without a Host header: no site origin (DisallowedHost)
        self.META["SERVER_NAME"], self.META["SERVER_PORT"] = str(server[0] or ""), str(server[1] or "")
        self._secure_scheme = scope.get("scheme") in ("wss", "https")

    def _get_scheme(self) -> str:
        return "https" if self._secure_scheme else "http"


def origin_refusal(scope: dict, caller: Any) -> str | None:
    """Why the handshake's ``Origin`` is refused, or None. The rule of Django's CSRF check
    (docs/reference/live-events.md):
    the whole origin, scheme, host and port, must be the site's own (``ws``->``http``,
    ``wss``->``https``, the ``Host`` header, which ``ALLOWED_HOSTS`` must accept) or be listed in
    ``CSRF_TRUSTED_ORIGINS``. A connection without ``Origin`` (not a browser: browsers always send it) is
    refused only when the caller is the session user, the one credential a browser sends by itself."""
    from django.middleware.csrf import CsrfViewMiddleware

    request = _Handshake(scope)
    if "HTTP_ORIGIN" not in request.META:
        return "no Origin header for a session login" if _is_session(caller, scope) else None
    # the check of Django's CsrfViewMiddleware (exact site origin, or CSRF_TRUSTED_ORIGINS with wildcards)
    if CsrfViewMiddleware(lambda r: None)._origin_verified(request):
        return None
    return f"origin {request.META['HTTP_ORIGIN']!r} is not allowed"


def _is_session(caller: Any, scope: dict) -> bool:
    return caller is not None and caller is scope.get("user")


def refusal(scope: dict, actor_id: str) -> tuple[int, str] | None:
    """The close code and reason refusing a subscription to ``actor_id``, or None to accept it.

    A subscription is the operation ``read`` of ``rivet_workflows.access`` (the manual's authorization
    table): no caller -> 4401; an ``Origin`` that is not the site's -> 4403; a caller the role rule
    refuses -> 4403, before the actor is looked up; an unknown actor -> 4404; the project's
    ``AUTHORIZE`` hook refusing -> 4403."""
    from .. import access, inputs, models, sharding

    caller = principal(scope)
    refused_origin = origin_refusal(scope, caller)
    if refused_origin is not None:
        return CLOSE_FORBIDDEN, refused_origin

    def load(actor_id: str) -> Any:
        if inputs.text_problem(actor_id) is None:  # text no database can store is an unknown actor
            row = (
                models.Actor.objects.using(sharding.alias_for_actor(actor_id))
                .filter(pk=actor_id, destroyed=False)
                .only("name")
                .first()
            )
            if row is not None:
                return row
        raise errors.ActorNotFoundError(f"actor {actor_id!r} not found", actor_id=actor_id)

    request = access.ConnectionRequest.from_scope(scope, caller)
    try:
        access.check_actor(request, caller, access.READ, actor_id, load)
    except access.NotAuthenticatedError:
        return CLOSE_UNAUTHORIZED, CLOSE_REASONS[CLOSE_UNAUTHORIZED]
    except access.ForbiddenError as exc:
        fits = len(exc.message.encode()) <= _MAX_REASON_BYTES
        return CLOSE_FORBIDDEN, exc.message if fits else CLOSE_REASONS[CLOSE_FORBIDDEN]
    except errors.ActorNotFoundError:
        return CLOSE_NOT_FOUND, CLOSE_REASONS[CLOSE_NOT_FOUND]
    return None


class ActorEventsConsumer(AsyncJsonWebsocketConsumer):
    """Streams an actor's events as ``{"type": "event", "name": ..., "args": [...]}`` and history changes
    as ``{"type": "history", "actor_id": ...}``. A refused connection is accepted, then closed with 4401
    without a caller, 4403 when the caller (or its origin) may not read the actor and 4404 for an
    unknown actor, with a reason (``refusal``). Thin: the group and the sends
    live in ``broadcaster``."""

    actor_id: str = ""
    group: str = ""

    async def connect(self) -> None:
        self.actor_id = self.scope["url_route"]["kwargs"]["actor_id"]
        refused = await database_sync_to_async(refusal)(self.scope, self.actor_id)
        if refused is not None:
            # accepted first: a close before the handshake completes reaches the client as an HTTP 403
            # with no code, and the client could not tell "log in" from "not allowed" from "no such actor"
            await self.accept()
            reason = refused[1].encode()[:_MAX_REASON_BYTES].decode(errors="ignore")
            await self.close(code=refused[0], reason=reason)
            return
        broadcaster.remember_consumer_loop(asyncio.get_running_loop())
        self.group = broadcaster.group_name(self.actor_id)
        await self.channel_layer.group_add(self.group, self.channel_name)
        await self._watch()
        await self.accept()

    async def _watch(self) -> None:
        """Register this page as watching the actor, so workers push its history changes (``watchers``);
        on a layer whose workers may not have seen the registration yet, send one push of our own once
        they have."""
        layer = self.channel_layer
        self._tasks: list[asyncio.Task] = []
        if watchers.mode(layer) == "local":
            watchers.local_watch(self.actor_id, 1)
            self._watching_locally = True
            return
        await watchers.register(layer, self.actor_id, self.channel_name)
        delay = watchers.catch_up_delay(layer)
        if delay is not None:
            self._tasks.append(
                asyncio.ensure_future(watchers.renew_forever(layer, self.actor_id, self.channel_name))
            )
            self._tasks.append(asyncio.ensure_future(self._catch_up(delay)))

    async def _catch_up(self, delay: float) -> None:
        await asyncio.sleep(delay)
        await self.rivet_history({"actor_id": self.actor_id})

    async def disconnect(self, code: int) -> None:
        if self.group:
            await self.channel_layer.group_discard(self.group, self.channel_name)
            for task in getattr(self, "_tasks", ()):
                task.cancel()
            if getattr(self, "_watching_locally", False):
                self._watching_locally = False
                watchers.local_watch(self.actor_id, -1)
            else:
                await watchers.unregister(self.channel_layer, self.actor_id, self.channel_name)

    async def receive_json(self, content: Any, **kwargs: Any) -> None:
        """Clients only listen; a ``{"type": "ping"}`` gets ``{"type": "pong"}``."""
        if isinstance(content, dict) and content.get("type") == "ping":
            await self.send_json({"type": "pong"})

    async def rivet_event(self, message: dict) -> None:
        await self.send_json({"type": "event", "name": message["name"], "args": message.get("args", [])})

    async def rivet_stream(self, message: dict) -> None:
        value, _ = inspector.plain(serde.from_json(message.get("value")))
        await self.send_json(
            {"type": "stream", "name": message["name"], "offset": message["offset"], "value": value}
        )

    async def rivet_history(self, message: dict) -> None:
        await self.send_json({"type": "history", "actor_id": message.get("actor_id", self.actor_id)})
