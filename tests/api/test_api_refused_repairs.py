"""Replay and recover over HTTP are refused with a 409 (and change nothing) when the history they would leave
does not replay on the deployed code (``history_diverged``) or the run was rolled back (``rolled_back``)."""

from __future__ import annotations

import pytest

from rivet_workflows.engine.model import definitions as d
from rivet_workflows.engine.model.errors import CriticalError
from tests.api import registry as test_registry
from tests.api.support import api_user
from tests.api.test_api import API, assert_error, post


@pytest.fixture
def api(rivet, client, django_user_model):
    """A test client logged in as a user holding ``use_actor_api`` (dev mode: the inspector is open)."""
    client.force_login(api_user(django_user_model))
    return client


@pytest.fixture
def deploy(monkeypatch):
    """``deploy(run)`` swaps the ``order`` actor's workflow function, like deploying new code."""

    def swap(run):
        monkeypatch.setattr(test_registry.registry.get("order"), "run", d.workflow(run))

    return swap


def _history(client, actor_id):
    return client.get(f"{API}/actors/{actor_id}/inspector/workflow-history").json()


async def renamed_run(ctx):  # "fetch-order" renamed without ctx.removed or a version gate
    await ctx.step("load-order", lambda s: {"order": 42})
    await ctx.step(name="charge", run=lambda s: {"charged": True}, max_retries=0)
    return "done"


@pytest.mark.parametrize("how", ["replay", "recover"])
def test_a_repair_that_would_diverge_is_409_history_diverged(api, rivet, deploy, how):
    handle = rivet.failed_order()
    deploy(renamed_run)
    before = _history(api, handle.actor_id)
    path = f"/actors/{handle.actor_id}/inspector/workflow/{how}"
    response = post(api, path, {"entryId": "charge"}) if how == "replay" else post(api, path)
    body = assert_error(response, 409, "history_diverged")
    assert body["metadata"]["location"] == "fetch-order"
    assert body["metadata"]["reached"] == "load-order"
    assert "new step 'load-order'" in body["message"] and "get_version" in body["message"]
    if how == "replay":  # kept: fetch-order only, which a removed marker would retire
        assert "ctx.removed('fetch-order', 'step')" in body["message"]
    else:  # fetch-order and charge recorded: the run is past the rename, only a version gate fits it
        assert "past this change" in body["message"]
    assert "rivet check" in body["metadata"]["hint"]
    assert _history(api, handle.actor_id) == before  # still failed, nothing deleted or reset
    assert handle.workflow_state() == "failed"


def test_replay_after_a_compensated_step_is_409_rolled_back(api, rivet, deploy):
    undone = []

    def notify(step):
        if test_registry.is_broken():
            raise CriticalError("mail server rejected us")
        return "sent"

    async def booking(ctx):
        await ctx.rollback_checkpoint("start")
        await ctx.step("reserve", lambda s: "r-1", rollback=lambda s, out: undone.append("release"))
        await ctx.step("charge", lambda s: "c-1", rollback=lambda s, out: undone.append("refund"))
        await ctx.step("notify", notify)
        return "booked"

    deploy(booking)
    test_registry.FLAGS["broken"] = True
    handle = rivet.client.order.get_or_create("b1")
    rivet.drain()
    test_registry.FLAGS["broken"] = False
    assert handle.workflow_state() == "failed" and undone == ["refund", "release"]
    before = _history(api, handle.actor_id)
    path = f"/actors/{handle.actor_id}/inspector/workflow"

    body = assert_error(post(api, f"{path}/replay", {"entryId": "charge"}), 409, "rolled_back")
    assert body["metadata"]["replay_from"] == "reserve"
    assert body["metadata"]["compensated"] == ["reserve"]  # the steps the replay would keep
    assert "Replay from 'reserve'" in body["message"] and "replay all" in body["message"]
    assert_error(post(api, f"{path}/recover"), 409, "rolled_back")
    assert _history(api, handle.actor_id) == before

    replayed = post(api, f"{path}/replay", {"entryId": "reserve"})
    assert replayed.status_code == 200, replayed.content
    rivet.drain()
    assert handle.workflow_state() == "completed" and handle.record().output == "booked"


@pytest.mark.parametrize(
    ("how", "code"),
    [
        ("recover", "workflow_not_failed"),
        ("replay", "entry_not_found"),
    ],
)
def test_a_refused_repair_of_a_completed_run_leaves_the_actor_row_as_it_was(api, rivet, how, code):
    """The lease token, lease owner and ``updated_at`` stay: the refusal is decided before any claim."""
    from rivet_workflows import models

    handle = rivet.client.order.get_or_create("done")
    rivet.drain()
    assert handle.workflow_state() == "completed"
    before = models.Actor.objects.filter(pk=handle.actor_id).values().get()
    history = _history(api, handle.actor_id)
    body = {"entryId": "no-such-step"} if how == "replay" else None
    answer = post(api, f"/actors/{handle.actor_id}/inspector/workflow/{how}", body)
    assert_error(answer, 409 if how == "recover" else 404, code)
    assert models.Actor.objects.filter(pk=handle.actor_id).values().get() == before
    assert _history(api, handle.actor_id) == history
