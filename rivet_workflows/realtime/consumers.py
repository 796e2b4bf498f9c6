"""The WebSocket consumer of ``ws/rivet/actors/<actor_id>/`` (DESIGN.md section 7)."""

from __future__ import annotations

import asyncio
from typing import Any
from urllib.parse import parse_qs

from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncJsonWebsocketConsumer

from . import broadcaster

#: close codes: no or a wrong credential; a caller that may not read this actor; an unknown actor
CLOSE_UNAUTHORIZED = 4401
CLOSE_FORBIDDEN = 4403
CLOSE_NOT_FOUND = 4404


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


def refusal(scope: dict, actor_id: str) -> int | None:
    """The close code refusing a subscription to ``actor_id``, or None to accept it.

    The same rule as ``GET /actors/{actor_id}`` (operation ``read``): no caller -> 4401; a caller the role
    rule refuses (a user without ``use_actor_api``, or staff without ``view_actor``) -> 4403, before the
    actor is looked up; an unknown actor -> 4404; the project's ``AUTHORIZE`` hook refusing -> 4403."""
    from .. import access, inputs, models

    caller = principal(scope)
    if not caller:
        return CLOSE_UNAUTHORIZED
    if not access.role_allows(caller, access.READ):
        return CLOSE_FORBIDDEN
    if inputs.text_problem(actor_id) is not None:  # no database can store it: unknown (manual: HTTP API)
        return CLOSE_NOT_FOUND
    name = models.Actor.objects.filter(pk=actor_id, destroyed=False).values_list("name", flat=True).first()
    if name is None:
        return CLOSE_NOT_FOUND
    request = access.ConnectionRequest.from_scope(scope, caller)
    if not access.hook_allows(request, name, access.READ, actor_id):
        return CLOSE_FORBIDDEN
    return None


class ActorEventsConsumer(AsyncJsonWebsocketConsumer):
    """Streams an actor's events as ``{"type": "event", "name": ..., "args": [...]}`` and history changes
    as ``{"type": "history", "actor_id": ...}``. Closes with 4401 without a caller, 4403 when the caller
    may not read the actor and 4404 for an unknown actor (``refusal``). Thin: the group and the sends
    live in ``broadcaster``."""

    actor_id: str = ""
    group: str = ""

    async def connect(self) -> None:
        self.actor_id = self.scope["url_route"]["kwargs"]["actor_id"]
        code = await database_sync_to_async(refusal)(self.scope, self.actor_id)
        if code is not None:
            await self.close(code=code)
            return
        broadcaster.remember_consumer_loop(asyncio.get_running_loop())
        self.group = broadcaster.group_name(self.actor_id)
        await self.channel_layer.group_add(self.group, self.channel_name)
        await self.accept()

    async def disconnect(self, code: int) -> None:
        if self.group:
            await self.channel_layer.group_discard(self.group, self.channel_name)

    async def receive_json(self, content: Any, **kwargs: Any) -> None:
        """Clients only listen; a ``{"type": "ping"}`` gets ``{"type": "pong"}``."""
        if isinstance(content, dict) and content.get("type") == "ping":
            await self.send_json({"type": "pong"})

    async def rivet_event(self, message: dict) -> None:
        await self.send_json({"type": "event", "name": message["name"], "args": message.get("args", [])})

    async def rivet_history(self, message: dict) -> None:
        await self.send_json({"type": "history", "actor_id": message.get("actor_id", self.actor_id)})
