"""Request bodies are strict (docs/reference/http-api.md): a field an endpoint does not take is a 422 naming it, on
every route with a body (enumerated from the OpenAPI schema, so a new one is covered), and nothing
happens; validation errors speak the API's words, not pydantic's internals."""

from __future__ import annotations

import json

import pytest

from rivet_workflows import models
from tests.api.test_api import post
from tests.api.test_authorization_matrix import api_request, api_routes, make_world, snapshot

DEV = {"API_AUTH": "rivet_workflows.api.auth.dev_mode_api_auth"}


def body_routes() -> list[tuple[str, str, dict]]:
    return [(m, p, spec) for m, p, spec in api_routes() if "requestBody" in spec]


def test_every_route_with_a_body_refuses_an_unknown_field_and_names_it(rivet, client):
    rivet.configure(**DEV)
    world = make_world(rivet)
    routes = body_routes()
    assert len(routes) >= 8
    before = snapshot()
    for method, path, spec in routes:
        url, body = api_request(method, path, spec, world)
        data = {**json.loads(body), "surpriseField": True}
        response = client.post(url, json.dumps(data), content_type="application/json")
        assert response.status_code == 422, (path, response.content)
        answer = response.json()
        assert answer["code"] == "validation_error"
        assert "surpriseField" in answer["message"]
        problem = answer["metadata"]["errors"][0]
        assert problem["type"] == "unknown_field" and problem["loc"][-1] == "surpriseField"
        assert problem["msg"].startswith("unknown field 'surpriseField'")
    assert snapshot() == before


@pytest.mark.parametrize(
    "body,unknown",
    [
        ({"entryId": "charge", "dry_run": True}, "dry_run"),  # dryRun misspelt: a preview must not replay
        ({"entry_id": "charge"}, "entry_id"),  # a misspelt entryId would replay everything
        ({"reasom": "typo"}, "reasom"),
    ],
)
def test_a_replay_with_an_unknown_field_replays_nothing(rivet, client, body, unknown):
    handle = rivet.failed_order()
    history = sorted(
        models.HistoryEntry.objects.filter(actor_id=handle.actor_id).values_list("key", "status")
    )
    response = post(client, f"/actors/{handle.actor_id}/inspector/workflow/replay", body)
    assert response.status_code == 422
    assert response.json()["metadata"]["errors"][0]["loc"] == ["body", "payload", unknown]
    assert handle.workflow_state() == "failed"
    assert (
        sorted(models.HistoryEntry.objects.filter(actor_id=handle.actor_id).values_list("key", "status"))
        == history
    )


@pytest.mark.parametrize(
    "key,message",
    [
        (["eu", 1.5], "key part 2 must be an integer or a string"),
        (["eu", True], "key part 2 must be an integer or a string, not a boolean"),
        ([1, None], "key part 2 must be an integer or a string"),
        (["eu", 2**60], "key part 2 is outside -9007199254740991..9007199254740991"),
        (["eu", "a\x00b"], "key part 2 contains a NUL character"),
        ([["nested"]], "key part 1 must be an integer or a string"),
        ({"a": 1}, "the key must be a string, an integer or a list of them"),
        (2.5, "the key must be an integer or a string"),
    ],
)
def test_a_bad_key_is_explained_in_the_apis_words(rivet, client, key, message):
    rivet.configure(**DEV)
    response = post(client, "/actors", {"name": "counter", "key": key})
    assert response.status_code == 422, response.content
    body = response.json()
    problems = body["metadata"]["errors"]
    assert len(problems) == 1, problems  # one problem, not one per member of the key's type
    assert problems[0]["loc"] == ["body", "payload", "key"] and problems[0]["type"] == "invalid_key"
    assert problems[0]["msg"].startswith(message), problems[0]["msg"]
    assert message in body["message"]
    text = response.content.decode()
    for internal in ("function-before", "constrained-int", "_integer_key_part", "list[", "str]"):
        assert internal not in text, internal


def test_no_validation_error_names_pydantic_internals(rivet, client):
    """Every other kind of bad body: the loc is a place in the request, never a union member's tag."""
    rivet.configure(**DEV)
    actor_id = rivet.client.waiter.get_or_create("w").actor_id
    cases = [
        ("/actors", {"name": 5, "key": "a"}, ["body", "payload", "name"]),
        ("/actors", {"key": "a"}, ["body", "payload", "name"]),
        (f"/actors/{actor_id}/queues/approval", {"body": 1, "timeout": True}, ["body", "payload", "timeout"]),
        (f"/actors/{actor_id}/queues/approval", {"body": 1, "wait": "yes"}, ["body", "payload", "wait"]),
        (f"/actors/{actor_id}/inspector/workflow/pause", {"reason": 7}, ["body", "payload", "reason"]),
    ]
    for path, body, loc in cases:
        response = post(client, path, body)
        assert response.status_code == 422, (path, response.content)
        problems = response.json()["metadata"]["errors"]
        assert [p["loc"] for p in problems] == [loc], problems
        assert not any("[" in str(part) or "-" in str(part) for p in problems for part in p["loc"])
