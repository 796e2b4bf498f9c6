"""Authorization outside dev mode (DESIGN.md section 6): inspector token / staff permission, API auth."""

from __future__ import annotations

import json

import pytest
from django.contrib.auth.models import Permission

API = "/api/rivet"
TOKEN = "s3cret-inspector-token"


@pytest.fixture
def locked(rivet):
    """Dev mode off, an inspector token and an API token configured, one failed workflow."""
    rivet.configure(DEV_MODE=False, INSPECTOR_TOKEN=TOKEN, API_TOKEN="api-token")
    return rivet.failed_order()


def history(client, actor_id, **headers):
    return client.get(f"{API}/actors/{actor_id}/inspector/workflow-history", **headers)


def replay(client, actor_id, **headers):
    return client.post(
        f"{API}/actors/{actor_id}/inspector/workflow/replay",
        data=json.dumps({"entryId": "charge"}),
        content_type="application/json",
        **headers,
    )


def test_anonymous_is_refused_everywhere(client, locked):
    for response in (history(client, locked.actor_id), replay(client, locked.actor_id)):
        assert response.status_code == 401
        assert response.json()["code"] == "unauthorized"
    assert client.get(f"{API}/actors").status_code == 401
    action = client.post(
        f"{API}/actors/{locked.actor_id}/actions/get_state", data="{}", content_type="application/json"
    )
    assert action.status_code == 401
    assert locked.workflow_state() == "failed"


def test_wrong_token_is_refused(client, locked):
    for header in ("Bearer wrong", "Bearer ", "Basic abc", f"Bearer {TOKEN}x"):
        response = history(client, locked.actor_id, HTTP_AUTHORIZATION=header)
        assert response.status_code == 401, header
    assert replay(client, locked.actor_id, HTTP_AUTHORIZATION="Bearer wrong").status_code == 401
    assert locked.workflow_state() == "failed"


def test_right_token_is_accepted(client, locked):
    auth = {"HTTP_AUTHORIZATION": f"Bearer {TOKEN}"}
    assert history(client, locked.actor_id, **auth).json()["workflowState"] == "failed"
    assert replay(client, locked.actor_id, **auth).status_code == 200
    # the inspector token may read the actor API but not drive it (test_actor_api_access covers every role)
    assert client.get(f"{API}/actors", **auth).status_code == 200
    action = client.post(
        f"{API}/actors/{locked.actor_id}/actions/get_state",
        data="{}",
        content_type="application/json",
        **auth,
    )
    assert action.status_code == 403
    assert client.get(f"{API}/actors", HTTP_AUTHORIZATION="Bearer api-token").status_code == 200


def test_no_token_configured_means_no_token_access(client, rivet):
    rivet.configure(DEV_MODE=False, INSPECTOR_TOKEN=None, API_TOKEN=None)
    handle = rivet.client.counter.get_or_create("c")
    for token in ("", "None", "null"):
        response = history(client, handle.actor_id, HTTP_AUTHORIZATION=f"Bearer {token}")
        assert response.status_code == 401
        assert client.get(f"{API}/actors", HTTP_AUTHORIZATION=f"Bearer {token}").status_code == 401


def test_staff_without_permission_is_forbidden(client, locked, django_user_model):
    staff = django_user_model.objects.create_user("staff", password="pw", is_staff=True)
    client.force_login(staff)
    response = history(client, locked.actor_id)
    assert response.status_code == 403 and response.json()["code"] == "forbidden"
    assert replay(client, locked.actor_id).status_code == 403
    # nor the actor API: being logged in (or staff) is not a permission (case C52)
    assert client.get(f"{API}/actors").status_code == 403


def test_staff_with_permissions(client, locked, django_user_model):
    staff = django_user_model.objects.create_user("staff", password="pw", is_staff=True)
    staff.user_permissions.add(Permission.objects.get(codename="view_actor"))
    client.force_login(staff)
    assert history(client, locked.actor_id).status_code == 200
    assert replay(client, locked.actor_id).status_code == 403  # reading is not replaying
    staff.user_permissions.add(Permission.objects.get(codename="replay_workflow"))
    client.force_login(django_user_model.objects.get(pk=staff.pk))
    assert replay(client, locked.actor_id).status_code == 200


def test_session_posts_need_csrf(locked, django_user_model):
    from django.test import Client

    staff = django_user_model.objects.create_superuser("root", password="pw")
    client = Client(enforce_csrf_checks=True)
    client.force_login(staff)
    response = replay(client, locked.actor_id)
    assert response.status_code == 403 and response.json()["code"] == "forbidden"
    client.get("/admin/")  # sets the csrftoken cookie
    token = client.cookies["csrftoken"].value
    assert replay(client, locked.actor_id, HTTP_X_CSRFTOKEN=token).status_code == 200


def test_configurable_api_auth(client, rivet):
    rivet.configure(DEV_MODE=False, API_AUTH="tests.api.test_auth.header_auth")
    assert client.get(f"{API}/actors").status_code == 401
    assert client.get(f"{API}/actors", HTTP_X_PARTNER="yes").status_code == 200


def header_auth(request):
    """An API_AUTH callable used by the test above: any request with ``X-Partner: yes``."""
    return request.headers.get("X-Partner") == "yes"
