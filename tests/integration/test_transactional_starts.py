"""Starting or signalling a workflow inside the caller's ``transaction.atomic()`` (docs/howto/calling.md):
``get_or_create``, ``create`` and ``send`` write in that transaction, roll
back with it, and wake a worker only when it commits. On SQLite and, with DATABASE_URL, on PostgreSQL.

Celery runs its tasks eagerly here: a wake-up sent is a run done at once, so "nothing ran yet" inside the
block and "it ran" after the commit show when the wake-up was sent.
"""

from __future__ import annotations

import pytest
from django.db import transaction

from rivet_workflows import models
from rivet_workflows.engine.model import ports

pytestmark = pytest.mark.django_db(transaction=True)


class ViewFailed(Exception):
    pass


@pytest.fixture
def client(celery_runtime):
    """The client on the integration registry (approval: a step, then a wait for a message "approval")."""
    return celery_runtime.client()


def state_of(actor_id):
    return models.Actor.objects.get(pk=actor_id).workflow_state


@pytest.mark.parametrize("start", ["get_or_create", "create"])
def test_a_start_rolled_back_with_the_callers_transaction_leaves_nothing(client, start):
    with pytest.raises(ViewFailed), transaction.atomic():
        handle = getattr(client.approval, start)("order-1")
        assert state_of(handle.actor_id) == ports.PENDING  # written, visible inside the transaction
        raise ViewFailed
    assert not models.Actor.objects.exists() and not models.HistoryEntry.objects.exists()
    # the key is free again: a later start creates it as new and runs it
    handle = getattr(client.approval, start)("order-1")
    assert state_of(handle.actor_id) == ports.SLEEPING


@pytest.mark.parametrize("start", ["get_or_create", "create"])
def test_a_start_in_a_transaction_wakes_the_worker_only_on_commit(client, start):
    with transaction.atomic():
        handle = getattr(client.approval, start)("order-2")
        assert state_of(handle.actor_id) == ports.PENDING  # no run before the commit
        assert not models.HistoryEntry.objects.filter(actor_id=handle.actor_id).exists()
    assert state_of(handle.actor_id) == ports.SLEEPING  # run on commit: its step done, waiting for approval


def test_a_send_rolled_back_with_the_callers_transaction_is_never_delivered(client):
    handle = client.approval.get_or_create("order-3")
    with pytest.raises(ViewFailed), transaction.atomic():
        handle.send("approval", {"ok": True})
        assert models.QueueMessage.objects.filter(actor_id=handle.actor_id).count() == 1
        raise ViewFailed
    assert not models.QueueMessage.objects.filter(actor_id=handle.actor_id).exists()
    assert state_of(handle.actor_id) == ports.SLEEPING  # still waiting: the message never existed


def test_a_send_in_a_transaction_wakes_the_workflow_only_on_commit(client):
    handle = client.approval.get_or_create("order-4")
    with transaction.atomic():
        handle.send("approval", {"ok": False})
        assert state_of(handle.actor_id) == ports.SLEEPING  # not delivered before the commit
    assert state_of(handle.actor_id) == ports.COMPLETED
    assert handle.record().output == {"amount": 42, "approved": False}


def test_a_start_and_a_send_in_one_rolled_back_transaction_leave_nothing(client):
    with pytest.raises(ViewFailed), transaction.atomic():
        handle = client.approval.create("order-5")
        handle.send("approval", {"ok": True})
        raise ViewFailed
    assert not models.Actor.objects.exists() and not models.QueueMessage.objects.exists()
