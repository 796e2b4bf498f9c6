"""No error body of the API, of any status, carries a host, a port, SQL or the database driver's text
(docs/reference/http-api.md): a 5xx (and a ``store_rejected``) body says what kind of failure it was and gives a
request id, the detail goes to the server log under that id. Every route is walked (from the OpenAPI
schema) while every query of the database fails with such text."""

from __future__ import annotations

import logging

import pytest
from django.db import DataError, InterfaceError, OperationalError

from tests.api.support import api_user
from tests.api.test_api import API, post
from tests.api.test_authorization_matrix import Caller, api_request, api_routes, call_api, make_world

#: what PostgreSQL and psycopg say when the server has no connection left (case of an exhausted server)
TOO_MANY = (
    'connection to server at "127.0.0.1", port 5432 failed: FATAL:  sorry, too many clients already\n'
    'SELECT "rivet_workflows_actor"."actor_id" FROM "rivet_workflows_actor" WHERE "actor_id" = %s'
)
#: texts no body may carry
SECRETS = ("127.0.0.1", "5432", "FATAL", "too many clients", "SELECT", "rivet_workflows_actor", "psycopg")


def assert_reveals_nothing(response) -> dict:
    body = response.json()
    assert set(body) == {"group", "code", "message", "metadata"}, body
    # the random request id (32 hex digits) may contain "5432" by chance: it is checked apart, as an id
    request_id = body["metadata"].get("request_id", "")
    text = (
        response.content.decode().replace(request_id, "<request id>")
        if request_id
        else response.content.decode()
    )
    for secret in SECRETS:
        assert secret not in text, (secret, text)
    return body


@pytest.fixture
def broken_database(monkeypatch):
    """Switch on to make every query raise ``error(TOO_MANY)``, as a server out of connections does."""
    from django.db.backends.utils import CursorWrapper

    state = {"error": None}
    for name in ("execute", "executemany"):
        original = getattr(CursorWrapper, name)

        def failing(self, *args, _original=original, **kwargs):
            if state["error"] is not None:
                raise state["error"](TOO_MANY)
            return _original(self, *args, **kwargs)

        monkeypatch.setattr(CursorWrapper, name, failing)
    yield state
    state["error"] = None  # the test database is flushed after the test


@pytest.mark.parametrize("error", [OperationalError, InterfaceError, DataError])
def test_no_route_reveals_the_database_when_every_query_fails(rivet, client, broken_database, error, caplog):
    rivet.configure(DEV_MODE=False, API_TOKEN="api-s3cret", INSPECTOR_TOKEN="inspector-s3cret")
    world = make_world(rivet)
    routes = api_routes()
    broken_database["error"] = error
    statuses = set()
    for token in ("api-s3cret", "inspector-s3cret"):
        caller = Caller(token, {"HTTP_AUTHORIZATION": f"Bearer {token}"})
        for method, path, spec in routes:
            url, body = api_request(method, path, spec, world)
            with caplog.at_level(logging.WARNING, logger="rivet_workflows"):
                response = call_api(client, caller, method, url, body)
            if response.status_code in (401, 403):  # this token may not: nothing was queried
                continue
            assert response.status_code >= 400, (method, path)
            body = assert_reveals_nothing(response)
            statuses.add(response.status_code)
            if response.status_code >= 500 or body["code"] == "store_rejected":
                request_id = body["metadata"]["request_id"]
                assert response["X-Request-ID"] == request_id
                assert any(request_id in r.getMessage() and "5432" in r.getMessage() for r in caplog.records)
    assert statuses, "no route answered"


def test_the_503_of_an_exhausted_server_is_generic_with_a_request_id(rivet, client, broken_database):
    rivet.configure(DEV_MODE=False, API_TOKEN="api-s3cret")
    actor_id = rivet.client.counter.get_or_create("c").actor_id
    broken_database["error"] = OperationalError
    response = client.get(
        f"{API}/actors/{actor_id}", HTTP_AUTHORIZATION="Bearer api-s3cret", HTTP_X_REQUEST_ID="abc-123"
    )
    body = assert_reveals_nothing(response)
    assert response.status_code == 503 and response["Retry-After"].isdigit()
    assert body == {
        "group": "server",
        "code": "store_unavailable",
        "message": "the database is unavailable; try again shortly",
        "metadata": {"request_id": "abc-123"},  # the proxy's request id is kept
    }
    odd = client.get(
        f"{API}/actors/{actor_id}", HTTP_AUTHORIZATION="Bearer api-s3cret", HTTP_X_REQUEST_ID="a b\nc"
    )
    assert odd.json()["metadata"]["request_id"] != "a b\nc"  # not a plain token: a new id


def test_an_internal_error_is_a_generic_500_with_the_detail_in_the_log(rivet, client, monkeypatch, caplog):
    from rivet_workflows.engine.operate import inspector

    def broken(*args, **kwargs):
        raise RuntimeError(TOO_MANY)

    monkeypatch.setattr(inspector, "workflow_history", broken)
    actor_id = rivet.client.counter.get_or_create("c").actor_id
    with caplog.at_level(logging.ERROR, logger="rivet_workflows"):
        response = client.get(f"{API}/actors/{actor_id}/inspector/workflow-history")  # dev mode
    body = assert_reveals_nothing(response)
    assert response.status_code == 500 and body["code"] == "internal_error"
    assert body["message"] == "internal server error"
    logged = [r for r in caplog.records if body["metadata"]["request_id"] in r.getMessage()]
    assert logged and "too many clients" in logged[0].getMessage() and logged[0].exc_info


def test_a_database_error_raised_by_an_action_shows_only_its_type(
    rivet, client, django_user_model, monkeypatch
):
    def action(c):
        raise OperationalError(TOO_MANY)

    monkeypatch.setitem(rivet.runtime.registry.get("counter").actions, "own_query", action)
    client.force_login(api_user(django_user_model))
    actor_id = rivet.client.counter.get_or_create("c").actor_id
    response = post(client, f"/actors/{actor_id}/actions/own_query", {"args": []})
    body = assert_reveals_nothing(response)
    assert response.status_code == 400 and body["code"] == "action_failed"
    assert "OperationalError" in body["message"] and "request id" in body["message"]
