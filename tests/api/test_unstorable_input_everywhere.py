"""Case C48: NUL characters, lone surrogates and out-of-range numbers sent to every route that exists (each
operation of the ninja router, the API's docs, every admin URL of the app) in path segments, query strings,
JSON bodies, form fields and headers get a 4xx, never a 500, on SQLite and on PostgreSQL (DATABASE_URL).

PostgreSQL raises ``DataError`` for a NUL in any text parameter and for an integer over ``bigint``; SQLite
fails on integers over 64 bits. Every API answer is the JSON error body with a status its operation declares.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

import pytest
from django.contrib import admin
from django.urls import reverse

from rivet_workflows import models
from rivet_workflows.api import api as ninja_api

API_PREFIX = "/api/rivet"
TOKEN = "tok"

#: text as it arrives in a URL: NUL, a lone surrogate (its WTF-8 bytes, the only way one can be sent)
URL_TEXT = ["a%00b", "%00", "%ED%A0%80", "a%ED%B0%80b"]
#: integers over 64 bits (signed and unsigned), under them, with many digits, and a float overflow
NUMBERS = [str(2**63), str(2**64), str(-(2**63) - 1), "1" + "0" * 30, "1e400", "-1"]
#: JSON values: NUL and lone surrogates in strings and keys, huge numbers, a boolean where a number goes
JSON_VALUES = [
    '"a\\u0000b"',
    '"\\ud800"',
    '"a\\udfffb"',
    '{"k\\u0000": 1}',
    '{"\\ud800": 1}',
    '["\\u0000", "\\ud800"]',
    *NUMBERS,
    "[" + str(2**64) + "]",
    "1" + "0" * 5000,  # more digits than Python converts
    "true",
    "null",
]
#: header values (the WSGI environ) no request should turn into a 500
HEADERS = [
    {"HTTP_AUTHORIZATION": "Bearer a\x00b"},
    {"HTTP_AUTHORIZATION": "Bearer \ud800"},
    {"HTTP_AUTHORIZATION": "Bearer " + "9" * 30},
    {"HTTP_X_CSRFTOKEN": "a\x00b"},
    {"HTTP_ACCEPT": "application/json\x00"},
]
#: a quoted session cookie with an octal escape: Django's cookie parser makes it a NUL, as a browser can send
NUL_SESSION_COOKIE = {"HTTP_COOKIE": 'sessionid="abcdefgh\\000ijkl"'}


@dataclass
class Sent:
    """One request and what came back."""

    what: str
    status: int
    body: bytes
    content_type: str


@dataclass
class Route:
    """A route to attack: ``method``, a ``template`` with ``{name}`` slots, valid values of its parts."""

    method: str
    template: str
    declared: set[int] = field(default_factory=set)
    query: list[str] = field(default_factory=list)
    body_fields: list[str] = field(default_factory=list)
    body_base: dict[str, Any] | None = None
    is_api: bool = True

    @property
    def label(self) -> str:
        return f"{self.method} {self.template}"


# --- the routes that exist -----------------------------------------------------------------------------


def _resolve(schema: dict, node: dict) -> dict:
    if "$ref" in node:
        return _resolve(schema, schema["components"]["schemas"][node["$ref"].rsplit("/", 1)[1]])
    for option in node.get("anyOf", []):
        if "$ref" in option or option.get("type") == "object":
            return _resolve(schema, option)
    return node


#: valid bodies, so that each bad value is the only thing wrong with a request
_BODY_BASES = {
    "create_actor": {"name": "counter", "key": "k"},
    "call_action": {"args": []},
    "run_query": {"args": []},
    "send_to_queue": {"body": 1},
    "replay_workflow": {},
    "fork_workflow": {},
    "recover_workflow": {},
    "pause_workflow": {},
    "resume_workflow": {},
    "retry_workflow": {},
    "cancel_workflow": {},
    "bulk_action": {"filter": {"name": "counter"}, "dryRun": True},
    "create_schedule": {"scheduleId": "s-new", "actor": "counter", "every": 60},
    "backfill_schedule": {"start": "2026-01-01T00:00:00+00:00", "end": "2026-01-01T00:02:00+00:00"},
}


def api_routes() -> list[Route]:
    """Every operation of the ninja router (checked against the OpenAPI schema) plus the docs pages."""
    schema = ninja_api.get_openapi_schema()
    routes = []
    for prefix, router in ninja_api._routers:
        for path, path_view in router.path_operations.items():
            for operation in path_view.operations:
                for method in operation.methods:
                    spec = schema["paths"][API_PREFIX + prefix + path][method.lower()]
                    body = spec.get("requestBody")
                    fields: list[str] = []
                    if body is not None:
                        body_schema = _resolve(schema, body["content"]["application/json"]["schema"])
                        fields = list(body_schema.get("properties", {}))
                    routes.append(
                        Route(
                            method=method,
                            template=API_PREFIX + prefix + path,
                            declared={int(code) for code in spec["responses"]},
                            query=[p["name"] for p in spec.get("parameters", []) if p["in"] == "query"],
                            body_fields=fields,
                            body_base=(
                                _BODY_BASES[operation.view_func.__name__] if body is not None else None
                            ),
                        )
                    )
    for name in ("openapi.json", "docs"):
        routes.append(Route("GET", f"{API_PREFIX}/{name}", declared={200}))
    return routes


#: the query parameters of the admin's list (filters, search, ordering, paging, popups) and a stray one
ADMIN_QUERY = [
    "q",
    "name",
    "name__exact",
    "workflow_state",
    "workflow_state__exact",
    "o",
    "p",
    "e",
    "all",
    "_to_field",
    "_popup",
    "_changelist_filters",
    "entry_id",
]
ADMIN_NUMBERS = ["o", "p", "e", "all"]


def admin_routes() -> list[Route]:
    """Every URL of the app's ``ActorAdmin`` (list, add, history, delete, change, the trace page's JSON,
    replay, recover, the old change URL), each with GET and POST."""
    model_admin = admin.site._registry[models.Actor]
    base = reverse("admin:rivet_workflows_actor_changelist")
    routes = []
    for pattern in model_admin.get_urls():
        template = base + re.sub(r"<(?:\w+:)?(\w+)>", r"{\1}", str(pattern.pattern))
        for method in ("GET", "POST"):
            routes.append(Route(method, template, query=ADMIN_QUERY, is_api=False))
    return routes


ROUTES = api_routes() + admin_routes()


def test_the_enumeration_sees_every_route():
    """A route added later is attacked too: the list is read from the router and the admin, not written."""
    labels = {route.label for route in ROUTES}
    assert "POST /api/rivet/actors/{actor_id}/queues/{queue}" in labels
    assert "POST /admin/rivet_workflows/actor/{actor_id}/replay/" in labels
    assert "GET /admin/rivet_workflows/actor/{object_id}/change/" in labels
    operations = sum(
        len(view.operations) for _, r in ninja_api._routers for view in r.path_operations.values()
    )
    assert len([r for r in ROUTES if r.is_api]) == operations + 2


# --- sending -------------------------------------------------------------------------------------------


@pytest.fixture
def world(rivet, client, django_user_model):
    """Production auth (a bearer token for the API), a superuser session for the admin, and one actor of
    each kind so a valid id leads past the lookup."""
    rivet.configure(DEV_MODE=False, API_TOKEN=TOKEN, INSPECTOR_TOKEN=TOKEN, ACTION_TIMEOUT=0.5)
    user = django_user_model.objects.create_superuser("root", password=None)
    client.force_login(user)
    counter = rivet.client.counter.get_or_create("c")
    waiter = rivet.client.waiter.get_or_create("w")
    order = rivet.failed_order("o")
    schedule = "s-1"
    rivet.client.schedules.create(schedule, actor="counter", key="sk", every=3600, paused=True)
    return {"client": client, "counter": counter, "waiter": waiter, "order": order, "schedule": schedule}


def _valid_parts(world: dict, route: Route) -> dict[str, str]:
    if "/actions/" in route.template:
        return {"actor_id": world["counter"].actor_id, "action": "increment"}
    if "/queries/" in route.template:
        return {"actor_id": world["counter"].actor_id, "query": "count"}
    if "/queues/" in route.template:
        return {"actor_id": world["waiter"].actor_id, "queue": "approval"}
    if "/streams/" in route.template:  # the failed order's streams are closed: an SSE answer ends at once
        return {"actor_id": world["order"].actor_id, "name": "answer"}
    if "/bulk/" in route.template:  # a dry run (the body base) changes nothing
        return {"bulk_action": "resume"}
    if "/schedules/" in route.template:
        return {"schedule_id": world["schedule"]}
    return {"actor_id": world["order"].actor_id, "object_id": world["order"].actor_id}


def _slots(template: str) -> list[str]:
    return re.findall(r"{(\w+)}", template)


def _send(world: dict, route: Route, parts: dict, query: str = "", body: str | None = None, **extra) -> Sent:
    url = route.template.format(**{k: parts[k] for k in _slots(route.template)})
    if query:
        url += "?" + query
    if route.is_api and "HTTP_COOKIE" not in extra:
        extra.setdefault("HTTP_AUTHORIZATION", f"Bearer {TOKEN}")
    client = world["client"]
    what = f"{route.method} {url} body={body!r} {extra}"
    if route.method == "GET":
        response = client.get(url, **extra)
    elif body is not None:
        content_type = "application/json" if route.is_api else "application/x-www-form-urlencoded"
        response = client.post(url, data=body, content_type=content_type, **extra)
    else:
        response = client.post(url, **extra)
    content = b"".join(response.streaming_content) if response.streaming else response.content
    return Sent(what, response.status_code, content, response.get("Content-Type", ""))


def _requests(world: dict, route: Route):
    """Every bad request for ``route``: each part replaced by each bad value, one at a time."""
    parts = _valid_parts(world, route)
    base_body = json.dumps(route.body_base) if route.body_base is not None else None
    for slot in _slots(route.template):
        for value in URL_TEXT + NUMBERS:
            yield _send(world, route, {**parts, slot: value}, body=base_body)
    for name in route.query + ["stray"]:
        for value in URL_TEXT:
            yield _send(world, route, parts, f"{name}={value}", body=base_body)
        for value in NUMBERS if (route.is_api or name in ADMIN_NUMBERS) else []:
            yield _send(world, route, parts, f"{name}={value}", body=base_body)
    yield _send(world, route, parts, "a%00b=1", body=base_body)
    for name in route.body_fields:
        for value in JSON_VALUES:
            text = json.dumps({**route.body_base, name: "__BAD__"}).replace('"__BAD__"', value)
            yield _send(world, route, parts, body=text)
    if not route.is_api and route.method == "POST":
        for name in ("entry_id", "action", "_selected_action", "index", "a\x00b"):
            for value in ["a\x00b", "\ud800", *NUMBERS]:
                form = f"{name}={value}".encode("utf-8", "surrogatepass")
                yield _send(world, route, parts, body=form.decode("latin-1"))
    for headers in HEADERS + [NUL_SESSION_COOKIE]:
        yield _send(world, route, parts, body=base_body, **headers)
    if route.method == "POST":
        yield _send(world, route, parts, body=base_body or "", CONTENT_LENGTH=str(2**64))


def _problem(route: Route, sent: Sent) -> str | None:
    if sent.status >= 500:
        return f"{sent.status} for {sent.what}"
    if "json" not in sent.content_type and (sent.status < 400 or not route.is_api):
        return None  # the docs page, the admin's pages, its redirects and HTML 403/404 pages
    try:
        body = json.loads(sent.body)
    except ValueError:
        return f"{sent.status} without a JSON body for {sent.what}"
    if sent.status >= 400:
        if set(body) != {"group", "code", "message", "metadata"}:
            return f"{sent.status} with the body {body} for {sent.what}"
        if route.is_api and route.declared and sent.status not in route.declared | {405}:
            return f"{sent.status} is not declared ({sorted(route.declared)}) for {sent.what}"
    return None


@pytest.mark.parametrize("route", ROUTES, ids=[route.label for route in ROUTES])
def test_bad_text_and_numbers_never_get_a_server_error(world, route):
    problems = [p for sent in _requests(world, route) if (p := _problem(route, sent)) is not None]
    assert not problems, f"{len(problems)} bad answers:\n" + "\n".join(problems[:20])


def test_a_nul_in_a_query_or_path_is_a_422_naming_the_parameter(world):
    client = world["client"]
    auth = {"HTTP_AUTHORIZATION": f"Bearer {TOKEN}"}
    listed = client.get(f"{API_PREFIX}/actors?name=a%00b", **auth)
    assert listed.status_code == 422
    (problem,) = listed.json()["metadata"]["errors"]
    assert problem["loc"] == ["query", "name"] and "NUL" in problem["msg"]
    got = client.get(f"{API_PREFIX}/actors/ab%00cd", **auth)
    assert got.status_code == 422 and got.json()["metadata"]["errors"][0]["loc"] == ["path", "actor_id"]
    assert client.get(f"{API_PREFIX}/actors?offset={2**63}", **auth).status_code == 422


def test_the_admin_answers_bad_text_with_a_json_400(world):
    client = world["client"]
    base = reverse("admin:rivet_workflows_actor_changelist")
    searched = client.get(base + "?q=a%00b")
    assert searched.status_code == 400
    assert searched.json()["code"] == "invalid_input"
    assert searched.json()["metadata"]["where"] == ["query", "q"]
    actor_id = world["order"].actor_id
    replay = client.post(base + f"{actor_id}/replay/", {"entry_id": "charge\x00"})
    assert replay.status_code == 400 and replay.json()["metadata"]["where"] == ["form", "entry_id"]
    assert world["order"].workflow_state() == "failed"  # nothing was replayed
    cookie = client.get(base + f"{actor_id}/change/", **NUL_SESSION_COOKIE)
    assert cookie.status_code == 400 and cookie.json()["metadata"]["where"] == ["cookie", "sessionid"]
    missing = client.get(base + "0123456789abcdef0123456789abcdef/trace.json")
    assert missing.status_code == 404 and missing.json()["code"] == "actor_not_found"
