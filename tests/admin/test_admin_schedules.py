"""Schedules in the admin (DESIGN.md section 20): the list, the fire log, and the pause, resume and trigger
actions, which need the ``schedule`` operation (staff with ``view_actor`` and ``replay_workflow``)."""

from __future__ import annotations

from django.contrib.auth.models import Permission
from django.urls import reverse

CHANGELIST = "admin:rivet_workflows_schedule_changelist"


def _staff(django_user_model, name: str, *codenames: str):
    user = django_user_model.objects.create_user(name, password="pw", is_staff=True)
    for codename in codenames:
        user.user_permissions.add(Permission.objects.get(codename=codename))
    return user


def _act(client, action: str, *ids: str):
    return client.post(
        reverse(CHANGELIST), {"action": action, "_selected_action": list(ids)}, follow=True
    ).content.decode()


def test_an_operator_pauses_resumes_and_triggers_schedules_from_the_list(client, django_user_model, rivet):
    schedules = rivet.client.schedules
    schedules.create("nightly", actor="order", cron="0 3 * * *")
    schedules.create("ping", actor="counter", key="c", every=60)
    client.force_login(_staff(django_user_model, "op", "view_actor", "replay_workflow"))
    listing = client.get(reverse(CHANGELIST)).content.decode()
    assert "nightly" in listing and "0 3 * * * (UTC)" in listing and "every 60 s" in listing
    assert "Fire selected schedules now" in listing

    text = _act(client, "pause_selected", "nightly", "ping")
    assert "Paused: nightly, ping" in text
    assert all(s.paused for s in schedules.list())
    assert "Resumed: ping" in _act(client, "resume_selected", "ping")
    assert not schedules.get("ping").paused and schedules.get("nightly").paused

    assert "Fired: nightly" in _act(client, "trigger_selected", "nightly")
    (fire,) = schedules.fires("nightly")
    assert fire.how == "trigger" and fire.status == "ok"
    page = client.get(reverse("admin:rivet_workflows_schedule_change", args=["nightly"])).content.decode()
    assert fire.actor_id in page  # the fire log inline


def test_a_viewer_sees_schedules_but_cannot_operate_them(client, django_user_model, rivet):
    rivet.client.schedules.create("nightly", actor="order", cron="0 3 * * *")
    client.force_login(_staff(django_user_model, "viewer", "view_actor"))
    listing = client.get(reverse(CHANGELIST)).content.decode()
    assert "nightly" in listing and "Pause selected schedules" not in listing
    _act(client, "pause_selected", "nightly")
    assert not rivet.client.schedules.get("nightly").paused
    client.force_login(_staff(django_user_model, "nobody"))
    assert client.get(reverse(CHANGELIST)).status_code == 403
