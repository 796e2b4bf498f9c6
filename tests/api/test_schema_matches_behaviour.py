"""Case C59: what the OpenAPI schema says is what the API does (bounds, bodies, types, statuses)."""

from __future__ import annotations

import pytest

from tests.api.test_api import API, api, assert_error, post  # noqa: F401 - fixture


def operation(method: str, path: str) -> dict:
    from rivet_workflows.api import api as ninja_api

    return ninja_api.get_openapi_schema()["paths"][API + path][method]


def component(name: str) -> dict:
    from rivet_workflows.api import api as ninja_api

    return ninja_api.get_openapi_schema()["components"]["schemas"][name]


@pytest.mark.parametrize("action", ["replay", "recover"])
def test_replay_and_recover_accept_a_null_body(api, rivet, action):  # noqa: F811
    """The body of both is optional, so ``null`` is no body (it was a 400 malformed_json)."""
    handle = rivet.failed_order()
    response = post(api, f"/actors/{handle.actor_id}/inspector/workflow/{action}", "null")
    assert response.status_code == 200, response.content
    assert response.json()["actorId"] == handle.actor_id
    assert handle.workflow_state() != "failed"


def test_the_page_bounds_are_in_the_schema_and_enforced(api, rivet):  # noqa: F811
    params = {p["name"]: p["schema"] for p in operation("get", "/actors")["parameters"]}
    assert (params["limit"]["minimum"], params["limit"]["maximum"]) == (1, 500)
    assert (params["offset"]["minimum"], params["offset"]["maximum"]) == (0, 2**53 - 1)
    rivet.client.counter.get_or_create("c")
    for query in ("limit=0", "limit=501", "offset=-1", f"offset={2**53}", f"offset={10**19}"):
        body = assert_error(api.get(f"{API}/actors?{query}"), 422, "validation_error")
        assert body["metadata"]["errors"][0]["loc"] == ["query", query.split("=")[0]]
    assert len(api.get(f"{API}/actors?limit=1").json()["items"]) == 1
    assert api.get(f"{API}/actors?limit=500").status_code == 200
    last = api.get(f"{API}/actors?offset={2**53 - 1}").json()
    assert last["items"] == [] and last["count"] == 1


@pytest.mark.parametrize("timeout", [True, False, "1", [1]])
def test_timeout_is_a_number_not_a_boolean(api, rivet, timeout):  # noqa: F811
    from rivet_workflows import models

    handle = rivet.client.waiter.get_or_create("w")
    sent = post(
        api, f"/actors/{handle.actor_id}/queues/approval", {"body": 1, "wait": True, "timeout": timeout}
    )
    body = assert_error(sent, 422, "validation_error")
    assert body["metadata"]["errors"][0]["loc"][-1] == "timeout"
    assert models.QueueMessage.objects.count() == 0


def test_timeout_bounds_are_in_the_schema(api, rivet):  # noqa: F811
    (number, _null) = component("SendIn")["properties"]["timeout"]["anyOf"]
    assert number == {"type": "number", "minimum": 0, "maximum": 300.0}
    handle = rivet.client.waiter.get_or_create("w")
    over = post(
        api, f"/actors/{handle.actor_id}/queues/approval", {"body": 1, "wait": True, "timeout": 300.5}
    )
    assert_error(over, 422, "validation_error")
    whole = post(api, f"/actors/{handle.actor_id}/queues/approval", {"body": 1, "wait": True, "timeout": 0})
    assert whole.status_code == 200 and whole.json()["status"] == "timed_out"


def test_a_nul_in_a_key_is_a_declared_422(api):  # noqa: F811
    key = component("CreateActorIn")["properties"]["key"]["anyOf"]
    assert key[0]["pattern"] == key[2]["items"]["anyOf"][0]["pattern"] == "^[^\\x00]*$"
    assert 422 in {int(code) for code in operation("post", "/actors")["responses"]}
    for value in ("a\u0000b", ["ok", "a\u0000b"]):
        body = assert_error(post(api, "/actors", {"name": "counter", "key": value}), 422, "validation_error")
        assert body["metadata"]["errors"][0]["loc"][:3] == ["body", "payload", "key"]


def test_a_key_is_strings_and_integers_in_the_schema_and_in_the_api(api, rivet):  # noqa: F811
    """One key type on both sides (the Python client's ``normalize_key``): strings and integers."""
    key = component("CreateActorIn")["properties"]["key"]["anyOf"]
    part_types = [p["type"] for p in key[2]["items"]["anyOf"]]
    assert [p["type"] for p in key] == ["string", "integer", "array"] and part_types == ["string", "integer"]
    for value, stored in ((["t", 1], ["t", 1]), ([1, 2], [1, 2]), (7, [7]), ("a", ["a"]), ([3.0], [3])):
        body = post(api, "/actors", {"name": "counter", "key": value}).json()
        assert body["key"] == stored, body
        assert rivet.client.counter.get(stored).actor_id == body["actor_id"]  # the same actor in Python
    assert post(api, "/actors", {"name": "counter", "key": ["t", 1]}).json()["created"] is False
    assert (
        rivet.client.counter.get_or_create(("t", 1)).actor_id == rivet.client.counter.get(["t", 1]).actor_id
    )
    for bad in ([1.5], [True], [None], [["nested"]], [{"a": 1}], [2**60], 1.5, [1, 2.5], [1e300]):
        body = assert_error(post(api, "/actors", {"name": "counter", "key": bad}), 422, "validation_error")
        assert body["metadata"]["errors"][0]["loc"][:3] == ["body", "payload", "key"], body
    assert_error(post(api, "/actors", '{"name": "counter", "key": [NaN]}'), 400, "malformed_json")  # not JSON


#: the statuses each operation answers (besides its 2xx), as the views and auth really produce them
EXPECTED_ERRORS = {
    ("post", "/actors"): {400, 401, 403, 404, 413, 422},
    ("get", "/actors"): {400, 401, 403, 422},
    ("get", "/actors/{actor_id}"): {400, 401, 403, 404, 422},
    ("post", "/actors/{actor_id}/actions/{action}"): {400, 401, 403, 404, 409, 413, 422},
    ("post", "/actors/{actor_id}/queues/{queue}"): {400, 401, 403, 404, 409, 413, 422, 429},
    ("get", "/actors/{actor_id}/inspector/workflow-history"): {400, 401, 403, 404, 422},
    ("post", "/actors/{actor_id}/inspector/workflow/replay"): {400, 401, 403, 404, 409, 413, 422},
    ("post", "/actors/{actor_id}/inspector/workflow/recover"): {400, 401, 403, 404, 409, 413, 422},
    ("get", "/actors/{actor_id}/inspector/audit"): {400, 401, 403, 404, 422},
}


@pytest.mark.parametrize("method, path", sorted(EXPECTED_ERRORS))
def test_each_operation_declares_the_statuses_it_answers(method, path):
    statuses = {int(code) for code in operation(method, path)["responses"]}
    assert {s for s in statuses if s >= 400} == EXPECTED_ERRORS[method, path]
