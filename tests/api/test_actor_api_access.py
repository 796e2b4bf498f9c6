"""Who may use the actor API outside dev mode (case C52, DESIGN.md 6, rivet_workflows.access): every role
against every operation, inputs and error stacks, the project's AUTHORIZE hook, and closed DEBUG=0 defaults."""

from __future__ import annotations

import json

import pytest
from django.test import Client, override_settings

from rivet_workflows import models
from tests.api import registry as test_registry
from tests.api.support import BASE, api_user

API = "/api/rivet"
API_TOKEN = "api-s3cret"
INSPECTOR_TOKEN = "inspector-s3cret"

#: operations of the actor API
OPERATIONS = ("list", "read", "create", "call", "send")
READ_ONLY = {"list", "read"}

#: role -> (operations it may do, status of the others)
ROLES = {
    "anonymous": (set(), 401),
    "wrong token": (set(), 401),
    "plain user": (set(), 403),
    "staff without permission": (set(), 403),
    "staff with view permission only": (READ_ONLY, 403),
    "user with use_actor_api": (set(OPERATIONS), None),
    "API token": (set(OPERATIONS), None),
    "inspector token": (READ_ONLY, 403),
}


@pytest.fixture
def world(rivet):
    """Dev mode off with both tokens, a counter (with an input), a waiter on a queue, a failed order."""
    rivet.configure(DEV_MODE=False, API_TOKEN=API_TOKEN, INSPECTOR_TOKEN=INSPECTOR_TOKEN)
    counter = rivet.client.counter.get_or_create("c1", input={"card": "4242 4242"})
    waiter = rivet.client.waiter.get_or_create("w1")
    rivet.drain()
    assert waiter.workflow_state() == "sleeping"
    return {"counter": counter, "waiter": waiter}


def login(client: Client, role: str, django_user_model) -> dict:
    """Log ``client`` in as ``role`` (or return the headers of a token role)."""
    if role == "anonymous":
        return {}
    if role == "wrong token":
        return {"HTTP_AUTHORIZATION": f"Bearer {API_TOKEN}-wrong"}
    if role == "API token":
        return {"HTTP_AUTHORIZATION": f"Bearer {API_TOKEN}"}
    if role == "inspector token":
        return {"HTTP_AUTHORIZATION": f"Bearer {INSPECTOR_TOKEN}"}
    users = {
        "plain user": lambda: django_user_model.objects.create_user("plain", password="pw"),
        "staff without permission": lambda: django_user_model.objects.create_user(
            "staff", password="pw", is_staff=True
        ),
        "staff with view permission only": lambda: api_user(
            django_user_model, "viewer", "view_actor", is_staff=True
        ),
        "user with use_actor_api": lambda: api_user(django_user_model, "driver"),
    }
    client.force_login(users[role]())
    return {}


def do(client: Client, operation: str, world: dict, headers: dict):
    """Perform ``operation`` of the actor API against the world's actors; returns the response."""
    counter, waiter = world["counter"].actor_id, world["waiter"].actor_id
    post = {"content_type": "application/json", **headers}
    if operation == "list":
        return client.get(f"{API}/actors", **headers)
    if operation == "read":
        return client.get(f"{API}/actors/{counter}", **headers)
    if operation == "create":
        return client.post(f"{API}/actors", json.dumps({"name": "counter", "key": "new"}), **post)
    if operation == "call":
        return client.post(f"{API}/actors/{counter}/actions/increment", json.dumps({"args": [5]}), **post)
    if operation == "send":
        return client.post(f"{API}/actors/{waiter}/queues/approval", json.dumps({"body": "forged"}), **post)
    raise AssertionError(operation)


@pytest.mark.parametrize("role", list(ROLES))
def test_each_role_may_do_exactly_its_operations(client, world, django_user_model, role):
    allowed, refused_status = ROLES[role]
    headers = login(client, role, django_user_model)
    for operation in OPERATIONS:
        response = do(client, operation, world, headers)
        if operation in allowed:
            assert response.status_code in (200, 202), (operation, response.content)
        else:
            assert response.status_code == refused_status, (operation, response.content)
            body = response.json()
            assert body["code"] == ("unauthorized" if refused_status == 401 else "forbidden")
    # a refused caller changed nothing: no forged message, no action ran, no actor created
    drove = {"call", "send", "create"} <= allowed
    assert world["counter"].call("increment", 0) == (5 if drove else 0)
    assert models.QueueMessage.objects.filter(actor_id=world["waiter"].actor_id).count() == (
        1 if drove else 0
    )
    assert models.Actor.objects.filter(name="counter", key_text='["new"]').exists() is drove


def test_a_refused_user_cannot_tell_which_actors_exist(client, world, django_user_model):
    client.force_login(django_user_model.objects.create_user("plain", password="pw"))
    for path in (f"/actors/{world['counter'].actor_id}", "/actors/does-not-exist"):
        assert client.get(API + path).status_code == 403


def test_session_writes_of_a_permitted_user_need_csrf(world, django_user_model):
    strict = Client(enforce_csrf_checks=True)
    strict.force_login(api_user(django_user_model, "driver"))
    path = f"{API}/actors/{world['counter'].actor_id}/actions/increment"
    refused = strict.post(path, json.dumps({"args": [1]}), content_type="application/json")
    assert refused.status_code == 403 and refused.json()["code"] == "forbidden"
    strict.get("/admin/login/")  # sets the csrftoken cookie
    token = strict.cookies["csrftoken"].value
    accepted = strict.post(
        path, json.dumps({"args": [1]}), content_type="application/json", HTTP_X_CSRFTOKEN=token
    )
    assert accepted.status_code == 200 and accepted.json() == {"result": 1}


# --- inputs and error stacks -----------------------------------------------------------------------


@pytest.fixture
def failed_with_input(world, rivet):
    """An order with an input whose workflow failed (its error has a stack with server paths)."""
    test_registry.FLAGS["broken"] = True
    try:
        handle = rivet.client.order.get_or_create("o-secret", input={"card": "4242 4242"})
        rivet.drain()
    finally:
        test_registry.FLAGS["broken"] = False
    assert handle.workflow_state() == "failed"
    return handle


@pytest.mark.parametrize(
    "role,sees_details",
    [
        ("user with use_actor_api", False),
        ("API token", False),
        ("staff with view permission only", True),
        ("inspector token", True),
    ],
)
def test_inputs_and_error_stacks_only_for_the_inspector(
    client, failed_with_input, django_user_model, role, sees_details
):
    headers = login(client, role, django_user_model)
    body = client.get(f"{API}/actors/{failed_with_input.actor_id}", **headers).json()
    assert body["error"]["name"] == "StepExhaustedError"
    assert "card declined" in body["error"]["message"]  # the message is not withheld
    if sees_details:
        assert body["input"] == {"card": "4242 4242"}
        assert "Traceback" in body["error"]["stack"] and ".py" in body["error"]["stack"]
        assert body["redacted"] == []
    else:
        assert body["input"] is None and body["error"]["stack"] is None
        assert body["redacted"] == ["input", "error.stack"]
        assert "4242" not in json.dumps(body)


# --- the project hook ------------------------------------------------------------------------------

#: (actor_name, operation, actor_id, who) of every call of ``no_payments`` below
HOOK_CALLS: list[tuple] = []


def no_payments(request, actor_name, operation, actor_id):
    """AUTHORIZE hook of the tests: nobody sends to a ``waiter``, and ``order`` actors are off limits."""
    HOOK_CALLS.append((actor_name, operation, actor_id, request.auth))
    if actor_name == "order":
        return False
    return not (actor_name == "waiter" and operation == "send")


@pytest.fixture
def hooked(world, rivet):
    rivet.configure(
        DEV_MODE=False,
        API_TOKEN=API_TOKEN,
        INSPECTOR_TOKEN=INSPECTOR_TOKEN,
        AUTHORIZE="tests.api.test_actor_api_access.no_payments",
    )
    HOOK_CALLS.clear()
    order = rivet.client.order.get_or_create("o1")
    return {**world, "order": order}


def test_the_authorize_hook_refuses_one_type_and_one_operation(client, hooked):
    auth = {"HTTP_AUTHORIZATION": f"Bearer {API_TOKEN}"}
    counter, waiter, order = (hooked[k].actor_id for k in ("counter", "waiter", "order"))
    sent = do(client, "send", hooked, auth)
    assert (
        sent.status_code == 403 and "not authorized to send actors of type 'waiter'" in sent.json()["message"]
    )
    assert models.QueueMessage.objects.filter(actor_id=waiter).count() == 0
    assert do(client, "call", hooked, auth).status_code == 200  # other operations and types go on
    assert client.get(f"{API}/actors/{waiter}", **auth).status_code == 200
    assert client.get(f"{API}/actors/{order}", **auth).status_code == 403
    created = client.post(
        f"{API}/actors", json.dumps({"name": "order", "key": "o2"}), content_type="application/json", **auth
    )
    assert created.status_code == 403
    assert not models.Actor.objects.filter(name="order", key_text='["o2"]').exists()
    listed = client.get(f"{API}/actors", **auth).json()
    assert {item["name"] for item in listed["items"]} == {"counter", "waiter"} and listed["count"] == 2
    assert client.get(f"{API}/actors?name=order", **auth).status_code == 403
    assert ("waiter", "send", waiter, "api-token") in HOOK_CALLS
    assert ("counter", "call", counter, "api-token") in HOOK_CALLS
    assert ("order", "create", None, "api-token") in HOOK_CALLS
    assert ("order", "list", None, "api-token") in HOOK_CALLS


def test_the_hook_cannot_let_in_a_caller_the_permission_rule_refused(client, hooked, django_user_model):
    client.force_login(django_user_model.objects.create_user("plain", password="pw"))
    assert do(client, "call", hooked, {}).status_code == 403
    assert HOOK_CALLS == []  # refused before the hook was asked


def test_the_hook_is_asked_in_dev_mode_too(client, hooked, rivet):
    rivet.configure(
        DEV_MODE=True,
        API_AUTH="rivet_workflows.api.auth.dev_mode_api_auth",
        AUTHORIZE="tests.api.test_actor_api_access.no_payments",
    )
    assert do(client, "call", hooked, {}).status_code == 200  # anonymous: dev mode
    assert do(client, "send", hooked, {}).status_code == 403


# --- closed defaults -------------------------------------------------------------------------------


@pytest.mark.parametrize("api_auth", [None, "rivet_workflows.api.auth.dev_mode_api_auth"])
def test_with_debug_off_the_defaults_are_closed(client, rivet, django_user_model, api_auth):
    """DEBUG=0 and no DEV_MODE, API_TOKEN or INSPECTOR_TOKEN set: nobody but permission holders gets in."""
    handle = rivet.client.counter.get_or_create("c")
    conf = {k: v for k, v in BASE.items()} | ({"API_AUTH": api_auth} if api_auth else {})
    with override_settings(DEBUG=False, RIVET_WORKFLOWS=conf):
        assert client.get(f"{API}/actors").status_code == 401
        assert client.get(f"{API}/actors", HTTP_AUTHORIZATION="Bearer None").status_code == 401
        history = client.get(f"{API}/actors/{handle.actor_id}/inspector/workflow-history")
        assert history.status_code == 401
        client.force_login(django_user_model.objects.create_user("plain", password="pw"))
        assert client.get(f"{API}/actors").status_code == 403
        client.force_login(api_user(django_user_model, "driver"))
        assert client.get(f"{API}/actors").status_code == 200


def test_dev_mode_without_debug_is_a_system_check_warning(rivet):
    from rivet_workflows.checks import check_settings

    with override_settings(DEBUG=False, RIVET_WORKFLOWS={**BASE, "DEV_MODE": True}):
        assert "rivet_workflows.W006" in {m.id for m in check_settings()}
    with override_settings(DEBUG=False, RIVET_WORKFLOWS=BASE):
        assert "rivet_workflows.W006" not in {m.id for m in check_settings()}


def test_an_authorize_path_that_does_not_import_is_a_system_check_error(rivet):
    from rivet_workflows.checks import check_settings

    with override_settings(RIVET_WORKFLOWS={**BASE, "AUTHORIZE": "tests.api.nope.authorize"}):
        assert "rivet_workflows.E003" in {m.id for m in check_settings()}
    with override_settings(
        RIVET_WORKFLOWS={**BASE, "AUTHORIZE": "tests.api.test_actor_api_access.no_payments"}
    ):
        assert "rivet_workflows.E003" not in {m.id for m in check_settings()}
