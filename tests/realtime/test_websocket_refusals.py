"""The actor WebSocket's refusals (docs/reference/live-events.md): the whole Origin, scheme, host and port, must be
the site's or one of CSRF_TRUSTED_ORIGINS, as Django's CSRF check requires; a refused connection is
accepted and then closed with the documented code (4401 not logged in, 4403 not allowed, 4404 no such
actor) and a reason, never a handshake rejection (an HTTP 403 a client cannot tell apart)."""

from __future__ import annotations

import pytest
from channels.auth import AuthMiddlewareStack
from channels.db import database_sync_to_async
from channels.routing import URLRouter
from channels.testing import WebsocketCommunicator
from django.test import override_settings

from rivet_workflows.realtime.routing import websocket_urlpatterns
from tests.realtime.test_consumer import _session_cookie

pytestmark = pytest.mark.asyncio

app = AuthMiddlewareStack(URLRouter(websocket_urlpatterns))
TOKEN = "api-s3cret"


async def outcome(path: str, headers: list, scheme: str = "ws") -> tuple[str, int | None, str]:
    """("open", None, "") or ("closed", code, reason); a refusal during the handshake fails the test."""
    communicator = WebsocketCommunicator(app, path, headers=headers)
    communicator.scope["scheme"] = scheme
    accepted, code = await communicator.connect()
    assert accepted, f"refused during the handshake ({code}): an HTTP 403 without a close code"
    if await communicator.receive_nothing(timeout=0.05):
        await communicator.disconnect()
        return "open", None, ""
    message = await communicator.receive_output()
    assert message["type"] == "websocket.close"
    await communicator.disconnect()  # the client's side of the closing handshake ends the consumer
    return "closed", message["code"], message.get("reason", "")


@pytest.fixture
def superuser_actor(rivet, django_user_model):
    """(actor path, session cookie header of a superuser) with dev mode off."""
    rivet.configure(DEV_MODE=False, API_TOKEN=TOKEN)
    actor_id = rivet.client.counter.get_or_create("c").actor_id
    root = django_user_model.objects.create_superuser("root", password="pw")
    return f"/ws/rivet/actors/{actor_id}/", _session_cookie(root)


SITE_HOST = (b"host", b"127.0.0.1:8000")


@pytest.mark.parametrize(
    "scheme,origin,expected",
    [
        ("ws", b"http://127.0.0.1:8000", "open"),
        ("ws", b"http://127.0.0.1:6666", 4403),  # another service on the same host
        ("ws", b"http://localhost:1", 4403),
        ("ws", b"https://127.0.0.1", 4403),  # another scheme and port
        ("ws", b"https://127.0.0.1:8000", 4403),  # another scheme
        ("ws", b"http://127.0.0.1", 4403),  # another port
        ("ws", b"http://evil.example", 4403),
        ("ws", b"null", 4403),
        ("ws", None, 4403),  # no Origin with a session login
        ("wss", b"https://127.0.0.1:8000", "open"),
        ("wss", b"http://127.0.0.1:8000", 4403),
    ],
)
async def test_a_session_subscription_needs_the_sites_whole_origin(superuser_actor, scheme, origin, expected):
    path, cookie = superuser_actor
    headers = [SITE_HOST, cookie] + ([(b"origin", origin)] if origin is not None else [])
    state, code, reason = await outcome(path, headers, scheme)
    if expected == "open":
        assert state == "open"
    else:
        assert (state, code) == ("closed", expected) and "origin" in reason.lower()


@pytest.mark.parametrize(
    "origin,expected",
    [
        (b"https://admin.example.com", "open"),
        (b"https://x.corp.example", "open"),  # a wildcard entry: any subdomain
        (b"http://admin.example.com", 4403),  # listed with https only
        (b"https://admin.example.com:8443", 4403),
    ],
)
async def test_csrf_trusted_origins_are_let_in(superuser_actor, origin, expected):
    path, cookie = superuser_actor
    trusted = ["https://admin.example.com", "https://*.corp.example"]
    with override_settings(CSRF_TRUSTED_ORIGINS=trusted):
        state, code, _ = await outcome(path, [SITE_HOST, cookie, (b"origin", origin)])
    assert (state if expected == "open" else code) == expected


async def test_a_host_outside_allowed_hosts_is_no_site_origin(superuser_actor):
    path, cookie = superuser_actor
    headers = [(b"host", b"evil.example"), cookie, (b"origin", b"http://evil.example")]
    assert (await outcome(path, headers))[:2] == ("closed", 4403)


async def test_a_token_client_without_origin_is_let_in_and_a_wrong_origin_is_not(superuser_actor):
    path, _ = superuser_actor
    assert (await outcome(f"{path}?token={TOKEN}", [SITE_HOST]))[0] == "open"
    wrong = [SITE_HOST, (b"origin", b"http://127.0.0.1:6666")]
    assert (await outcome(f"{path}?token={TOKEN}", wrong))[:2] == ("closed", 4403)


@pytest.mark.parametrize(
    "case,code,reason",
    [
        ("anonymous", 4401, "not logged in"),
        ("wrong token", 4401, "not logged in"),
        ("plain user", 4403, "not allowed to read"),
        ("unknown actor", 4404, "no such actor"),
    ],
)
async def test_each_refusal_is_its_documented_close_code_with_a_reason(rivet, case, code, reason):
    def setup():
        from django.contrib.auth import get_user_model

        rivet.configure(DEV_MODE=False, API_TOKEN=TOKEN)
        actor_id = rivet.client.counter.get_or_create("c").actor_id
        plain = get_user_model().objects.create_user("plain", password="pw")
        return actor_id, _session_cookie(plain)

    actor_id, plain_cookie = await database_sync_to_async(setup)()
    site = [(b"host", b"testserver"), (b"origin", b"http://testserver")]
    path, headers = f"/ws/rivet/actors/{actor_id}/", site
    if case == "wrong token":
        path += "?token=nope"
    elif case == "plain user":
        headers = [*site, plain_cookie]
    elif case == "unknown actor":
        path = f"/ws/rivet/actors/nope/?token={TOKEN}"
    state, got, text = await outcome(path, headers)
    assert (state, got) == ("closed", code)
    assert reason in text
