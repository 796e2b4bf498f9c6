"""The actor list's bulk actions report each actor: what was changed, what had nothing to do and why, and
what was refused and why; one actor's refusal or error never fails the batch (docs/howto/admin.md).
A paused workflow can be cancelled in bulk."""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.admin.helpers import ACTION_CHECKBOX_NAME

from rivet_workflows import models
from rivet_workflows.engine.operate import repairs

LIST = "/admin/rivet_workflows/actor/"


@pytest.fixture
def root(client, django_user_model):
    client.force_login(django_user_model.objects.create_superuser("root", password="pw"))
    return client


def _confirmed(client, action: str, ids: list[str], reason: str = "") -> Any:
    response = client.post(
        LIST, {"action": action, ACTION_CHECKBOX_NAME: ids, "post": "yes", "reason": reason}, follow=True
    )
    assert response.status_code == 200
    return [str(m) for m in response.context["messages"]]


def _row(actor_id: str) -> dict:
    return models.Actor.objects.filter(pk=actor_id).values().get()


def test_bulk_cancel_of_a_paused_and_a_sleeping_workflow_cancels_both_and_names_each(root, rivet):
    paused, sleeping = (rivet.client.waiter.get_or_create(k) for k in ("a", "b"))
    rivet.drain()
    assert paused.pause("maintenance") is True
    assert (paused.workflow_state(), sleeping.workflow_state()) == ("paused", "sleeping")
    said = _confirmed(root, "cancel_selected", [paused.actor_id, sleeping.actor_id], "not needed")
    assert said[0] == "Bulk cancel: 2 done, 0 had nothing to cancel, 0 refused."
    assert paused.actor_id in said[1] and sleeping.actor_id in said[1] and said[1].startswith("Cancelled: ")
    assert (paused.workflow_state(), sleeping.workflow_state()) == ("cancelled", "cancelled")
    for handle in (paused, sleeping):
        row = rivet.runtime.store.operator_actions(handle.actor_id)[0]
        assert (row.action, row.who, row.reason) == ("bulk_cancel", "root", "not needed")


def test_a_finished_actor_in_a_bulk_cancel_is_reported_while_the_rest_are_cancelled(root, rivet):
    done = rivet.client.waiter.get_or_create("done")
    waiting = rivet.client.waiter.get_or_create("waiting")
    rivet.drain()
    done.send("approval", "yes")
    rivet.drain()
    assert done.workflow_state() == "completed"
    before = _row(done.actor_id)
    said = _confirmed(root, "cancel_selected", [done.actor_id, waiting.actor_id])
    assert said[0] == "Bulk cancel: 1 done, 1 had nothing to cancel, 0 refused."
    assert said[1] == f"Cancelled: {waiting.actor_id}."
    assert (
        said[2]
        == f"Nothing to cancel: {done.actor_id} (the workflow is completed already; nothing to cancel)."
    )
    assert waiting.workflow_state() == "cancelled"
    assert _row(done.actor_id) == before  # nothing written: no lease taken, no updated_at
    assert rivet.runtime.store.operator_actions(done.actor_id) == []


def test_a_refused_or_failing_actor_is_reported_and_the_others_proceed(root, rivet, monkeypatch):
    failed = [rivet.failed_order(k) for k in ("f1", "f2", "f3", "f4")]
    fine = rivet.client.order.get_or_create("fine")
    rivet.drain()
    running, broken = failed[1], failed[2]
    assert rivet.runtime.store.claim(running.actor_id, "a-running-worker", 60) is not None
    running_row = _row(running.actor_id)
    real = repairs.recover

    def recover(runtime, actor_id, **kwargs):
        if actor_id == broken.actor_id:
            raise RuntimeError("the database hiccuped")
        return real(runtime, actor_id, **kwargs)

    monkeypatch.setattr(repairs, "recover", recover)
    ids = [h.actor_id for h in (*failed, fine)]
    said = _confirmed(root, "recover_selected", ids, "provider is back")
    assert said[0] == "Bulk recover: 2 done, 1 had nothing to recover, 2 refused."
    assert failed[0].actor_id in said[1] and failed[3].actor_id in said[1]
    assert said[2].startswith("Nothing to recover: ") and fine.actor_id in said[2]
    refused = said[3]
    assert f"{running.actor_id} (the workflow is running)" in refused
    assert f"{broken.actor_id} (error: RuntimeError: the database hiccuped)" in refused
    assert [failed[0].workflow_state(), failed[3].workflow_state()] == ["sleeping", "sleeping"]
    assert _row(running.actor_id) == running_row  # refused before any write
    assert broken.workflow_state() == "failed"
