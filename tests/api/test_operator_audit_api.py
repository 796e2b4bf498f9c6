"""The audit trail over HTTP: replay and recover take ``{reason?}``, ``GET .../inspector/audit`` lists
``{action, who, reason, at, archived_entries}`` newest first, who is the user name or "token"."""

from __future__ import annotations

import pytest

from tests.api.support import api_user
from tests.api.test_api import API, assert_error, post


def _audit(client, actor_id, **extra):
    response = client.get(f"{API}/actors/{actor_id}/inspector/audit", **extra)
    assert response.status_code == 200, response.content
    return response.json()["items"]


@pytest.fixture
def staff(rivet, client, django_user_model):
    rivet.configure(DEV_MODE=False, INSPECTOR_TOKEN="inspect-me")
    user = api_user(django_user_model, "carol", "view_actor", "replay_workflow", is_staff=True)
    client.force_login(user)
    return client


def test_replay_and_recover_reasons_land_in_the_audit_with_the_user_name(staff, rivet):
    handle = rivet.failed_order()
    path = f"/actors/{handle.actor_id}/inspector/workflow"
    assert post(staff, f"{path}/recover", {"reason": "card fixed"}).status_code == 200
    rivet.drain()
    assert post(staff, f"{path}/replay", {"entryId": "charge", "reason": "re-charge"}).status_code == 200
    latest, first = _audit(staff, handle.actor_id)
    assert (first["action"], first["who"], first["reason"]) == ("recover", "carol", "card fixed")
    assert [e["key"] for e in first["archived_entries"]] == ["charge"]
    assert first["archived_entries"][0]["status"] == "exhausted"
    assert (latest["action"], latest["who"], latest["reason"]) == ("replay", "carol", "re-charge")
    assert latest["archived_entries"][0]["status"] == "completed"  # the charge that had succeeded
    assert latest["at"] >= first["at"]


def test_a_token_caller_is_recorded_as_token(rivet, client):
    rivet.configure(DEV_MODE=False, INSPECTOR_TOKEN="inspect-me")
    handle = rivet.failed_order()
    auth = {"HTTP_AUTHORIZATION": "Bearer inspect-me"}
    path = f"/actors/{handle.actor_id}/inspector/workflow/replay"
    assert post(client, path, None, **auth).status_code == 200
    (row,) = _audit(client, handle.actor_id, **auth)
    assert (row["action"], row["who"], row["reason"]) == ("replay_all", "token", None)
    assert sorted(e["key"] for e in row["archived_entries"]) == ["charge", "fetch-order"]


def test_a_refused_repair_leaves_no_audit_row_and_reasons_are_bounded(staff, rivet):
    handle = rivet.failed_order()
    rivet.runtime.store.claim(handle.actor_id, "another-worker", 30)
    path = f"/actors/{handle.actor_id}/inspector/workflow"
    assert_error(post(staff, f"{path}/recover", {"reason": "x"}), 409, "workflow_in_flight")
    assert _audit(staff, handle.actor_id) == []
    assert_error(post(staff, f"{path}/recover", {"reason": "x" * 2001}), 422, "validation_error")
    assert_error(post(staff, f"{path}/replay", {"reason": 5}), 422, "validation_error")
    assert_error(staff.get(f"{API}/actors/missing/inspector/audit"), 404, "actor_not_found")


def test_an_anonymous_call_in_dev_mode_is_who_dev_mode_as_the_readme_lists(rivet, client):
    """``rivet`` is in dev mode: an anonymous pause is recorded with who "dev-mode", a value the manual's
    list of ``who`` values (docs/reference/audit.md) names, as it names the others."""
    from pathlib import Path

    handle = rivet.client.waiter.get_or_create("anon")
    rivet.drain()
    path = f"/actors/{handle.actor_id}/inspector/workflow"
    assert post(client, f"{path}/pause", {"reason": "anon"}).status_code == 200
    (row,) = _audit(client, handle.actor_id)
    assert (row["action"], row["who"], row["reason"]) == ("pause", "dev-mode", "anon")
    section = (Path(__file__).resolve().parents[2] / "docs" / "reference" / "audit.md").read_text(
        encoding="utf-8"
    )
    who_list = " ".join(section[section.index("`who` (") : section.index("`reason` (")].split())
    for who in ('"dev-mode"', '"token"', '"python"', '"command"'):
        assert f"`{who}`" in who_list, who
