"""Queries (DESIGN.md section 13): read-only handlers that answer from the last committed state at once,
also while a step of the actor runs (where an action waits), over Python and HTTP."""

from __future__ import annotations

import json
import threading
import time

import pytest

from rivet_workflows.engine.model import errors
from tests.api.support import api_user
from tests.api.support import rivet as rivet  # noqa: F401 - the fixture
from tests.integration import query_workflows as qw

API = "/api/rivet"


@pytest.fixture
def querying(rivet):
    rivet.configure(REGISTRY="tests.integration.query_workflows.registry", ACTION_TIMEOUT=10)
    qw.reset()
    yield rivet
    qw.RELEASE.set()


def _run_in_background(rivet) -> threading.Thread:
    from django.db import connections

    def drain() -> None:
        try:
            rivet.drain(timeout=10)
        finally:
            connections.close_all()

    thread = threading.Thread(target=drain, daemon=True)
    thread.start()
    assert qw.STARTED.wait(10), "the slow step did not start"
    return thread


def test_a_query_answers_while_a_step_of_the_actor_runs(querying) -> None:
    handle = querying.client.querier.get_or_create("a")
    thread = _run_in_background(querying)
    started = time.monotonic()
    status = handle.query("status")
    elapsed = time.monotonic() - started
    assert not qw.FINISHED.is_set(), "the query waited for the step"
    assert status == "prepared"  # the last committed state, not the step's uncommitted change
    print(f"query answered in {elapsed * 1000:.1f} ms while the step ran")
    assert handle.query("echo", 1, {"k": 2}) == {
        "status": "prepared",
        "x": 1,
        "y": {"k": 2},
        "vars": {"hits": 0},
    }
    qw.RELEASE.set()
    thread.join(10)
    assert handle.query("status") == "charged"


def test_an_async_query_answers_while_a_step_runs(querying) -> None:
    import asyncio

    handle = querying.client.querier.get_or_create("b")
    thread = _run_in_background(querying)
    assert asyncio.run(handle.aquery("status")) == "prepared"
    assert not qw.FINISHED.is_set()
    qw.RELEASE.set()
    thread.join(10)


def test_writes_in_a_query_raise_step_only_error_and_change_nothing(querying) -> None:
    handle = querying.client.querier.get_or_create("c")
    for name in ("write", "append", "assign", "send"):
        with pytest.raises(errors.StepOnlyError):
            handle.query(name)
    record = querying.runtime.store.get_actor(handle.actor_id)
    assert record.state == {"status": "new", "items": [1, 2]}
    with pytest.raises(errors.QueryNotFoundError):
        handle.query("nope")


def _post(client, path, body):
    return client.post(API + path, data=json.dumps(body), content_type="application/json")


def test_the_http_query_answers_while_a_step_runs_and_maps_errors(
    querying, client, django_user_model
) -> None:
    client.force_login(api_user(django_user_model))
    handle = querying.client.querier.get_or_create("d")
    thread = _run_in_background(querying)
    response = _post(client, f"/actors/{handle.actor_id}/queries/status", {"args": []})
    assert not qw.FINISHED.is_set(), "the HTTP query waited for the step"
    assert response.status_code == 200 and response.json() == {"result": "prepared"}
    echo = _post(client, f"/actors/{handle.actor_id}/queries/echo", {"args": ["x"]}).json()
    assert echo["result"]["x"] == "x"
    qw.RELEASE.set()
    thread.join(10)
    missing = _post(client, f"/actors/{handle.actor_id}/queries/nope", {"args": []})
    assert missing.status_code == 404 and missing.json()["code"] == "query_not_found"
    unknown = _post(client, "/actors/0123456789abcdef0123456789abcdef/queries/status", {"args": []})
    assert unknown.status_code == 404 and unknown.json()["code"] == "actor_not_found"
    bad = _post(client, f"/actors/{handle.actor_id}/queries/status", {"args": "nope"})
    assert 400 <= bad.status_code < 500 and "code" in bad.json()
    wrong_arity = _post(client, f"/actors/{handle.actor_id}/queries/status", {"args": [1, 2, 3]})
    assert wrong_arity.status_code == 400 and wrong_arity.json()["code"] == "query_failed"
    write = _post(client, f"/actors/{handle.actor_id}/queries/write", {"args": []})
    assert write.status_code == 400 and write.json()["code"] == "step_only"


def test_the_http_query_needs_the_access_of_an_action(querying, client) -> None:
    querying.configure(
        REGISTRY="tests.integration.query_workflows.registry", DEV_MODE=False, API_AUTH=None, API_TOKEN="t0k"
    )
    handle = querying.client.querier.get_or_create("e")
    anonymous = _post(client, f"/actors/{handle.actor_id}/queries/status", {"args": []})
    assert anonymous.status_code in (401, 403)
    with_token = client.post(
        API + f"/actors/{handle.actor_id}/queries/status",
        data=json.dumps({"args": []}),
        content_type="application/json",
        headers={"Authorization": "Bearer t0k"},
    )
    assert with_token.status_code == 200 and with_token.json() == {"result": "new"}
