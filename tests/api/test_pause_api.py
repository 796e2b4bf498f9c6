"""``POST /actors/{id}/inspector/workflow/pause`` and ``/resume`` (DESIGN.md section 12), and their access."""

from __future__ import annotations

from tests.api.test_api import (
    api,  # noqa: F401 - fixture
    assert_error,
    post,
)


def test_pause_and_resume_over_http(api, rivet):  # noqa: F811
    handle = rivet.client.waiter.get_or_create("w1")
    rivet.drain()
    path = f"/actors/{handle.actor_id}/inspector/workflow"
    paused = post(api, f"{path}/pause", {"reason": "maintenance"})
    assert paused.status_code == 200, paused.content
    assert paused.json() == {
        "actorId": handle.actor_id,
        "changed": True,
        "workflowState": "paused",
        "pauseReason": "maintenance",
    }
    assert post(api, f"{path}/pause").json()["changed"] is False  # paused already
    handle.send("approval", {"ok": True})  # accepted and kept
    assert rivet.drain().actors_run == 0  # never claimed while paused
    resumed = post(api, f"{path}/resume", {})
    assert resumed.status_code == 200 and resumed.json()["changed"] is True
    assert post(api, f"{path}/resume").json()["changed"] is False  # a no-op on an actor not paused
    rivet.drain()
    assert handle.workflow_state() == "completed"


def test_pause_rejects_bad_input_with_json_errors(api, rivet):  # noqa: F811
    handle = rivet.client.waiter.get_or_create("w2")
    path = f"/actors/{handle.actor_id}/inspector/workflow/pause"
    assert post(api, path, {"reason": 3}).status_code == 422
    assert post(api, path, {"reason": "x" * 1001}).status_code == 422
    assert post(api, path, "{not json").status_code == 400
    assert_error(post(api, "/actors/missing/inspector/workflow/pause"), 404, "actor_not_found")
    assert_error(post(api, "/actors/missing/inspector/workflow/resume"), 404, "actor_not_found")
    assert handle.workflow_state() != "paused"


def test_pause_needs_the_inspector_write_access(rivet, client):
    rivet.configure(DEV_MODE=False, INSPECTOR_TOKEN="secret")
    handle = rivet.client.waiter.get_or_create("w3")
    path = f"/api/rivet/actors/{handle.actor_id}/inspector/workflow/pause"
    assert client.post(path, data="{}", content_type="application/json").status_code == 401
    ok = client.post(path, data="{}", content_type="application/json", HTTP_AUTHORIZATION="Bearer secret")
    assert ok.status_code == 200 and ok.json()["changed"] is True


def test_pause_and_resume_are_operator_actions_in_the_audit(rivet, client):
    rivet.configure(DEV_MODE=False, INSPECTOR_TOKEN="secret")
    handle = rivet.client.waiter.get_or_create("w4")
    rivet.drain()
    auth = {"HTTP_AUTHORIZATION": "Bearer secret"}
    path = f"/api/rivet/actors/{handle.actor_id}/inspector"

    def call(verb, body):
        return client.post(f"{path}/workflow/{verb}", data=body, content_type="application/json", **auth)

    assert call("pause", '{"reason": "db maintenance"}').json()["changed"] is True
    assert call("pause", '{"reason": "again"}').json()["changed"] is False  # a no-op: no audit row
    assert call("resume", '{"reason": "done"}').json()["changed"] is True
    handle.pause()  # the Python API: who "python"
    rows = client.get(f"{path}/audit", **auth).json()["items"]
    assert [(r["action"], r["who"], r["reason"]) for r in rows] == [
        ("pause", "python", None),
        ("resume", "token", "done"),
        ("pause", "token", "db maintenance"),
    ]
    assert all(r["archived_entries"] == [] for r in rows)


def test_a_paused_workflow_is_cancelled_over_http_and_a_finished_one_is_left_as_it_is(api, rivet):  # noqa: F811
    from rivet_workflows import models

    handle = rivet.client.waiter.get_or_create("w-cancel")
    rivet.drain()
    path = f"/actors/{handle.actor_id}/inspector/workflow"
    assert post(api, f"{path}/pause", {"reason": "maintenance"}).json()["changed"] is True
    cancelled = post(api, f"{path}/cancel", {"reason": "not needed"})
    assert cancelled.status_code == 200, cancelled.content
    assert cancelled.json() == {"actorId": handle.actor_id, "changed": True, "workflowState": "cancelled"}
    row = rivet.runtime.store.operator_actions(handle.actor_id)[0]
    assert (row.action, row.reason) == ("cancel", "not needed")
    before = models.Actor.objects.filter(pk=handle.actor_id).values().get()
    again = post(api, f"{path}/cancel")
    assert again.status_code == 200 and again.json()["changed"] is False
    assert models.Actor.objects.filter(pk=handle.actor_id).values().get() == before  # nothing written
    assert post(api, f"{path}/cancel", {"reason": 3}).status_code == 422
    assert_error(post(api, "/actors/missing/inspector/workflow/cancel"), 404, "actor_not_found")
