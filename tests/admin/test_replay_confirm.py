"""The admin's replay buttons open a confirmation page with the plan; nothing changes until it is
confirmed with a POST (DESIGN.md section 16; docs/howto/admin.md)."""

from __future__ import annotations

import re

from django.urls import reverse

from rivet_workflows import models
from tests.admin.test_admin import admin_client_ as admin_client_  # noqa: F401 - the fixture
from tests.admin.test_admin import change_url


def _rows(actor_id):
    actor = models.Actor.objects.filter(pk=actor_id).values().get()
    history = list(models.HistoryEntry.objects.filter(actor_id=actor_id).order_by("id").values())
    return actor, history, models.OperatorAction.objects.filter(actor_id=actor_id).count()


def test_replay_from_a_step_shows_its_plan_and_changes_nothing(admin_client_, rivet):
    handle = rivet.failed_order()
    url = reverse("admin:rivet_workflows_actor_replay", args=[handle.actor_id])
    before = _rows(handle.actor_id)

    page = admin_client_.get(url, {"entry_id": "charge", "reason": "card fixed"})

    assert page.status_code == 200
    html = page.content.decode()
    assert 'id="rivet-replay-rerun"' in html and "<li><code>charge</code></li>" in html
    assert "1 step will run again" in html and "new idempotency key" in html
    assert 'name="reason" id="rivet-replay-reason"' in html and 'value="card fixed"' in html
    assert re.search(
        r'<form method="post" action="[^"]*/replay/">\s*<input type="hidden" name="csrfmiddlewaretoken"', html
    )
    assert 'name="entry_id" value="charge"' in html and 'id="rivet-replay-cancel"' in html
    rivet.drain()
    assert _rows(handle.actor_id) == before and handle.workflow_state() == "failed"

    confirmed = admin_client_.post(url, {"entry_id": "charge", "reason": "card fixed"}, follow=True)
    assert "Replaying from step &#x27;charge&#x27;" in confirmed.content.decode()
    (row,) = handle.runtime.store.operator_actions(handle.actor_id)
    assert (row.action, row.reason) == ("replay", "card fixed")


def test_replay_all_shows_every_step_that_runs_again(admin_client_, rivet):
    handle = rivet.failed_order()
    url = reverse("admin:rivet_workflows_actor_replay", args=[handle.actor_id])
    html = admin_client_.get(url).content.decode()
    assert "Replay the whole workflow from the start?" in html
    assert html.index("<li><code>fetch-order</code></li>") < html.index("<li><code>charge</code></li>")
    assert "2 steps will run again" in html and 'name="entry_id"' not in html


def test_a_plan_that_would_be_refused_goes_back_with_the_refusal(admin_client_, rivet):
    handle = rivet.failed_order()
    rivet.runtime.store.claim(handle.actor_id, "another-worker", 30)
    url = reverse("admin:rivet_workflows_actor_replay", args=[handle.actor_id])
    response = admin_client_.get(url, {"entry_id": "charge"}, follow=True)
    text = response.content.decode()
    assert response.redirect_chain[-1][0] == change_url(handle.actor_id)
    assert "Replay refused" in text and "running" in text


def test_the_trace_page_replay_buttons_ask_first_and_it_has_one_reason_box(admin_client_, rivet):
    handle = rivet.failed_order()
    html = admin_client_.get(change_url(handle.actor_id)).content.decode()
    replay = reverse("admin:rivet_workflows_actor_replay", args=[handle.actor_id])
    assert html.count(f'<form method="get" action="{replay}"') == 1 + html.count('rivet-replay-step"')
    assert f'<form method="post" action="{replay}"' not in html  # no replay at one click
    assert len(re.findall(r'<input type="text"[^>]*(?:reason|maxlength="(?:1000|2000)")', html)) == 1
