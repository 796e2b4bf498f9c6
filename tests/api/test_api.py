"""The HTTP API (DESIGN.md section 6) through Django's test client: every endpoint, success and error."""

from __future__ import annotations

import json

import pytest

from tests.api import registry as test_registry
from tests.api.support import api_user

API = "/api/rivet"


def post(client, path, body=None, **extra):
    data = "" if body is None else (body if isinstance(body, str) else json.dumps(body))
    return client.post(API + path, data=data, content_type="application/json", **extra)


def assert_error(response, status, code):
    assert response.status_code == status, response.content
    body = response.json()
    assert set(body) == {"group", "code", "message", "metadata"}
    assert body["code"] == code, body
    return body


@pytest.fixture
def api(rivet, client, django_user_model):
    """A test client logged in as a user holding ``use_actor_api`` (dev mode: the inspector is open)."""
    client.force_login(api_user(django_user_model))
    return client


def test_create_actor_is_get_or_create(api, rivet):
    first = post(api, "/actors", {"name": "counter", "key": "a"})
    assert first.status_code == 200
    body = first.json()
    assert body["created"] is True and body["key"] == ["a"] and body["name"] == "counter"
    again = post(api, "/actors", {"name": "counter", "key": ["a"]}).json()
    assert again == {**body, "created": False}


def test_create_actor_of_unknown_type_is_404(api):
    assert_error(post(api, "/actors", {"name": "nope", "key": "a"}), 404, "actor_not_found")


@pytest.mark.parametrize(
    "body",
    [{"key": "a"}, {"name": "counter"}, {"name": "counter", "key": 5.5}, {"name": 3, "key": "a"}],
)
def test_create_actor_with_wrong_types_is_422(api, body):
    assert_error(post(api, "/actors", body), 422, "validation_error")


def test_a_key_over_max_key_bytes_is_413_and_creates_nothing(api, rivet):
    """Keys are indexed; PostgreSQL refuses an index row over ~2.7 kB (it was a 500 there)."""
    from rivet_workflows import models

    body = assert_error(
        post(api, "/actors", {"name": "counter", "key": ["k" * 8000]}), 413, "payload_too_large"
    )
    assert "MAX_KEY_BYTES" in body["message"]
    assert not models.Actor.objects.exists()
    ok = post(api, "/actors", {"name": "counter", "key": ["k" * 1000]})
    assert ok.status_code == 200 and ok.json()["created"] is True


def test_an_on_create_hook_that_raises_is_400_and_creates_nothing(api, rivet):
    from rivet_workflows import models

    body = assert_error(post(api, "/actors", {"name": "picky", "key": "a"}), 400, "action_failed")
    assert body["group"] == "user" and "on_create" in body["message"]
    assert not models.Actor.objects.exists()
    ok = post(api, "/actors", {"name": "picky", "key": "a", "input": {"order_id": "o-1"}})
    assert ok.status_code == 200 and ok.json()["created"] is True
    state = post(api, f"/actors/{ok.json()['actor_id']}/actions/get_state", {"args": []}).json()
    assert state == {"result": {"order_id": "o-1"}}


def test_malformed_json_is_400_and_changes_nothing(api):
    from rivet_workflows import models

    assert_error(post(api, "/actors", '{"name": "counter", "key": '), 400, "malformed_json")
    assert_error(post(api, "/actors", "[1, 2]"), 400, "malformed_json")
    assert_error(post(api, "/actors", '{"name": "counter", "key": "a", "input": NaN}'), 400, "malformed_json")
    assert models.Actor.objects.count() == 0


def test_malformed_tagged_values_are_422(api):
    from rivet_workflows import models

    for bad in ({"__rw__": "datetime", "v": 5}, {"__rw__": "tuple", "v": 5}, {"__rw__": "no-such-tag"}):
        assert_error(
            post(api, "/actors", {"name": "counter", "key": "a", "input": bad}), 422, "invalid_value"
        )
    assert models.Actor.objects.count() == 0


def test_body_over_the_size_limit_is_413(api, rivet):
    rivet.configure(MAX_BODY_BYTES=200)
    big = {"name": "counter", "key": "a", "input": "x" * 500}
    body = assert_error(post(api, "/actors", big), 413, "body_too_large")
    assert body["metadata"]["limit"] == 200


def test_list_and_get_actors(api, rivet):
    for key in ("a", "b"):
        post(api, "/actors", {"name": "counter", "key": key})
    handle = rivet.client.order.get_or_create("o")
    rivet.drain()
    page = api.get(f"{API}/actors?name=counter").json()
    assert page["count"] == 2 and {tuple(i["key"]) for i in page["items"]} == {("a",), ("b",)}
    done = api.get(f"{API}/actors?state=completed").json()
    assert [i["actor_id"] for i in done["items"]] == [handle.actor_id]
    limited = api.get(f"{API}/actors?limit=1&offset=1").json()
    assert limited["count"] == 3 and len(limited["items"]) == 1
    for bound in ("limit=0", "limit=501", "offset=-1", f"offset={2**53}"):  # the schema's bounds (C59)
        body = assert_error(api.get(f"{API}/actors?{bound}"), 422, "validation_error")
        assert body["metadata"]["errors"][0]["loc"] == ["query", bound.split("=")[0]], body
    assert_error(api.get(f"{API}/actors?limit=abc"), 422, "validation_error")
    detail = api.get(f"{API}/actors/{handle.actor_id}").json()
    assert detail["workflow_state"] == "completed"
    assert detail["output"] == {"order": 42, "status": "shipped"}
    assert detail["state"] == {"charged": 1} and detail["in_flight"] is False
    assert_error(api.get(f"{API}/actors/does-not-exist"), 404, "actor_not_found")


def test_call_action(api, rivet):
    actor_id = post(api, "/actors", {"name": "counter", "key": "a"}).json()["actor_id"]
    assert post(api, f"/actors/{actor_id}/actions/increment", {"args": [5]}).json() == {"result": 5}
    assert post(api, f"/actors/{actor_id}/actions/increment", {}).json() == {"result": 6}
    assert rivet.client.counter.get("a").state() == {"count": 6}


def test_action_errors(api, rivet):
    handle = rivet.client.order.get_or_create("o")
    assert_error(post(api, f"/actors/{handle.actor_id}/actions/nope", {"args": []}), 404, "action_not_found")
    assert_error(post(api, "/actors/missing/actions/get_state", {"args": []}), 404, "actor_not_found")
    assert_error(
        post(api, f"/actors/{handle.actor_id}/actions/get_state", {"args": 3}), 422, "validation_error"
    )
    failed = assert_error(
        post(api, f"/actors/{handle.actor_id}/actions/boom", {"args": []}), 400, "action_failed"
    )
    assert failed["group"] == "user" and "boom" in failed["message"]
    wrong_arity = post(api, f"/actors/{handle.actor_id}/actions/add", {"args": [1]})
    assert_error(wrong_arity, 400, "action_failed")
    assert post(api, f"/actors/{handle.actor_id}/actions/add", {"args": [1, 2]}).json() == {"result": 3}


def test_send_to_queue_accepted_and_wait(api, rivet):
    handle = rivet.client.waiter.get_or_create("w")
    rivet.drain()
    assert handle.workflow_state() == "sleeping"
    sent = post(api, f"/actors/{handle.actor_id}/queues/approval", {"body": {"by": "bob"}})
    assert sent.status_code == 202 and sent.json()["message_id"]
    rivet.drain()
    assert handle.workflow_state() == "completed"
    assert handle.state() == {"approved": {"by": "bob"}}


def test_send_and_wait_for_the_response(api, rivet):
    import threading

    handle = rivet.client.waiter.get_or_create("w")
    rivet.drain()

    def drain_until_done():
        import time

        from django.db import connections

        deadline = time.monotonic() + 10
        while handle.workflow_state() != "completed" and time.monotonic() < deadline:
            rivet.drain(timeout=0.2)
            time.sleep(0.02)
        connections.close_all()

    worker = threading.Thread(target=drain_until_done)
    worker.start()
    response = post(
        api, f"/actors/{handle.actor_id}/queues/approval", {"body": "yes", "wait": True, "timeout": 10}
    )
    worker.join()
    assert response.status_code == 200, response.content
    assert response.json() == {"status": "completed", "response": {"ok": True, "got": "yes"}, "detail": None}


def test_send_errors(api, rivet):
    handle = rivet.client.waiter.get_or_create("w")
    assert_error(post(api, f"/actors/{handle.actor_id}/queues/other", {"body": 1}), 404, "queue_not_found")
    assert_error(post(api, "/actors/missing/queues/approval", {"body": 1}), 404, "actor_not_found")
    bad_timeout = post(api, f"/actors/{handle.actor_id}/queues/approval", {"wait": True, "timeout": -1})
    assert_error(bad_timeout, 422, "validation_error")
    timed_out = post(
        api, f"/actors/{handle.actor_id}/queues/approval", {"body": 1, "wait": True, "timeout": 0}
    )
    assert timed_out.json() == {
        "status": "timed_out",
        "response": None,
        "detail": "timed out: the workflow has not received the message yet (is it waiting on this queue?)",
    }


def test_workflow_history(api, rivet):
    handle = rivet.failed_order()
    body = api.get(f"{API}/actors/{handle.actor_id}/inspector/workflow-history").json()
    assert body["workflowState"] == "failed" and body["isWorkflowEnabled"] is True
    entries = body["history"]["entries"]
    assert [e["id"] for e in entries] == ["fetch-order", "charge"]
    charge = body["history"]["entryMetadata"]["charge"]
    assert charge["status"] == "exhausted" and charge["attempts"] == 1
    assert "card declined" in charge["error"]["message"]
    (attempt,) = charge["attemptLog"]  # case C57: every attempt, with its error
    assert (attempt["attempt"], attempt["outcome"], attempt["error"]["name"]) == (1, "failed", "RuntimeError")
    assert attempt["startedAt"] and attempt["finishedAt"]
    assert "attempt_log" not in entries[1]["kind"]["data"]
    counter = post(api, "/actors", {"name": "counter", "key": "c"}).json()["actor_id"]
    plain = api.get(f"{API}/actors/{counter}/inspector/workflow-history").json()
    assert plain == {"history": None, "workflowState": "no_workflow", "isWorkflowEnabled": False}
    assert_error(api.get(f"{API}/actors/missing/inspector/workflow-history"), 404, "actor_not_found")


def test_replay_from_step_after_fix_completes(api, rivet):
    handle = rivet.failed_order()
    before = api.get(f"{API}/actors/{handle.actor_id}/inspector/workflow-history").json()
    replayed = post(api, f"/actors/{handle.actor_id}/inspector/workflow/replay", {"entryId": "charge"})
    assert replayed.status_code == 200
    assert replayed.json()["deleted"] == ["charge"] and replayed.json()["workflowState"] == "sleeping"
    rivet.drain()
    assert handle.workflow_state() == "completed"
    after = api.get(f"{API}/actors/{handle.actor_id}/inspector/workflow-history").json()
    assert after["history"]["entries"][0] == before["history"]["entries"][0]
    assert (
        after["history"]["entryMetadata"]["fetch-order"] == before["history"]["entryMetadata"]["fetch-order"]
    )


def test_replay_all_and_replay_errors(api, rivet):
    handle = rivet.failed_order()
    path = f"/actors/{handle.actor_id}/inspector/workflow/replay"
    assert_error(post(api, path, {"entryId": "nope"}), 404, "entry_not_found")
    assert_error(post(api, path, {"entryId": 5}), 422, "validation_error")
    assert_error(post(api, "/actors/missing/inspector/workflow/replay", {}), 404, "actor_not_found")
    everything = post(api, path)  # no body: replay all
    assert everything.status_code == 200 and sorted(everything.json()["deleted"]) == ["charge", "fetch-order"]
    rivet.drain()
    assert handle.workflow_state() == "completed"
    assert_error(post(api, path, {"entryId": "pack-items"}), 400, "invalid_replay_target")


def test_replay_while_in_flight_is_409(api, rivet):
    handle = rivet.failed_order()
    rivet.runtime.store.claim(handle.actor_id, "another-worker", 30)
    path = f"/actors/{handle.actor_id}/inspector/workflow"
    assert_error(post(api, f"{path}/replay", {"entryId": "charge"}), 409, "workflow_in_flight")
    assert_error(post(api, f"{path}/recover"), 409, "workflow_in_flight")
    assert handle.workflow_state() == "failed"


def test_recover(api, rivet):
    handle = rivet.failed_order()
    path = f"/actors/{handle.actor_id}/inspector/workflow/recover"
    recovered = post(api, path)
    assert recovered.status_code == 200 and recovered.json()["reset"] == ["charge"]
    rivet.drain()
    assert handle.workflow_state() == "completed"
    assert_error(post(api, path), 409, "workflow_not_failed")
    assert_error(post(api, "/actors/missing/inspector/workflow/recover"), 404, "actor_not_found")


def test_openapi_docs_are_served(client):
    schema = client.get(f"{API}/openapi.json")
    assert schema.status_code == 200
    paths = schema.json()["paths"]
    assert f"{API}/actors/{{actor_id}}/inspector/workflow/replay" in paths
    assert client.get(f"{API}/docs").status_code == 200


def test_flags_reset_between_tests():
    assert test_registry.FLAGS["broken"] is False


def _ledger(rivet):
    """A finished ``ledger`` run: its settle wait's deadline lost to a message, a confirm answered."""
    handle = rivet.client.ledger.get_or_create("l1")
    rivet.drain()
    handle.send("approval", "first")
    rivet.drain()
    handle.send("approval", "second")
    rivet.drain()
    assert handle.workflow_state() == "completed", handle.record().error
    return handle


def test_history_statuses_use_one_vocabulary_and_every_completed_entry_has_completed_at(api, rivet):
    handle = _ledger(rivet)
    body = api.get(f"{API}/actors/{handle.actor_id}/inspector/workflow-history").json()
    meta = body["history"]["entryMetadata"]
    statuses = {key: m["status"] for key, m in meta.items()}
    assert statuses == {
        "total": "completed",
        "cool-off": "completed",
        "settle:deadline": "interrupted",  # the message came first (ENGINE-SEMANTICS.md section 1)
        "settle:count": "completed",
        "settle:0": "received",
        "confirm:count": "completed",
        "confirm:0": "completed",  # answered with complete()
        "done": "completed",
    }
    for key, m in meta.items():
        if m["status"] in ("completed", "interrupted"):
            assert m["completedAt"] is not None, key
    assert meta["settle:0"]["completedAt"] is None  # received, not completed
    entries = {e["id"]: e for e in body["history"]["entries"]}
    assert entries["settle:deadline"]["kind"]["data"]["state"] == "interrupted"


def test_the_api_shows_values_as_plain_json_with_their_types_never_storage_tags(api, rivet):
    handle = _ledger(rivet)
    history = api.get(f"{API}/actors/{handle.actor_id}/inspector/workflow-history")
    detail = api.get(f"{API}/actors/{handle.actor_id}")
    balance = post(api, f"/actors/{handle.actor_id}/actions/balance", {"args": []})
    for response in (history, detail, balance):
        assert "__rw__" not in response.content.decode()
    entries = {e["id"]: e for e in history.json()["history"]["entries"]}
    total = entries["total"]
    assert total["kind"]["data"]["output"] == {
        "amount": "19.90",
        "due": "2030-01-02T03:04:05.678000+00:00",
        "lines": [1, 2],
    }
    assert total["types"] == {
        "/kind/data/output/amount": "decimal",
        "/kind/data/output/due": "datetime",
        "/kind/data/output/lines": "tuple",
    }
    sleep = entries["cool-off"]
    assert sleep["types"] == {"/kind/data/deadline": "datetime"}
    assert sleep["kind"]["data"]["deadline"].startswith("20")  # an ISO 8601 instant
    assert "types" not in entries["done"]  # plain JSON only: nothing to say
    body = detail.json()
    assert body["state"] == {"limit": "100.00", "opened": "2030-01-02T03:04:05.678000+00:00"}
    assert body["output"]["amount"] == "19.90"
    assert body["types"] == {
        "/state/limit": "decimal",
        "/state/opened": "datetime",
        "/output/amount": "decimal",
        "/output/due": "datetime",
        "/output/lines": "tuple",
    }
    assert balance.json() == {"result": "5.50", "types": {"/result": "decimal"}}


def test_an_actor_without_a_workflow_shows_no_workflow_and_filters_apart(api, rivet):
    counter = post(api, "/actors", {"name": "counter", "key": "c"}).json()["actor_id"]
    order = rivet.client.order.get_or_create("waiting-to-run")  # created due, not run yet: pending
    assert api.get(f"{API}/actors/{counter}").json()["workflow_state"] == "no_workflow"
    listed = {i["actor_id"]: i["workflow_state"] for i in api.get(f"{API}/actors").json()["items"]}
    assert listed == {counter: "no_workflow", order.actor_id: "pending"}
    pending = api.get(f"{API}/actors", {"state": "pending"}).json()
    assert [i["actor_id"] for i in pending["items"]] == [order.actor_id] and pending["count"] == 1
    none = api.get(f"{API}/actors", {"state": "no_workflow"}).json()
    assert [i["actor_id"] for i in none["items"]] == [counter] and none["count"] == 1


def test_a_failed_run_carries_its_stack_once(api, rivet):
    handle = rivet.failed_order()
    error = api.get(f"{API}/actors/{handle.actor_id}").json()["error"]
    assert "card declined" in error["stack"]  # the step body's traceback, via the cause
    assert "stack" not in error["metadata"]["error"]
    assert error["metadata"]["error"]["message"] == "card declined: payment service misconfigured"
    assert json.dumps(error).count("Traceback (most recent call last)") == error["stack"].count(
        "Traceback (most recent call last)"
    )
