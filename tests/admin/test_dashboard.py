"""The admin dashboard (counts, the last hour's chart, expired leases, oldest due actor, failing steps) and
the actor list's bulk actions with their confirmation page and permission (DESIGN.md section 12)."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest
from django.contrib.admin.helpers import ACTION_CHECKBOX_NAME
from django.urls import reverse

from rivet_workflows import models
from tests.api.support import api_user

DASHBOARD = "/admin/rivet_workflows/dashboard/"
LIST = "/admin/rivet_workflows/actor/"


@pytest.fixture
def root(client, django_user_model):
    client.force_login(django_user_model.objects.create_superuser("root", password="pw"))
    return client


def test_the_dashboard_counts_charts_and_lists_what_needs_attention(root, rivet):
    failed = [rivet.failed_order(f"f{i}") for i in range(2)]
    done = rivet.client.order.get_or_create("ok")
    rivet.drain()
    rivet.client.counter.get_or_create("c")
    stuck = rivet.client.order.get_or_create("stuck")
    now = rivet.runtime.store.now()
    models.Actor.objects.filter(pk=stuck.actor_id).update(
        lease_owner="dead-worker",
        lease_expires_at=now - timedelta(seconds=5),
        wake_at=now - timedelta(minutes=3),
    )
    assert reverse("admin:rivet_workflows_dashboard_changelist") == DASHBOARD
    index = root.get("/admin/rivet_workflows/").content.decode()
    assert f'href="{DASHBOARD}"' in index  # linked from the app index
    page = root.get(DASHBOARD)
    assert page.status_code == 200
    html = page.content.decode()
    assert 'id="rivet-chart"' in html and "<svg" in html and "cdn" not in html.lower()
    assert html.count('class="rivet-bar-failed"') == 1 and 'class="rivet-bar-completed"' in html
    assert "2 failed at" in html  # the tooltip of the minute both failed in
    assert '<dd id="rivet-failed-hour">2</dd>' in html and '<dd id="rivet-completed-hour">1</dd>' in html
    assert '<dd id="rivet-expired-count">1</dd>' in html
    assert f"/admin/rivet_workflows/actor/{stuck.actor_id}/change/" in html  # oldest due and expired
    assert "<code>charge</code>" in html  # the failing step
    assert 'data-type="order"' in html and 'data-type="counter"' in html
    assert done.workflow_state() == "completed" and len(failed) == 2


def test_steps_failing_most_counts_failed_attempts_with_the_final_outcome_flaky_steps_included(root, rivet):
    flaky = rivet.client.counter.get_or_create("flaky")
    exhausted = rivet.failed_order("gave-up")
    now = rivet.runtime.store.now()
    for key, status, attempts in [
        ("fetch", "completed", 4),
        ("fetch-b", "completed", 1),
        ("ping", "failed", 2),
    ]:
        models.HistoryEntry.objects.create(
            actor_id=flaky.actor_id, key=key, kind="step", status=status, attempts=attempts, created_at=now
        )
    html = root.get(DASHBOARD).content.decode()

    def row(step):
        found = re.search(rf'<tr data-step="{step}">(.*?)</tr>', html, flags=re.S)
        assert found, (step, html)
        return re.findall(r'<td class="rivet-num">(\d+)</td>', found.group(1))

    # failed attempts, then completed, retrying, exhausted
    assert row("counter/fetch") == ["3", "1", "0", "0"]  # failed three times, then succeeded
    assert row("counter/ping") == ["2", "0", "1", "0"]  # two failed attempts, retrying
    assert 'data-step="counter/fetch-b"' not in html  # succeeded at once: not failing
    charge = models.HistoryEntry.objects.get(actor_id=exhausted.actor_id, key="charge")
    assert row("order/charge") == [str(charge.attempts), "0", "0", "1"]
    assert html.index('data-step="counter/fetch"') < html.index('data-step="counter/ping"')  # most first


def test_the_dashboard_needs_the_view_permission(client, rivet, django_user_model):
    client.force_login(api_user(django_user_model, "nobody", "use_actor_api", is_staff=True))
    assert client.get(DASHBOARD).status_code == 403
    client.force_login(api_user(django_user_model, "viewer", "view_actor", is_staff=True))
    assert client.get(DASHBOARD).status_code == 200


def _select(client, action, ids, **extra):
    return client.post(LIST, {"action": action, ACTION_CHECKBOX_NAME: ids, **extra}, follow=True)


def test_bulk_recover_asks_first_then_recovers_and_records_each_actor(root, rivet):
    failed = [rivet.failed_order(f"f{i}") for i in range(2)]
    fine = rivet.client.order.get_or_create("fine")
    rivet.drain()
    ids = [h.actor_id for h in (*failed, fine)]
    confirm = _select(root, "recover_selected", ids).content.decode()
    assert 'id="rivet-bulk-confirm"' in confirm and "Recover 3 workflows?" in confirm
    assert all(h.workflow_state() == "failed" for h in failed)  # nothing done before the confirmation
    done = _select(
        root, "recover_selected", ids, post="yes", reason="payment provider is back"
    ).content.decode()
    assert "Bulk recover: 2 done, 1 had nothing to recover, 0 refused." in done
    rivet.drain()
    assert all(h.workflow_state() == "completed" for h in failed)
    for handle in failed:
        (row,) = rivet.runtime.store.operator_actions(handle.actor_id)
        assert (row.action, row.who, row.reason) == ("bulk_recover", "root", "payment provider is back")
    assert rivet.runtime.store.operator_actions(fine.actor_id) == []


def test_bulk_cancel_needs_the_replay_permission(client, rivet, django_user_model):
    handle = rivet.client.waiter.get_or_create("w")
    rivet.drain()
    client.force_login(api_user(django_user_model, "viewer", "view_actor", is_staff=True))
    page = client.get(LIST).content.decode()
    assert "cancel_selected" not in page  # the action is not offered
    _select(client, "cancel_selected", [handle.actor_id], post="yes")  # posted anyway: ignored
    assert handle.workflow_state() != "cancelled"
    assert rivet.runtime.store.operator_actions(handle.actor_id) == []
    client.force_login(
        api_user(django_user_model, "operator", "view_actor", "replay_workflow", is_staff=True)
    )
    done = _select(client, "cancel_selected", [handle.actor_id], post="yes", reason="").content.decode()
    assert "Bulk cancel: 1 done" in done and handle.workflow_state() == "cancelled"
    (row,) = rivet.runtime.store.operator_actions(handle.actor_id)
    assert (row.action, row.who, row.reason) == ("bulk_cancel", "operator", None)


def test_bulk_pause_then_resume_records_each_actor_and_the_run_goes_on(root, rivet):
    waiting = [rivet.client.waiter.get_or_create(f"w{i}") for i in range(2)]
    rivet.drain()
    ids = [h.actor_id for h in waiting]
    assert "Pause 2 workflows?" in _select(root, "pause_selected", ids).content.decode()
    assert all(h.workflow_state() != "paused" for h in waiting)  # nothing done before the confirmation
    done = _select(root, "pause_selected", ids, post="yes", reason="maintenance").content.decode()
    assert "Bulk pause: 2 done" in done
    assert all(h.workflow_state() == "paused" for h in waiting)
    again = _select(root, "pause_selected", ids, post="yes", reason="").content.decode()
    assert "Bulk pause: 0 done, 2 had nothing to pause" in again  # paused already: no change, no row
    confirm = _select(root, "resume_selected", ids).content.decode()
    assert confirm.count(">paused<") == 2  # the confirmation shows the badge the list shows
    done = _select(root, "resume_selected", ids, post="yes", reason="done").content.decode()
    assert "Bulk resume: 2 done" in done
    for handle in waiting:
        rows = rivet.runtime.store.operator_actions(handle.actor_id)
        assert [(r.action, r.who, r.reason) for r in rows] == [
            ("bulk_resume", "root", "done"),
            ("bulk_pause", "root", "maintenance"),
        ]
        assert handle.workflow_state() != "paused"
