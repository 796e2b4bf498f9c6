"""Reads and refused calls over HTTP write nothing to the actor (field case C50): a dashboard polling a
finished actor's read-only action, or a recover refused with 409, leaves ``updated_at`` where the last
change put it, so ``rivet prune --older-than`` ("not updated for N days") still finds the actor."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.core.management import call_command

from rivet_workflows import models
from tests.api.support import api_user
from tests.api.test_api import API, assert_error, post


@pytest.fixture
def api(rivet, client, django_user_model):
    """A test client logged in as a user holding ``use_actor_api`` (dev mode: the inspector is open)."""
    client.force_login(api_user(django_user_model))
    return client


def _updated_at(client, actor_id):
    response = client.get(f"{API}/actors/{actor_id}")
    assert response.status_code == 200, response.content
    return response.json()["updated_at"]


def test_polling_a_read_only_action_and_a_refused_recover_leave_a_finished_actor_unchanged(api, rivet):
    handle = rivet.client.order.get_or_create("o1")
    rivet.drain()
    assert handle.workflow_state() == "completed"
    row = models.Actor.objects.get(pk=handle.actor_id)
    before = _updated_at(api, handle.actor_id)
    for _ in range(3):  # the dashboard polls
        response = post(api, f"/actors/{handle.actor_id}/actions/get_state", {"args": []})
        assert response.status_code == 200 and response.json() == {"result": {"charged": 1}}
    body = assert_error(
        post(api, f"/actors/{handle.actor_id}/inspector/workflow/recover"), 409, "workflow_not_failed"
    )
    assert "nothing to recover" in body["message"]
    assert _updated_at(api, handle.actor_id) == before
    after = models.Actor.objects.get(pk=handle.actor_id)
    assert (after.state, after.workflow_state, after.wake_at, after.lease_owner) == (
        row.state,
        row.workflow_state,
        None,
        None,
    )


def test_prune_deletes_a_finished_actor_that_is_only_polled(api, rivet):
    handle = rivet.client.order.get_or_create("o1")
    rivet.drain()
    long_ago = rivet.runtime.store.now() - timedelta(days=10)
    models.Actor.objects.filter(pk=handle.actor_id).update(updated_at=long_ago)  # finished 10 days ago
    assert post(api, f"/actors/{handle.actor_id}/actions/get_state", {"args": []}).status_code == 200
    assert_error(
        post(api, f"/actors/{handle.actor_id}/inspector/workflow/recover"), 409, "workflow_not_failed"
    )
    call_command("rivet", "prune", "--older-than", "5")
    assert not models.Actor.objects.filter(pk=handle.actor_id).exists()
