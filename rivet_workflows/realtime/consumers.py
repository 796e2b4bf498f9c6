"""The WebSocket consumer of ``ws/rivet/actors/<actor_id>/`` (DESIGN.md section 7)."""

from __future__ import annotations

import asyncio
from typing import Any
from urllib.parse import parse_qs

from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncJsonWebsocketConsumer

from . import broadcaster

#: close code sent when the connection is not authorized, or the actor does not exist
CLOSE_UNAUTHORIZED = 4401
CLOSE_NOT_FOUND = 4404


def authorize(scope: dict) -> bool:
    """May this connection subscribe? Dev mode; or ``?token=`` equal to INSPECTOR_TOKEN or API_TOKEN
    (constant-time; unset tokens never match); or an authenticated session user (AuthMiddlewareStack)."""
    from ..api.auth import token_matches
    from ..conf import rivet_settings

    conf = rivet_settings.get()
    if conf.DEV_MODE:
        return True
    query = parse_qs((scope.get("query_string") or b"").decode("latin-1"))
    token = (query.get("token") or [""])[0]
    if token and (token_matches(token, conf.INSPECTOR_TOKEN) or token_matches(token, conf.API_TOKEN)):
        return True
    user = scope.get("user")
    return bool(user is not None and getattr(user, "is_authenticated", False) and user.is_active)


def _actor_exists(actor_id: str) -> bool:
    """Is there a live actor ``actor_id``? False without a query for an id no database can store (C48)."""
    from .. import inputs, models

    if inputs.text_problem(actor_id) is not None:
        return False
    return models.Actor.objects.filter(pk=actor_id, destroyed=False).exists()


class ActorEventsConsumer(AsyncJsonWebsocketConsumer):
    """Streams an actor's events as ``{"type": "event", "name": ..., "args": [...]}`` and history changes
    as ``{"type": "history", "actor_id": ...}``. Closes with 4401 when unauthorized, 4404 for an unknown
    actor. Thin: the group and the sends live in ``broadcaster``."""

    actor_id: str = ""
    group: str = ""

    async def connect(self) -> None:
        self.actor_id = self.scope["url_route"]["kwargs"]["actor_id"]
        if not await database_sync_to_async(authorize)(self.scope):
            await self.close(code=CLOSE_UNAUTHORIZED)
            return
        if not await database_sync_to_async(_actor_exists)(self.actor_id):
            await self.close(code=CLOSE_NOT_FOUND)
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
