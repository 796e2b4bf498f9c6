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
    from rivet_workflows.engine.model import definitions as d

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


async def subscribe(communicator) -> tuple[bool, int | None]:
    """Open ``communicator``: (True, None) for a subscription that stays open, (False, close code) for one
    the server accepted and then closed with a code and a reason. A refusal during the handshake fails:
    a browser would see an HTTP 403 without any code (docs/reference/live-events.md)."""
    accepted, code = await communicator.connect()
    assert accepted, f"refused during the handshake (code {code}): the client gets an HTTP 403, no close code"
    if await communicator.receive_nothing(timeout=0.05):
        return True, None
    message = await communicator.receive_output()
    assert message["type"] == "websocket.close" and message.get("reason"), message
    await communicator.disconnect()  # the client's side of the closing handshake ends the consumer
    return False, message["code"]


async def test_unknown_actor_is_refused(rivet):
    communicator = WebsocketCommunicator(app, "/ws/rivet/actors/nope/")
    assert await subscribe(communicator) == (False, 4404)


@pytest.mark.parametrize("actor_id", ["ab\x00cd", "ab\ud800cd"])
async def test_an_actor_id_no_database_can_store_is_refused_as_unknown(rivet, actor_id):
    """C48: a NUL or a lone surrogate in the path is a 4404, not PostgreSQL's DataError (close 1011)."""
    communicator = WebsocketCommunicator(app, "/ws/rivet/actors/nope/")
    communicator.scope["path"] = f"/ws/rivet/actors/{actor_id}/"
    assert await subscribe(communicator) == (False, 4404)


async def test_outside_dev_mode_a_subscriber_needs_a_user_or_a_token(rivet):
    await database_sync_to_async(rivet.configure)(DEV_MODE=False, INSPECTOR_TOKEN="tok")
    handle = await database_sync_to_async(rivet.client.counter.get_or_create)("c")
    anonymous = WebsocketCommunicator(app, f"/ws/rivet/actors/{handle.actor_id}/")
    assert await subscribe(anonymous) == (False, 4401)
    wrong = WebsocketCommunicator(app, f"/ws/rivet/actors/{handle.actor_id}/?token=bad")
    assert await subscribe(wrong) == (False, 4401)
    right = WebsocketCommunicator(app, f"/ws/rivet/actors/{handle.actor_id}/?token=tok")
    assert await subscribe(right) == (True, None)
    await right.disconnect()


async def test_project_asgi_routes_websockets():
    from project.asgi import application

    communicator = WebsocketCommunicator(
        application,
        "/ws/rivet/actors/x/",
        headers=[(b"host", b"testserver"), (b"origin", b"http://evil.example")],
    )
    assert await subscribe(communicator) == (False, 4403)  # a foreign origin: the consumer's origin check


# --- who may subscribe outside dev mode (case C52: the same rule as GET /actors/{id}) ----------------

WS_API_TOKEN = "api-s3cret"
WS_INSPECTOR_TOKEN = "inspector-s3cret"


def _session_cookie(user) -> tuple[bytes, bytes]:
    """The Cookie header of a session logged in as ``user`` (AuthMiddlewareStack reads it)."""
    from django.test import Client

    client = Client()
    client.force_login(user)
    return (b"cookie", f"sessionid={client.cookies['sessionid'].value}".encode())


def _make_user(kind: str):
    from django.contrib.auth import get_user_model

    from tests.api.support import api_user

    users = get_user_model()
    if kind == "plain user":
        return users.objects.create_user("plain", password="pw")
    if kind == "staff without permission":
        return users.objects.create_user("staff", password="pw", is_staff=True)
    if kind == "staff with view permission":
        return api_user(users, "viewer", "view_actor", is_staff=True)
    if kind == "user with use_actor_api":
        return api_user(users, "driver")
    raise AssertionError(kind)


#: the site's own origin (``Origin`` of the test client's pages: ``http://testserver``)
SITE = [(b"host", b"testserver"), (b"origin", b"http://testserver")]


async def _connect(path: str, *, query: str = "", headers=(), user_kind: str | None = None):
    headers = [*SITE, *headers]
    if user_kind is not None:
        user = await database_sync_to_async(_make_user)(user_kind)
        headers.append(await database_sync_to_async(_session_cookie)(user))
    communicator = WebsocketCommunicator(app, path + (f"?{query}" if query else ""), headers=headers)
    connected, code = await subscribe(communicator)
    if connected:
        await communicator.disconnect()
    return connected, code


@pytest.mark.parametrize(
    "role,expected",
    [
        ("anonymous", (False, 4401)),
        ("wrong token", (False, 4401)),
        ("plain user", (False, 4403)),
        ("staff without permission", (False, 4403)),
        ("staff with view permission", (True, None)),
        ("user with use_actor_api", (True, None)),
        ("API token", (True, None)),
        ("API token as a bearer header", (True, None)),
        ("inspector token", (True, None)),
    ],
)
async def test_outside_dev_mode_each_role_gets_the_http_rule(rivet, role, expected):
    await database_sync_to_async(rivet.configure)(
        DEV_MODE=False, API_TOKEN=WS_API_TOKEN, INSPECTOR_TOKEN=WS_INSPECTOR_TOKEN
    )
    handle = await database_sync_to_async(rivet.client.counter.get_or_create)("c")
    path = f"/ws/rivet/actors/{handle.actor_id}/"
    options: dict = {
        "wrong token": {"query": "token=nope"},
        "API token": {"query": f"token={WS_API_TOKEN}"},
        "API token as a bearer header": {"headers": [(b"authorization", f"Bearer {WS_API_TOKEN}".encode())]},
        "inspector token": {"query": f"token={WS_INSPECTOR_TOKEN}"},
    }.get(role, {} if role == "anonymous" else {"user_kind": role})
    connected, code = await _connect(path, **options)
    assert connected is expected[0]
    if not connected:
        assert code == expected[1]


async def test_a_refused_user_cannot_probe_which_actors_exist(rivet):
    await database_sync_to_async(rivet.configure)(DEV_MODE=False)
    assert await _connect("/ws/rivet/actors/nope/", user_kind="plain user") == (False, 4403)
    assert await _connect("/ws/rivet/actors/nope/", user_kind="user with use_actor_api") == (False, 4404)


WS_HOOK_CALLS: list[tuple] = []


def no_orders(request, actor_name, operation, actor_id):
    """AUTHORIZE hook of the test below: ``order`` actors may not be read."""
    WS_HOOK_CALLS.append((actor_name, operation, actor_id, request.auth, request.method))
    return actor_name != "order"


async def test_the_authorize_hook_decides_subscriptions(rivet):
    await database_sync_to_async(rivet.configure)(
        DEV_MODE=False, API_TOKEN=WS_API_TOKEN, AUTHORIZE="tests.realtime.test_consumer.no_orders"
    )
    WS_HOOK_CALLS.clear()
    order = await database_sync_to_async(rivet.client.order.get_or_create)("o")
    counter = await database_sync_to_async(rivet.client.counter.get_or_create)("c")
    query = f"token={WS_API_TOKEN}"
    assert await _connect(f"/ws/rivet/actors/{order.actor_id}/", query=query) == (False, 4403)
    assert (await _connect(f"/ws/rivet/actors/{counter.actor_id}/", query=query))[0]
    assert WS_HOOK_CALLS == [
        ("order", "read", order.actor_id, "api-token", "WEBSOCKET"),
        ("counter", "read", counter.actor_id, "api-token", "WEBSOCKET"),
    ]


async def test_a_new_page_gets_a_push_once_every_worker_can_see_it(rivet, monkeypatch):
    """On Redis a worker may skip pushes for up to WATCH_REFRESH seconds after a page opened (its reading
    of the watched actors predates the page), so the page gets one push of its own after that."""
    from channels.layers import get_channel_layer

    from rivet_workflows.realtime import watchers

    if watchers.mode(get_channel_layer()) != "redis":
        pytest.skip("the in-memory layer's check is exact: no catch-up push")
    monkeypatch.setattr(watchers, "WATCH_REFRESH", 0.2)
    monkeypatch.setattr(watchers, "WATCH_MARGIN", 0.1)
    handle = await database_sync_to_async(rivet.client.order.get_or_create)("catch-up")
    communicator = WebsocketCommunicator(app, f"/ws/rivet/actors/{handle.actor_id}/")
    assert (await communicator.connect())[0]
    assert await communicator.receive_json_from(timeout=5) == {"type": "history", "actor_id": handle.actor_id}
    await communicator.disconnect()


async def test_an_idle_websocket_on_redis_still_gets_events(rivet):
    """A subscription idle for longer than channels-redis's 5 s wait for a message stays open and gets
    the next event (a trial finding: redis-py 8's 5 s socket timeout closed it; the example project's
    layer sets a longer one, check W009)."""
    from channels.layers import get_channel_layer

    from rivet_workflows.realtime import broadcaster, watchers

    if watchers.mode(get_channel_layer()) != "redis":
        pytest.skip("needs the Redis channel layer (REDIS_URL)")
    handle = await database_sync_to_async(rivet.client.order.get_or_create)("idle-page")
    communicator = WebsocketCommunicator(app, f"/ws/rivet/actors/{handle.actor_id}/")
    assert (await communicator.connect())[0]
    await communicator.receive_json_from(timeout=5)  # the catch-up push of a new page
    await asyncio.sleep(6.5)
    broadcaster.broadcast(handle.actor_id, "late", [1])
    assert await communicator.receive_json_from(timeout=5) == {"type": "event", "name": "late", "args": [1]}
    await communicator.disconnect()
