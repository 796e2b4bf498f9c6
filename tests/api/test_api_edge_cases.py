"""HTTP API edge cases found by a fresh-user test: unstorable strings, malformed values, strict request
shapes and JSON errors for every failure (DESIGN.md section 6)."""

from __future__ import annotations

import json

import pytest

from tests.api.test_api import API, api, assert_error, post  # noqa: F401 - fixture

LONE_SURROGATE = '"\\ud800"'  # JSON text of a string Python decodes to a lone surrogate


def raw_post(client, path, text):
    return client.post(API + path, data=text, content_type="application/json")


@pytest.mark.parametrize(
    "text, code",
    [
        # the key's schema has a no-NUL pattern and the validator refuses lone surrogates (C59)
        ('{"name": "counter", "key": [' + LONE_SURROGATE + "]}", "validation_error"),
        ('{"name": "counter", "key": ' + LONE_SURROGATE + "}", "validation_error"),
        ('{"name": "counter", "key": ["a\\u0000b"]}', "validation_error"),
        # ``input`` is any JSON: serde refuses what no database stores, naming the place
        ('{"name": "counter", "key": "a", "input": {"x": ' + LONE_SURROGATE + "}}", "serialization_error"),
        ('{"name": "counter", "key": "a", "input": {' + LONE_SURROGATE + ": 1}}", "serialization_error"),
        ('{"name": "counter", "key": "a", "input": "nul \\u0000"}', "serialization_error"),
    ],
)
def test_unstorable_strings_are_422_and_nothing_is_stored(api, text, code):  # noqa: F811
    from rivet_workflows import models

    body = assert_error(raw_post(api, "/actors", text), 422, code)
    if code == "serialization_error":
        assert "$" in body["metadata"]["path"]
    else:
        assert body["metadata"]["errors"][0]["loc"][:3] == ["body", "payload", "key"], body
    assert models.Actor.objects.count() == 0


def test_unstorable_queue_body_and_action_args_are_422(api, rivet):  # noqa: F811
    from rivet_workflows import models

    handle = rivet.client.waiter.get_or_create("w")
    counter = rivet.client.counter.get_or_create("c")
    sent = raw_post(api, f"/actors/{handle.actor_id}/queues/approval", '{"body": ' + LONE_SURROGATE + "}")
    assert_error(sent, 422, "serialization_error")
    assert models.QueueMessage.objects.count() == 0
    called = raw_post(
        api, f"/actors/{counter.actor_id}/actions/increment", '{"args": [' + LONE_SURROGATE + "]}"
    )
    assert called.status_code in (400, 422), called.content
    assert counter.state() == {"count": 0}


def test_created_is_true_for_exactly_one_of_many_concurrent_creates(api, rivet, transactional_db):  # noqa: F811
    """Concurrent POST /actors for one new key: one caller created it, every other one got it."""
    import threading

    from django.contrib.auth import get_user_model
    from django.db import connections
    from django.test import Client

    user = get_user_model().objects.get(username="alice")
    results: list[dict] = []
    barrier = threading.Barrier(8)

    def create():
        try:
            client = Client()
            client.force_login(user)
            barrier.wait()
            response = post(client, "/actors", {"name": "counter", "key": "race"})
            results.append(response.json())
        finally:
            connections.close_all()

    threads = [threading.Thread(target=create) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(results) == 8 and all("actor_id" in r for r in results), results
    assert len({r["actor_id"] for r in results}) == 1
    assert sum(r["created"] for r in results) == 1


@pytest.mark.parametrize(
    "bad",
    [
        {"__rw__": "bytes", "v": "!!!"},
        {"__rw__": "bytes", "v": 5},
        {"__rw__": "decimal", "v": "abc"},
        {"__rw__": "uuid", "v": "zz"},
        {"__rw__": "timedelta", "v": [1]},
        {"__rw__": "dict", "v": [[1]]},
        {"__rw__": "float", "v": "1e400"},
    ],
)
def test_malformed_tagged_values_are_422(api, bad):  # noqa: F811
    from rivet_workflows import models

    response = post(api, "/actors", {"name": "counter", "key": "a", "input": bad})
    assert_error(response, 422, "invalid_value")
    assert models.Actor.objects.count() == 0


def test_non_finite_numbers_are_rejected(api, rivet):  # noqa: F811
    handle = rivet.client.waiter.get_or_create("w")
    for text in ('{"body": 1e400}', '{"body": -1e400}', '{"body": [1, {"x": 1e999}]}'):
        response = raw_post(api, f"/actors/{handle.actor_id}/queues/approval", text)
        assert response.status_code in (400, 422), response.content
        assert set(response.json()) == {"group", "code", "message", "metadata"}
    from rivet_workflows import models

    assert models.QueueMessage.objects.count() == 0


def test_unknown_state_filter_is_422(api):  # noqa: F811
    body = assert_error(api.get(API + "/actors?state=bogus"), 422, "validation_error")
    (problem,) = body["metadata"]["errors"]
    assert problem["loc"] == ["query", "state"] and "'sleeping'" in problem["msg"], problem
    assert api.get(API + "/actors?state=sleeping").status_code == 200


@pytest.mark.parametrize("method", ["put", "delete", "patch"])
def test_wrong_method_is_a_json_405(api, method):  # noqa: F811
    response = getattr(api, method)(API + "/actors", data="{}", content_type="application/json")
    body = assert_error(response, 405, "method_not_allowed")
    assert "GET" in body["message"] or "POST" in body["message"]


def test_queue_send_requires_a_body(api, rivet):  # noqa: F811
    from rivet_workflows import models

    handle = rivet.client.waiter.get_or_create("w")
    assert_error(post(api, f"/actors/{handle.actor_id}/queues/approval", {}), 422, "validation_error")
    assert_error(
        post(api, f"/actors/{handle.actor_id}/queues/approval", {"wait": False}), 422, "validation_error"
    )
    assert models.QueueMessage.objects.count() == 0
    # an explicit null body is a body
    assert post(api, f"/actors/{handle.actor_id}/queues/approval", {"body": None}).status_code == 202


@pytest.mark.parametrize("wait", ["yes", "true", 1, "1"])
def test_wait_must_be_a_json_boolean(api, rivet, wait):  # noqa: F811
    handle = rivet.client.waiter.get_or_create("w")
    response = post(
        api, f"/actors/{handle.actor_id}/queues/approval", {"body": 1, "wait": wait, "timeout": 0}
    )
    assert_error(response, 422, "validation_error")


def test_deeply_nested_json_is_a_clear_error(api):  # noqa: F811
    from rivet_workflows import models

    depth = 900
    text = '{"name": "counter", "key": "a", "input": ' + "[" * depth + "]" * depth + "}"
    response = raw_post(api, "/actors", text)
    assert response.status_code in (400, 422), response.content
    body = response.json()
    assert "recursion" not in body["message"] and "nest" in body["message"], body
    assert models.Actor.objects.count() == 0
    ok = '{"name": "counter", "key": "a", "input": ' + json.dumps([[[[1]]]]) + "}"
    assert raw_post(api, "/actors", ok).status_code == 200


@pytest.mark.parametrize(
    "method, path",
    [
        ("get", "/nope"),
        ("get", "/actors/"),
        ("get", "/actors/abc/"),
        ("get", "/"),
        ("post", "/nope"),
        ("put", "/actors/abc/inspector"),
        ("delete", "/actors/abc/queues/q/extra"),
    ],
)
def test_unknown_paths_are_a_json_404(rivet, method, path):
    from django.test import Client

    # an anonymous client that enforces CSRF: an unknown POST is a 404, not an HTML CSRF 403
    strict = Client(enforce_csrf_checks=True)
    response = getattr(strict, method)(API + path)
    assert response["Content-Type"].startswith("application/json")
    body = assert_error(response, 404, "not_found")
    assert body["group"] == "request"
    assert body["metadata"]["method"] == method.upper() and body["metadata"]["path"] == API + path
    assert f"{method.upper()} {API + path}" in body["message"]
    assert body["metadata"]["docs"] == API + "/docs"  # where the endpoints are listed


def test_a_long_unknown_path_is_not_echoed_whole(api):  # noqa: F811
    body = assert_error(api.get(API + "/" + "x" * 5000), 404, "not_found")
    assert len(body["metadata"]["path"]) <= 200 and body["metadata"]["path"].endswith("…")
    assert len(body["message"]) < 400
