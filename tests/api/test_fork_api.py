"""``POST /actors/{id}/inspector/workflow/fork`` (DESIGN.md section 19): a new actor from a copy of the history."""

from __future__ import annotations

import pytest

from rivet_workflows import models
from tests.api.support import api_user
from tests.api.test_api import API, assert_error, post


@pytest.fixture
def api(rivet, client, django_user_model):
    client.force_login(api_user(django_user_model))
    return client


def _path(actor_id: str) -> str:
    return f"/actors/{actor_id}/inspector/workflow/fork"


def test_fork_of_a_failed_run_with_new_input_completes_and_the_source_stays_failed(api, rivet):
    source = rivet.failed_order()
    response = post(api, _path(source.actor_id), {"input": {"coupon": "FIX"}, "reason": "card fixed"})
    assert response.status_code == 200, response.content
    body = response.json()
    assert body["source_id"] == source.actor_id and body["entry_id"] is None
    assert body["key"][0] == "o1" and body["key"][1].startswith("fork-")
    assert body["copied"][:2] == ["fetch-order", "charge"]
    rivet.drain()
    forked = rivet.client.order.get_for_id(body["actor_id"])
    assert forked.workflow_state() == "completed" and forked.record().input == {"coupon": "FIX"}
    assert source.workflow_state() == "failed"
    for actor_id in (source.actor_id, body["actor_id"]):
        audit = api.get(f"{API}/actors/{actor_id}/inspector/audit").json()["items"]
        assert audit[0]["action"] == "fork" and "card fixed" in audit[0]["reason"]


def test_fork_at_a_step_with_a_key_and_state(api, rivet):
    source = rivet.failed_order()
    body = {"entryId": "charge", "key": ["o1", "retry"], "state": {"charged": 10}}
    response = post(api, _path(source.actor_id), body)
    assert response.status_code == 200, response.content
    assert response.json()["key"] == ["o1", "retry"] and response.json()["copied"] == ["fetch-order"]
    rivet.drain()
    forked = rivet.client.order.get(["o1", "retry"])
    assert forked.workflow_state() == "completed" and forked.state()["charged"] == 11
    assert_error(post(api, _path(source.actor_id), {"key": ["o1", "retry"]}), 409, "actor_already_exists")


def test_fork_with_no_body_copies_everything_with_the_sources_input(api, rivet):
    source = rivet.failed_order()
    response = post(api, _path(source.actor_id))
    assert response.status_code == 200, response.content
    forked = rivet.client.order.get_for_id(response.json()["actor_id"])
    assert forked.record().input == source.record().input


def test_fork_refusals_are_typed_4xx_and_create_nothing(api, rivet):
    source = rivet.failed_order()
    path = _path(source.actor_id)
    count = models.Actor.objects.count()
    assert_error(post(api, path, {"entryId": "nope"}), 404, "entry_not_found")
    assert_error(post(api, path, {"entryId": "pack-items"}), 404, "entry_not_found")  # never reached
    assert_error(post(api, path, {"entryId": 5}), 422, "validation_error")
    assert_error(post(api, path, {"key": {"a": 1}}), 422, "validation_error")
    assert_error(post(api, path, {"entryID": "charge"}), 422, "validation_error")  # unknown field
    assert_error(post(api, path, {"input": {"__rw__": "datetime", "v": 5}}), 422, "invalid_value")
    assert_error(post(api, _path("missing"), {}), 404, "actor_not_found")
    rivet.runtime.store.claim(source.actor_id, "another-worker", 30)
    assert_error(post(api, path, {}), 409, "workflow_in_flight")
    assert models.Actor.objects.count() == count
    assert not models.OperatorAction.objects.filter(action="fork").exists()


def test_fork_of_a_step_that_is_not_a_step_is_400(api, rivet):
    source = rivet.failed_order()
    replayed = post(api, f"/actors/{source.actor_id}/inspector/workflow/replay", {"entryId": "charge"})
    assert replayed.status_code == 200
    rivet.drain()
    assert source.workflow_state() == "completed"
    assert_error(post(api, _path(source.actor_id), {"entryId": "pack-items"}), 400, "invalid_replay_target")
