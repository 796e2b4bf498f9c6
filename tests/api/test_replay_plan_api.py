"""HTTP replay with ``dryRun`` answers the plan and changes nothing; operator bodies refuse unknown fields
(DESIGN.md section 16; docs/explanation/replay-and-recover.md)."""

from __future__ import annotations

import pytest

from tests.api.test_api import API, assert_error, post
from tests.api.test_api import api as api  # noqa: F401 - the fixture


def _history(api, actor_id):
    return api.get(f"{API}/actors/{actor_id}/inspector/workflow-history").json()


def test_a_dry_run_replay_answers_the_plan_and_changes_nothing(api, rivet):
    handle = rivet.failed_order()
    path = f"/actors/{handle.actor_id}/inspector/workflow/replay"
    before = (
        _history(api, handle.actor_id),
        handle.record(),
        api.get(f"{API}/actors/{handle.actor_id}/inspector/audit").json(),
    )

    planned = post(api, path, {"entryId": "charge", "reason": "card fixed", "dryRun": True})

    assert planned.status_code == 200, planned.content
    assert planned.json() == {"entryId": "charge", "reset": [], "deleted": ["charge"], "rerun": ["charge"]}
    everything = post(api, path, {"dryRun": True}).json()
    assert everything["entryId"] is None and everything["rerun"] == ["fetch-order", "charge"]
    after = (
        _history(api, handle.actor_id),
        handle.record(),
        api.get(f"{API}/actors/{handle.actor_id}/inspector/audit").json(),
    )
    assert after == before
    rivet.drain()
    assert handle.workflow_state() == "failed"  # nothing was woken

    replayed = post(api, path, {"entryId": "charge", "dryRun": False})
    assert replayed.status_code == 200 and replayed.json()["deleted"] == ["charge"]


def test_a_dry_run_answers_the_refusal_the_replay_would_get(api, rivet):
    handle = rivet.failed_order()
    path = f"/actors/{handle.actor_id}/inspector/workflow/replay"
    assert_error(post(api, path, {"entryId": "nope", "dryRun": True}), 404, "entry_not_found")
    rivet.runtime.store.claim(handle.actor_id, "another-worker", 30)
    assert_error(post(api, path, {"entryId": "charge", "dryRun": True}), 409, "workflow_in_flight")


@pytest.mark.parametrize(
    ("operation", "body"),
    [
        ("replay", {"entryId": "charge", "dry_run": True}),  # a misspelt dryRun must not replay
        ("replay", {"dryRun": "yes"}),
        ("recover", {"reason": "x", "force": True}),
        ("pause", {"why": "x"}),
        ("resume", {"reason": "x", "now": 1}),
    ],
)
def test_an_operator_body_with_an_unknown_field_is_422_and_changes_nothing(api, rivet, operation, body):
    handle = rivet.failed_order()
    before = (_history(api, handle.actor_id), handle.record())
    path = f"/actors/{handle.actor_id}/inspector/workflow/{operation}"
    assert_error(post(api, path, body), 422, "validation_error")
    assert (_history(api, handle.actor_id), handle.record()) == before
