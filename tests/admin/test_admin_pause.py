"""The admin's Pause and Resume buttons (DESIGN.md section 12): POST with CSRF, the replay permission."""

from __future__ import annotations

from django.urls import reverse

from tests.admin.test_admin import admin_client_, change_url  # noqa: F401 - fixture


def test_pause_and_resume_buttons(admin_client_, rivet):  # noqa: F811
    handle = rivet.client.waiter.get_or_create("w1")
    rivet.drain()
    page = admin_client_.get(change_url(handle.actor_id)).content.decode()
    assert 'id="rivet-pause"' in page and 'id="rivet-resume"' not in page
    pause = reverse("admin:rivet_workflows_actor_pause", args=[handle.actor_id])
    text = admin_client_.post(pause, {"reason": "incident 42"}, follow=True).content.decode()
    assert "Paused: no new step starts" in text and "incident 42" in text and 'id="rivet-resume"' in text
    assert handle.workflow_state() == "paused"
    listing = admin_client_.get(reverse("admin:rivet_workflows_actor_changelist")).content.decode()
    assert ">paused<" in listing
    resume = reverse("admin:rivet_workflows_actor_resume", args=[handle.actor_id])
    text = admin_client_.post(resume, follow=True).content.decode()
    assert "Resumed: it runs again." in text and handle.workflow_state() == "sleeping"
    assert admin_client_.get(pause).status_code == 405  # POST only
    rows = rivet.runtime.store.operator_actions(handle.actor_id)  # the audit: who is the signed-in user
    assert [(r.action, r.who, r.reason) for r in rows] == [
        ("resume", "root", None),
        ("pause", "root", "incident 42"),
    ]


def test_pause_needs_the_replay_permission(client, django_user_model, rivet):
    user = django_user_model.objects.create_user("viewer", password="pw", is_staff=True)
    from django.contrib.auth.models import Permission

    user.user_permissions.add(Permission.objects.get(codename="view_actor"))
    client.force_login(user)
    handle = rivet.client.waiter.get_or_create("w2")
    pause = reverse("admin:rivet_workflows_actor_pause", args=[handle.actor_id])
    assert client.post(pause).status_code == 403
    assert handle.workflow_state() != "paused"


def test_the_cancel_button_cancels_a_paused_workflow(admin_client_, rivet):  # noqa: F811
    handle = rivet.client.waiter.get_or_create("w3")
    rivet.drain()
    assert handle.pause("incident 7") is True
    page = admin_client_.get(change_url(handle.actor_id)).content.decode()
    assert 'id="rivet-cancel"' in page and 'id="rivet-cancel" disabled' not in page
    cancel = reverse("admin:rivet_workflows_actor_cancel", args=[handle.actor_id])
    text = admin_client_.post(cancel, {"reason": "obsolete"}, follow=True).content.decode()
    assert "Cancelled: it never runs again." in text and handle.workflow_state() == "cancelled"
    assert 'id="rivet-cancel" disabled' in text  # finished: nothing left to cancel
    assert 'id="rivet-resume"' not in text  # nor to resume: the pause ended with the workflow
    row = rivet.runtime.store.operator_actions(handle.actor_id)[0]
    assert (row.action, row.who, row.reason) == ("cancel", "root", "obsolete")
    again = admin_client_.post(cancel, follow=True).content.decode()
    assert "Not cancelled: it has finished already." in again
    assert admin_client_.get(cancel).status_code == 405  # POST only


def test_cancel_needs_the_replay_permission(client, django_user_model, rivet):
    from django.contrib.auth.models import Permission

    user = django_user_model.objects.create_user("viewer", password="pw", is_staff=True)
    user.user_permissions.add(Permission.objects.get(codename="view_actor"))
    client.force_login(user)
    handle = rivet.client.waiter.get_or_create("w4")
    cancel = reverse("admin:rivet_workflows_actor_cancel", args=[handle.actor_id])
    assert client.post(cancel).status_code == 403
    assert handle.workflow_state() != "cancelled"
