"""The manual's authorization table is the rule: this test reads it from docs/howto/authorization.md and
walks every cell
against the real HTTP routes (enumerated from the OpenAPI schema, each naming its operation as
``x-rivet-operation``), the admin's pages, buttons and bulk actions, and the WebSocket, so the manual and
the code cannot drift. Also: every route of the API refuses, and changes nothing, when the AUTHORIZE hook
refuses (a new route is walked without editing this file)."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from asgiref.sync import async_to_sync
from channels.auth import AuthMiddlewareStack
from channels.routing import URLRouter
from channels.testing import WebsocketCommunicator
from django.test import Client

from rivet_workflows import access, models
from rivet_workflows.realtime.routing import websocket_urlpatterns
from tests.api import registry as test_registry
from tests.api.support import api_user

API = "/api/rivet"
ADMIN = "/admin/rivet_workflows/actor"
API_TOKEN = "api-s3cret"
INSPECTOR_TOKEN = "inspector-s3cret"
PAGE = Path(__file__).resolve().parents[2] / "docs" / "howto" / "authorization.md"
HOOK = "tests.api.test_authorization_matrix.refuse_every_type"
#: the site's own origin as the WebSocket handshake of the test client's pages sends it
SITE = [(b"host", b"testserver"), (b"origin", b"http://testserver")]
ws_app = AuthMiddlewareStack(URLRouter(websocket_urlpatterns))

#: (actor_name, operation, actor_id) of every call of ``refuse_every_type``
HOOK_CALLS: list[tuple] = []


def refuse_every_type(request, actor_name, operation, actor_id):
    """AUTHORIZE hook of the refused row: no caller may do anything to any actor type."""
    HOOK_CALLS.append((actor_name, operation, actor_id))
    return False


# --- the table -----------------------------------------------------------------------------------------


def _cells(line: str) -> list[str]:
    return [cell.strip() for cell in line.strip().strip("|").split("|")]


def authorization_table() -> tuple[list[str], dict[str, dict[str, str]]]:
    """The manual's one authorization table (docs/howto/authorization.md): (operations of its columns, caller
    row -> operation -> cell)."""
    section = PAGE.read_text(encoding="utf-8")
    tables = re.findall(r"(?:^\|.*\|\n)+", section, flags=re.MULTILINE)
    assert len(tables) == 1, "the authorization page has exactly one table"
    lines = tables[0].splitlines()
    operations = [cell.strip("`") for cell in _cells(lines[0])[1:]]
    rows = {}
    for line in lines[2:]:
        cells = _cells(line)
        rows[cells[0]] = dict(zip(operations, cells[1:], strict=True))
    return operations, rows


OPERATIONS, TABLE = authorization_table()
REFUSED_ROW = "any caller above, for an actor type the `AUTHORIZE` hook refuses"


def api_routes() -> list[tuple[str, str, dict]]:
    """(method, path template, OpenAPI operation) of every route of the API."""
    from rivet_workflows.api import api

    schema = api.get_openapi_schema()
    return [
        (method.upper(), path.removeprefix("/api/rivet"), operation)
        for path, methods in schema["paths"].items()
        for method, operation in methods.items()
    ]


def test_the_table_has_one_column_per_operation_and_every_route_names_one():
    assert tuple(OPERATIONS) == access.OPERATIONS
    named = {operation.get("x-rivet-operation") for _, _, operation in api_routes()}
    assert None not in named, "every route names its operation (x-rivet-operation)"
    assert named <= set(OPERATIONS)
    assert all(cell in ("yes", "401", "403", "left out") for row in TABLE.values() for cell in row.values())


# --- the callers of each row ----------------------------------------------------------------------------


@dataclass
class Caller:
    """How a caller of a row talks to the API, the admin and the WebSocket."""

    name: str
    headers: dict = field(default_factory=dict)
    user: Any = None
    ws_query: str = ""
    settings: dict = field(default_factory=dict)


def callers(row: str, django_user_model) -> list[Caller]:
    """The callers standing for ``row`` of the table (some rows name two kinds of caller: both walk)."""

    def staff(name: str, *codenames: str) -> Any:
        user = django_user_model.objects.create_user(name, password="pw", is_staff=True)
        from django.contrib.auth.models import Permission

        for codename in codenames:
            user.user_permissions.add(Permission.objects.get(codename=codename))
        return django_user_model.objects.get(pk=user.pk)

    dev = {"DEV_MODE": True, "API_AUTH": "rivet_workflows.api.auth.dev_mode_api_auth"}
    api_token = Caller(
        "API token", {"HTTP_AUTHORIZATION": f"Bearer {API_TOKEN}"}, ws_query=f"token={API_TOKEN}"
    )
    inspector_token = Caller(
        "inspector token",
        {"HTTP_AUTHORIZATION": f"Bearer {INSPECTOR_TOKEN}"},
        ws_query=f"token={INSPECTOR_TOKEN}",
    )

    def superuser() -> Caller:
        return Caller("superuser", user=django_user_model.objects.create_superuser("root", password="pw"))

    kinds = {
        "anonymous, or a wrong bearer token": lambda: [
            Caller("anonymous"),
            Caller("wrong token", {"HTTP_AUTHORIZATION": "Bearer nope"}, ws_query="token=nope"),
        ],
        "dev mode (anonymous while `DEV_MODE` is on)": lambda: [Caller("dev mode", settings=dev)],
        "`Authorization: Bearer <API_TOKEN>`": lambda: [api_token],
        "`Authorization: Bearer <INSPECTOR_TOKEN>`": lambda: [inspector_token],
        "a logged-in user without permission (staff or not)": lambda: [
            Caller("plain user", user=django_user_model.objects.create_user("plain", password="pw")),
            Caller("staff without permission", user=staff("staff")),
        ],
        "a user with `use_actor_api`": lambda: [Caller("driver", user=api_user(django_user_model, "driver"))],
        "staff with `view_actor`": lambda: [Caller("viewer", user=staff("viewer", "view_actor"))],
        "staff with `replay_workflow` only": lambda: [
            Caller("replayer", user=staff("replayer", "replay_workflow"))
        ],
        "staff with `view_actor` and `replay_workflow`": lambda: [
            Caller("operator", user=staff("operator", "view_actor", "replay_workflow"))
        ],
        "superuser": lambda: [superuser()],
        REFUSED_ROW: lambda: [
            Caller(c.name, c.headers, c.user, c.ws_query, {**c.settings, "AUTHORIZE": HOOK})
            for c in (superuser(), inspector_token, api_token, Caller("dev mode", settings=dev))
        ],
    }
    assert set(kinds) == set(TABLE), "a row of the manual's table this test does not know, or one it lost"
    return kinds[row]()


# --- the world and the probes ---------------------------------------------------------------------------


def make_world(rivet) -> dict:
    """A failed order with an input (the inspector's actor), a counter, a sleeping waiter, and a failed
    order and a waiter for the bulk actions."""
    test_registry.FLAGS["broken"] = True
    try:
        order = rivet.client.order.get_or_create("o", input={"card": "4242 4242"})
        bulk_order = rivet.client.order.get_or_create("o-bulk")
        rivet.drain()
    finally:
        test_registry.FLAGS["broken"] = False
    models.Schedule.objects.all().delete()
    for schedule_id in ("sched", "doomed"):
        rivet.client.schedules.create(schedule_id, actor="counter", every=3600)
    world = {
        "schedule": "sched",  # the schedule routes' target; ``doomed`` is the one DELETE removes
        "doomed": "doomed",
        "order": order.actor_id,
        "bulk_order": bulk_order.actor_id,
        "counter": rivet.client.counter.get_or_create("c").actor_id,
        "waiter": rivet.client.waiter.get_or_create("w").actor_id,
        "bulk_waiter": rivet.client.waiter.get_or_create("w-bulk").actor_id,
    }
    rivet.drain()
    return world


def _resolve(schema: dict, components: dict) -> dict:
    while "$ref" in schema:
        schema = components[schema["$ref"].rsplit("/", 1)[1]]
    return schema


def sample(schema: dict, components: dict, name: str = "") -> Any:
    """A valid value of a JSON schema of the API (its required fields only), for a body any route takes."""
    schema = _resolve(schema, components)
    options = schema.get("anyOf") or schema.get("oneOf")
    if options:
        return sample(next(o for o in options if o.get("type") != "null"), components, name)
    kind = schema.get("type")
    if kind == "object":
        props = schema.get("properties", {})
        return {key: sample(props[key], components, key) for key in schema.get("required", [])}
    if kind == "string":
        if schema.get("format") == "date-time":
            return "2026-01-01T00:00:00Z"
        return "counter" if name in ("name", "actor") else "x"
    return {"integer": 0, "number": 0, "boolean": False, "array": []}.get(kind)


def api_request(method: str, path: str, operation: dict, world: dict) -> tuple[str, str | None]:
    """The URL and JSON body of a request that ``operation`` takes, on the world's actor of its kind."""
    from rivet_workflows.api import api

    components = api.get_openapi_schema()["components"]["schemas"]
    actor = (
        world["waiter"]
        if "{queue}" in path
        else world["counter"]
        if "{action}" in path or "{query}" in path
        else world["order"]
    )
    # a bulk action by filter: resume (nothing in the world is paused, so it changes nothing the walk reads)
    values = {
        "actor_id": actor,
        "action": "increment",
        "query": "count",
        "queue": "approval",
        "bulk_action": "resume",
    }
    values["schedule_id"] = world["doomed"] if method == "DELETE" else world["schedule"]
    url = API + re.sub(r"\{(\w+)\}", lambda m: values.get(m.group(1), "x"), path)
    body = None
    if "requestBody" in operation:
        content = operation["requestBody"]["content"]["application/json"]["schema"]
        body = json.dumps(sample(content, components))
    if (method, path) == ("POST", "/schedules"):  # a valid definition whose id is taken: 409 when let in
        body = json.dumps({"scheduleId": world["schedule"], "actor": "counter", "every": 3600})
    if path == "/actors/bulk/{bulk_action}":  # a bulk action needs a filter: one the walk's world matches
        body = json.dumps({"filter": {"name": "counter"}})
    return url, body


def call_api(client: Client, caller: Caller, method: str, url: str, body: str | None):
    if method == "GET":
        return client.get(url, **caller.headers)
    if method == "DELETE":
        return client.delete(url, **caller.headers)
    return client.post(url, body or "null", content_type="application/json", **caller.headers)


def outcome_of_api(response, operation: str, world: dict) -> str:
    """``yes`` (the operation was let through: a success, or the engine's own 409), ``left out`` (a list
    without the refused types), or the refusal's status."""
    status = response.status_code
    if status in (401, 403):
        body = response.json()
        assert set(body) == {"group", "code", "message", "metadata"}, body  # no actor data
        assert body["code"] == ("unauthorized" if status == 401 else "forbidden")
        return str(status)
    assert status < 500, response.content
    if operation == access.LIST and status == 200:
        items = response.json()["items"]
        if response.wsgi_request.path.endswith("/schedules"):
            listed, wanted = {item["scheduleId"] for item in items}, world["schedule"]
        else:
            listed, wanted = {item["actor_id"] for item in items}, world["order"]
        return "yes" if wanted in listed else "left out"
    assert status in (200, 202, 409), (status, response.content)
    return "yes"


def ws_outcome(caller: Caller, actor_id: str, client: Client) -> str:
    """``yes`` for a subscription that stays open, else ``401``/``403``/``404`` from the close code."""
    headers = list(SITE)
    if caller.user is not None:
        headers.append((b"cookie", f"sessionid={client.cookies['sessionid'].value}".encode()))

    async def subscribe() -> str:
        query = f"?{caller.ws_query}" if caller.ws_query else ""
        communicator = WebsocketCommunicator(ws_app, f"/ws/rivet/actors/{actor_id}/{query}", headers=headers)
        accepted, code = await communicator.connect()
        assert accepted, f"a handshake refusal ({code}): the client would get an HTTP 403, no close code"
        if await communicator.receive_nothing(timeout=0.05):
            await communicator.disconnect()
            return "yes"
        message = await communicator.receive_output()
        assert message["type"] == "websocket.close" and message["reason"], message
        await communicator.disconnect()  # the client's side of the closing handshake ends the consumer
        return str(message["code"] - 4000)

    return async_to_sync(subscribe)()


def admin_outcome(response, listed_id: str | None = None) -> str:
    """``yes``, ``401`` (the login page, to a caller not logged in) or ``403`` (a 403, or the login page to
    a user who is not staff) for an admin page or button; a changelist without the actor refused it too
    (the hook left its type out)."""
    if response.status_code == 302 and "/login/" in response["Location"]:
        return "403" if response.wsgi_request.user.is_authenticated else "401"
    if response.status_code == 403:
        return "403"
    assert response.status_code in (200, 302), response.status_code
    if listed_id is not None and listed_id not in response.content.decode():
        return "403"
    return "yes"


def bulk_outcome(client: Client, action: str, actor_id: str) -> str:
    """Run the bulk ``action`` (confirmed) on ``actor_id``: ``yes`` when its audit row was written."""
    rows = models.OperatorAction.objects.filter(actor_id=actor_id, action=f"bulk_{action}")
    before = rows.count()
    response = client.post(
        f"{ADMIN}/",
        {"action": f"{action}_selected", "_selected_action": [actor_id], "post": "yes", "reason": "r"},
    )
    assert response.status_code in (200, 302, 403), response.status_code
    if response.status_code == 302 and "/login/" in response["Location"]:
        return "403" if response.wsgi_request.user.is_authenticated else "401"
    return "yes" if rows.count() > before else "403"


def admin_probes(client: Client, operation: str, world: dict) -> list[tuple[str, str]]:
    """(what, outcome) of the admin's pages and buttons of ``operation``."""
    order = world["order"]
    if operation == access.INSPECT:
        return [
            ("changelist", admin_outcome(client.get(f"{ADMIN}/"), listed_id=order)),
            ("trace page", admin_outcome(client.get(f"{ADMIN}/{order}/change/"))),
            ("trace json", admin_outcome(client.get(f"{ADMIN}/{order}/trace.json"))),
        ]
    if operation == access.REPLAY:
        return [
            ("replay button", admin_outcome(client.post(f"{ADMIN}/{order}/replay/", {"entry_id": ""}))),
            ("recover button", admin_outcome(client.post(f"{ADMIN}/{order}/recover/"))),
            ("fork button", admin_outcome(client.post(f"{ADMIN}/{order}/fork/", {"input": "null"}))),
            ("bulk recover", bulk_outcome(client, "recover", world["bulk_order"])),
        ]
    if operation == access.OPERATE:
        return [
            ("pause button", admin_outcome(client.post(f"{ADMIN}/{order}/pause/", {"reason": ""}))),
            ("resume button", admin_outcome(client.post(f"{ADMIN}/{order}/resume/"))),
            ("bulk pause", bulk_outcome(client, "pause", world["bulk_waiter"])),
            ("bulk resume", bulk_outcome(client, "resume", world["bulk_waiter"])),
            ("bulk cancel", bulk_outcome(client, "cancel", world["bulk_waiter"])),
        ]
    return []  # the admin has no page of its own for the actor API's operations


def expected_outside_api(cell: str) -> str:
    """The admin and the WebSocket have no list of their own to leave a type out of: there it is a 403."""
    return "403" if cell == "left out" else cell


@pytest.mark.parametrize("row", list(TABLE))
def test_each_cell_of_the_readme_table_is_what_the_api_admin_and_websocket_do(rivet, django_user_model, row):
    for caller in callers(row, django_user_model):
        base = {"DEV_MODE": False, "API_TOKEN": API_TOKEN, "INSPECTOR_TOKEN": INSPECTOR_TOKEN}
        rivet.configure(**{**base, **caller.settings})
        models.Actor.objects.all().delete()
        world = make_world(rivet)
        client = Client()
        if caller.user is not None:
            client.force_login(caller.user)
        HOOK_CALLS.clear()
        routes = api_routes()
        for operation in OPERATIONS:
            cell = TABLE[row][operation]
            walked = 0
            for method, path, spec in routes:
                if spec["x-rivet-operation"] != operation:
                    continue
                walked += 1
                url, body = api_request(method, path, spec, world)
                got = outcome_of_api(call_api(client, caller, method, url, body), operation, world)
                assert got == cell, (caller.name, operation, method, path, got, cell)
            assert walked, f"no route does {operation!r}"
            if operation == access.READ:
                detail = client.get(f"{API}/actors/{world['order']}", **caller.headers)
                if detail.status_code == 200:  # inputs and stacks go with `inspect`
                    shown = detail.json()["input"] == {"card": "4242 4242"}
                    assert shown is (TABLE[row][access.INSPECT] == "yes"), caller.name
                ws = ws_outcome(caller, world["order"], client)
                assert ws == expected_outside_api(cell), (caller.name, "websocket", ws, cell)
            if caller.user is not None or caller.name == "anonymous":
                for what, got in admin_probes(client, operation, world):
                    assert got == expected_outside_api(cell), (caller.name, operation, what, got, cell)
        if row == REFUSED_ROW and caller.name in ("superuser", "dev mode"):
            asked = {operation for _, operation, _ in HOOK_CALLS}
            assert asked == set(OPERATIONS), "the hook is asked with every operation"


# --- every route with a refusing hook -------------------------------------------------------------------


def snapshot() -> dict:
    """What a refused request must leave as it was: the actors, their histories, messages and audit."""
    return {
        "actors": sorted(
            models.Actor.objects.values_list("actor_id", "workflow_state", "paused_at", "state")
        ),
        "entries": models.HistoryEntry.objects.count(),
        "messages": models.QueueMessage.objects.count(),
        "audit": models.OperatorAction.objects.count(),
        "schedules": sorted(models.Schedule.objects.values_list("schedule_id", "paused", "next_fire_at")),
        "fires": models.ScheduleFire.objects.count(),
    }


@pytest.mark.parametrize("who", ["dev mode", "superuser", "inspector token", "API token"])
def test_every_route_refuses_and_changes_nothing_when_the_hook_refuses(rivet, django_user_model, who):
    settings = {"DEV_MODE": who == "dev mode", "API_AUTH": "rivet_workflows.api.auth.dev_mode_api_auth"}
    rivet.configure(API_TOKEN=API_TOKEN, INSPECTOR_TOKEN=INSPECTOR_TOKEN, **settings)
    world = make_world(rivet)
    rivet.configure(API_TOKEN=API_TOKEN, INSPECTOR_TOKEN=INSPECTOR_TOKEN, AUTHORIZE=HOOK, **settings)
    client = Client()
    headers = {
        "inspector token": {"HTTP_AUTHORIZATION": f"Bearer {INSPECTOR_TOKEN}"},
        "API token": {"HTTP_AUTHORIZATION": f"Bearer {API_TOKEN}"},
    }.get(who, {})
    if who == "superuser":
        client.force_login(django_user_model.objects.create_superuser("root", password="pw"))
    caller = Caller(who, headers)
    before = snapshot()
    routes = api_routes()
    assert len(routes) >= 11
    for method, path, spec in routes:
        url, body = api_request(method, path, spec, world)
        response = call_api(client, caller, method, url, body)
        if spec["x-rivet-operation"] == access.LIST:
            assert response.status_code == 200 and response.json()["items"] == [], (method, path)
            continue
        assert response.status_code in (403, 404), (who, method, path, response.status_code, response.content)
        assert set(response.json()) == {"group", "code", "message", "metadata"}
    after = snapshot()
    assert after == before


# --- the two faults the table closed, spelled out ------------------------------------------------------


def refuse_orders(request, actor_name, operation, actor_id):
    """AUTHORIZE hook: ``order`` actors are off limits to everyone but the API token."""
    return actor_name != "order" or request.auth == access.API_TOKEN


def test_the_inspector_routes_ask_the_hook(rivet, client):
    rivet.configure(DEV_MODE=False, INSPECTOR_TOKEN=INSPECTOR_TOKEN, AUTHORIZE=f"{__name__}.refuse_orders")
    handle = rivet.failed_order()
    auth = {"HTTP_AUTHORIZATION": f"Bearer {INSPECTOR_TOKEN}"}
    base = f"{API}/actors/{handle.actor_id}/inspector"
    for path in ("workflow-history", "audit"):
        response = client.get(f"{base}/{path}", **auth)
        assert response.status_code == 403 and "entryMetadata" not in response.content.decode(), path
    for path in ("workflow/pause", "workflow/resume", "workflow/recover", "workflow/replay", "workflow/fork"):
        assert client.post(f"{base}/{path}", "{}", content_type="application/json", **auth).status_code == 403
    assert handle.workflow_state() == "failed" and not models.OperatorAction.objects.exists()
    assert models.Actor.objects.count() == 1  # no fork either


def test_the_replay_permission_without_view_operates_nothing(rivet, client, django_user_model):
    from django.contrib.auth.models import Permission

    rivet.configure(DEV_MODE=False)
    handle = rivet.failed_order()
    user = django_user_model.objects.create_user("replayer", password="pw", is_staff=True)
    user.user_permissions.add(Permission.objects.get(codename="replay_workflow"))
    client.force_login(user)
    base = f"{API}/actors/{handle.actor_id}/inspector/workflow"
    for path in ("pause", "resume", "recover", "replay", "fork"):
        assert client.post(f"{base}/{path}", "{}", content_type="application/json").status_code == 403, path
    assert client.post(f"{ADMIN}/{handle.actor_id}/pause/", {"reason": ""}).status_code == 403
    assert client.post(f"{ADMIN}/{handle.actor_id}/replay/", {"entry_id": ""}).status_code == 403
    assert client.post(f"{ADMIN}/{handle.actor_id}/fork/", {"input": "null"}).status_code == 403
    assert handle.workflow_state() == "failed" and not models.OperatorAction.objects.exists()
