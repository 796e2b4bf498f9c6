"""WebSocket routes of rivet_workflows: include ``websocket_urlpatterns`` in your ASGI ``URLRouter``."""

from __future__ import annotations

from django.urls import path

from .consumers import ActorEventsConsumer

websocket_urlpatterns = [
    path("ws/rivet/actors/<str:actor_id>/", ActorEventsConsumer.as_asgi()),
]
