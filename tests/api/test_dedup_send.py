"""Deduplicated sends through the client and over HTTP (``dedup_id``/``dedupId``, DESIGN.md section 20)."""

from __future__ import annotations

import pytest

from rivet_workflows import models
from tests.api.support import api_user
from tests.api.test_api import assert_error, post
from tests.conftest import run_in_threads


@pytest.fixture
def api(rivet, client, django_user_model):
    client.force_login(api_user(django_user_model))
    return client


def test_a_hundred_client_sends_with_one_dedup_id_from_eight_threads_store_one_message(rivet):
    handle = rivet.client.waiter.get_or_create("w")
    rivet.drain()
    assert handle.workflow_state() == "sleeping"

    def sender(i: int) -> None:
        for n in range(12 + (i < 4)):  # 100 sends in all
            assert handle.send("approval", {"thread": i, "n": n}, dedup_id="hook-1") is None

    run_in_threads(sender, 8)
    assert models.QueueMessage.objects.filter(actor_id=handle.actor_id).count() == 1
    rivet.drain()
    assert handle.workflow_state() == "completed"  # the one message was received, once


def test_a_waiting_send_with_a_kept_dedup_id_answers_with_the_first_messages_response(rivet):
    handle = rivet.client.waiter.get_or_create("w")
    rivet.drain()
    handle.send("approval", "first", dedup_id="d")
    rivet.drain()
    assert handle.workflow_state() == "completed"
    # the workflow completed the first message: the redelivered waiting send gets its response at once
    result = handle.send("approval", "second", wait=True, timeout=1, dedup_id="d")
    assert result.status == "completed" and result.response == {"ok": True, "got": "first"}


def test_an_empty_dedup_id_is_refused(rivet):
    handle = rivet.client.waiter.get_or_create("w")
    with pytest.raises(ValueError, match="dedup_id"):
        handle.send("approval", 1, dedup_id="")


def test_http_send_with_dedup_id_answers_the_first_message_id_and_stores_one(api, rivet):
    handle = rivet.client.waiter.get_or_create("w")
    path = f"/actors/{handle.actor_id}/queues/approval"
    first = post(api, path, {"body": 1, "dedupId": "evt-9"})
    again = post(api, path, {"body": 2, "dedupId": "evt-9"})
    other = post(api, path, {"body": 3})
    assert first.status_code == again.status_code == other.status_code == 202
    assert again.json() == first.json() != other.json()
    assert models.QueueMessage.objects.filter(actor_id=handle.actor_id).count() == 2
    assert_error(post(api, path, {"body": 1, "dedupId": ""}), 422, "validation_error")
    assert_error(post(api, path, {"body": 1, "dedupId": 5}), 422, "validation_error")
