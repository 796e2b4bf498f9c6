"""The Channels consumer (DESIGN.md section 7): broadcasts from steps and actions, history pushes, auth."""

from __future__ import annotations

import asyncio

import pytest
from channels.auth import AuthMiddlewareStack
from channels.db import database_sync_to_async
from channels.routing import URLRouter
from channels.testing import WebsocketCommunicator

from rivet_workflows.realtime.routing import websocket_urlpatterns

pytestmark = pytest.mark.asyncio

app = AuthMiddlewareStack(URLRouter(websocket_urlpatterns))


async def receive_until(communicator, predicate, timeout=10.0):
    """Collect messages until one satisfies ``predicate``; returns every message received."""
    seen = []
    loop = asyncio.get_running_loop()
    end = loop.time() + timeout
    while True:
        remaining = end - loop.time()
        if remaining <= 0:
            raise AssertionError(f"no matching message; got {seen}")
        message = await communicator.receive_json_from(timeout=remaining)
        seen.append(message)
        if predicate(message):
            return seen


async def test_a_broadcast_from_a_step_reaches_the_websocket(rivet):
    handle = await database_sync_to_async(rivet.client.order.get_or_create)("o")
    communicator = WebsocketCommunicator(app, f"/ws/rivet/actors/{handle.actor_id}/")
    connected, _ = await communicator.connect()
    assert connected
    drained = asyncio.get_running_loop().run_in_executor(None, rivet.drain)
    history = {"type": "history", "actor_id": handle.actor_id}
    seen = await receive_until(communicator, lambda m: m.get("type") == "event")
    if history not in seen:  # history pushes are coalesced: one follows the run's commits shortly
        seen += await receive_until(communicator, lambda m: m == history)
    assert {"type": "event", "name": "charged", "args": [1]} in seen
    assert history in seen  # live trace pushes
    await drained
    await communicator.disconnect()


async def test_a_broadcast_from_an_action_reaches_the_websocket(rivet):
    from rivet_workflows.engine import definitions as d

    def ping(c, text):
        c.broadcast("pong", text, 2)
        return "ok"

    registry = d.setup(use={"chat": d.actor(state={}, actions={"ping": ping})})
    from rivet_workflows.django_runtime import build_runtime

    runtime = await database_sync_to_async(build_runtime)(registry=registry)
    handle = await database_sync_to_async(runtime.client().chat.get_or_create)("room")
    communicator = WebsocketCommunicator(app, f"/ws/rivet/actors/{handle.actor_id}/")
    assert (await communicator.connect())[0]
    assert await handle.acall("ping", "hi") == "ok"
    assert await communicator.receive_json_from(timeout=5) == {
        "type": "event",
        "name": "pong",
        "args": ["hi", 2],
    }
    await communicator.send_json_to({"type": "ping"})
    assert await communicator.receive_json_from(timeout=5) == {"type": "pong"}
    await communicator.disconnect()


async def test_unknown_actor_is_refused(rivet):
    communicator = WebsocketCommunicator(app, "/ws/rivet/actors/nope/")
    connected, code = await communicator.connect()
    assert not connected and code == 4404


@pytest.mark.parametrize("actor_id", ["ab\x00cd", "ab\ud800cd"])
async def test_an_actor_id_no_database_can_store_is_refused_as_unknown(rivet, actor_id):
    """C48: a NUL or a lone surrogate in the path is a 4404, not PostgreSQL's DataError (close 1011)."""
    communicator = WebsocketCommunicator(app, "/ws/rivet/actors/nope/")
    communicator.scope["path"] = f"/ws/rivet/actors/{actor_id}/"
    connected, code = await communicator.connect()
    assert not connected and code == 4404


async def test_outside_dev_mode_a_subscriber_needs_a_user_or_a_token(rivet):
    await database_sync_to_async(rivet.configure)(DEV_MODE=False, INSPECTOR_TOKEN="tok")
    handle = await database_sync_to_async(rivet.client.counter.get_or_create)("c")
    anonymous = WebsocketCommunicator(app, f"/ws/rivet/actors/{handle.actor_id}/")
    connected, code = await anonymous.connect()
    assert not connected and code == 4401
    wrong = WebsocketCommunicator(app, f"/ws/rivet/actors/{handle.actor_id}/?token=bad")
    assert (await wrong.connect()) == (False, 4401)
    right = WebsocketCommunicator(app, f"/ws/rivet/actors/{handle.actor_id}/?token=tok")
    assert (await right.connect())[0]
    await right.disconnect()


async def test_project_asgi_routes_websockets():
    from project.asgi import application

    communicator = WebsocketCommunicator(
        application, "/ws/rivet/actors/x/", headers=[(b"origin", b"http://evil.example")]
    )
    connected, _ = await communicator.connect()
    assert not connected  # foreign origin refused by AllowedHostsOriginValidator
