"""The admin inspector with Django's test client: list, trace page, replay/recover buttons, permissions."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import Permission
from django.urls import reverse

from rivet_workflows import models


@pytest.fixture
def admin_client_(client, django_user_model):
    user = django_user_model.objects.create_superuser("root", password="pw")
    client.force_login(user)
    return client


def change_url(actor_id):
    return reverse("admin:rivet_workflows_actor_change", args=[actor_id])


def test_actor_list_filters_and_search(admin_client_, rivet):
    failed = rivet.failed_order("broken-one")
    ok = rivet.client.order.get_or_create("fine-one")
    rivet.client.counter.get_or_create("c1")
    rivet.drain()
    url = reverse("admin:rivet_workflows_actor_changelist")
    page = admin_client_.get(url)
    assert page.status_code == 200
    text = page.content.decode()
    assert "broken-one" in text and "fine-one" in text and "c1" in text
    assert "card declined" in text  # last error column
    only_failed = admin_client_.get(url, {"workflow_state": "failed"}).content.decode()
    assert "broken-one" in only_failed and "fine-one" not in only_failed
    counters = admin_client_.get(url, {"name": "counter"}).content.decode()
    assert "c1" in counters and "broken-one" not in counters
    search = admin_client_.get(url, {"q": "fine"}).content.decode()
    assert "fine-one" in search and "broken-one" not in search
    assert failed.actor_id != ok.actor_id


def test_trace_page_shows_nested_timeline_with_details(admin_client_, rivet):
    handle = rivet.client.order.get_or_create("o")
    handle.send("approval", {"by": "ann"})  # before the workflow completes: a send after it is refused
    rivet.drain()
    page = admin_client_.get(change_url(handle.actor_id))
    assert page.status_code == 200
    html = page.content.decode()
    for key in (
        "fetch-order",
        "charge",
        "pack-items",
        "pack-items/~0",
        "pack-items/~1/pack",
        "notify/email/send-email",
        "ship",
    ):
        assert f'data-key="{key}"' in html, key
    assert "Replay from this step" in html and "Replay all" in html and "Recover" in html
    assert "rivet-bar" in html and "&quot;order&quot;: 42" in html  # output shown as JSON
    assert "approval" in html and "&quot;by&quot;: &quot;ann&quot;" in html  # queue message
    assert 'data-state="completed"' in html


def test_trace_page_shows_the_error_of_a_failed_step(admin_client_, rivet):
    handle = rivet.failed_order()
    html = admin_client_.get(change_url(handle.actor_id)).content.decode()
    assert 'data-status="exhausted"' in html
    assert "RuntimeError: card declined" in html
    assert 'data-state="failed"' in html


def test_replay_from_step_button(admin_client_, rivet):
    handle = rivet.failed_order()
    url = reverse("admin:rivet_workflows_actor_replay", args=[handle.actor_id])
    response = admin_client_.post(url, {"entry_id": "charge"}, follow=True)
    assert response.status_code == 200
    assert "Replaying from step &#x27;charge&#x27;" in response.content.decode()
    rivet.drain()
    assert handle.workflow_state() == "completed"


def test_replay_all_and_recover_buttons(admin_client_, rivet):
    handle = rivet.failed_order()
    recover = reverse("admin:rivet_workflows_actor_recover", args=[handle.actor_id])
    text = admin_client_.post(recover, follow=True).content.decode()
    assert "Recovered the workflow" in text
    rivet.drain()
    assert handle.workflow_state() == "completed"
    again = admin_client_.post(recover, follow=True).content.decode()
    assert "Recover refused" in again
    replay = reverse("admin:rivet_workflows_actor_replay", args=[handle.actor_id])
    text = admin_client_.post(replay, {}, follow=True).content.decode()
    assert "Replaying from the start" in text
    assert handle.workflow_state() == "sleeping"


def test_buttons_are_disabled_and_refused_while_in_flight(admin_client_, rivet):
    handle = rivet.failed_order()
    rivet.runtime.store.claim(handle.actor_id, "another-worker", 30)
    html = admin_client_.get(change_url(handle.actor_id)).content.decode()
    assert 'class="button rivet-replay-step" data-entry="charge" disabled' in html
    url = reverse("admin:rivet_workflows_actor_replay", args=[handle.actor_id])
    text = admin_client_.post(url, {"entry_id": "charge"}, follow=True).content.decode()
    assert "Replay refused" in text and "running" in text
    assert handle.workflow_state() == "failed"


def test_a_replay_that_would_diverge_is_refused_with_an_error_message(admin_client_, rivet, monkeypatch):
    from rivet_workflows.engine.model import definitions as d
    from tests.api import registry as test_registry

    handle = rivet.failed_order()

    async def renamed(ctx):  # "fetch-order" renamed without ctx.removed or a version gate
        await ctx.step("load-order", lambda s: {"order": 42})
        await ctx.step(name="charge", run=lambda s: {"charged": True}, max_retries=0)

    monkeypatch.setattr(test_registry.registry.get("order"), "run", d.workflow(renamed))
    before = list(models.HistoryEntry.objects.filter(actor_id=handle.actor_id).values_list("key", "status"))
    url = reverse("admin:rivet_workflows_actor_replay", args=[handle.actor_id])
    response = admin_client_.post(url, {"entry_id": "charge"}, follow=True)
    text = response.content.decode()
    assert response.status_code == 200
    assert "Replay refused" in text and "HistoryDivergedError" in text and "load-order" in text
    assert "ctx.removed(&#x27;fetch-order&#x27;, &#x27;step&#x27;)" in text and "Fix:" in text
    assert 'class="error"' in text  # shown as an error message
    assert (
        list(models.HistoryEntry.objects.filter(actor_id=handle.actor_id).values_list("key", "status"))
        == before
    )
    assert handle.workflow_state() == "failed"


def test_buttons_need_post_csrf_and_the_permission(client, rivet, django_user_model):
    from django.test import Client

    handle = rivet.failed_order()
    viewer = django_user_model.objects.create_user("viewer", password="pw", is_staff=True)
    viewer.user_permissions.add(Permission.objects.get(codename="view_actor"))
    client.force_login(viewer)
    page = client.get(change_url(handle.actor_id)).content.decode()
    assert 'data-entry="charge" disabled' in page  # no replay permission: disabled
    url = reverse("admin:rivet_workflows_actor_replay", args=[handle.actor_id])
    assert client.post(url, {"entry_id": "charge"}).status_code == 403
    assert client.get(url, {"entry_id": "charge"}).status_code == 403  # the plan page needs it too
    assert client.put(url).status_code == 405
    root = django_user_model.objects.create_superuser("root", password="pw")
    strict = Client(enforce_csrf_checks=True)
    strict.force_login(root)
    assert strict.post(url, {"entry_id": "charge"}).status_code == 403  # no CSRF token
    assert handle.workflow_state() == "failed"


def test_admin_is_read_only(admin_client_, rivet):
    handle = rivet.client.counter.get_or_create("c")
    assert admin_client_.get(reverse("admin:rivet_workflows_actor_add")).status_code == 403
    delete = reverse("admin:rivet_workflows_actor_delete", args=[handle.actor_id])
    assert admin_client_.post(delete, {"post": "yes"}).status_code == 403
    assert models.Actor.objects.filter(pk=handle.actor_id).exists()


def test_trace_json_for_live_updates(admin_client_, rivet):
    handle = rivet.failed_order()
    url = reverse("admin:rivet_workflows_actor_trace_json", args=[handle.actor_id])
    first = admin_client_.get(url).json()
    assert first["workflowState"] == "failed" and first["inFlight"] is False
    assert 'data-key="charge"' in first["html"]
    assert admin_client_.get(url).json()["version"] == first["version"]  # unchanged
    handle.recover()
    rivet.drain()
    later = admin_client_.get(url).json()
    assert later["workflowState"] == "completed" and later["version"] != first["version"]
    assert (
        admin_client_.get(reverse("admin:rivet_workflows_actor_trace_json", args=["nope"])).status_code == 404
    )


def test_trace_page_lists_cron_entries_and_their_fires(admin_client_, rivet):
    from django.utils import timezone

    handle = rivet.client.counter.get_or_create("c")
    now = timezone.now()
    entry = models.CronEntry.objects.create(
        actor_id=handle.actor_id,
        name="nightly-report",
        expression="0 3 * * *",
        timezone="Europe/Paris",
        action="increment",
        next_fire_at=now,
        created_at=now,
    )
    models.CronFire.objects.create(cron=entry, scheduled_at=now, fired_at=now, status="ok")
    html = admin_client_.get(change_url(handle.actor_id)).content.decode()
    assert 'id="rivet-cron"' in html
    assert "nightly-report" in html and "0 3 * * * (Europe/Paris)" in html and "increment" in html
    assert "This actor has no workflow." in html


def test_an_actor_without_a_workflow_is_listed_as_no_workflow_and_filtered_apart(admin_client_, rivet):
    rivet.client.counter.get_or_create("c1")  # no run function: stored pending, nothing to wait on
    rivet.client.order.get_or_create("due-order")  # created due, not run yet: really pending
    url = reverse("admin:rivet_workflows_actor_changelist")
    listing = admin_client_.get(url).content.decode()
    row = listing[listing.index("[&quot;c1&quot;]</span></a>") :]
    assert ">no workflow</span>" in row[: row.index("</tr>")]
    assert "?workflow_state__exact=no_workflow" in listing  # a filter choice of its own
    none = admin_client_.get(url, {"workflow_state__exact": "no_workflow"}).content.decode()
    assert "c1" in none and "due-order" not in none
    pending = admin_client_.get(url, {"workflow_state__exact": "pending"}).content.decode()
    assert "due-order" in pending and "[&quot;c1&quot;]" not in pending
    counter = models.Actor.objects.get(name="counter")
    html = admin_client_.get(change_url(counter.pk)).content.decode()
    assert 'data-state="no_workflow"' in html and "This actor has no workflow." in html


def test_trace_page_shows_the_trace_id_linked_by_the_trace_url_template(admin_client_, rivet, settings):
    handle = rivet.client.counter.get_or_create("traced")
    trace_id = "4bf92f3577b34da6a3ce929d0e0e4736"
    traceparent = f"00-{trace_id}-00f067aa0ba902b7-01"
    models.Actor.objects.filter(pk=handle.actor_id).update(trace_context={"traceparent": traceparent})
    html = admin_client_.get(change_url(handle.actor_id)).content.decode()
    assert f"<code>{trace_id}</code>" in html  # no TRACE_URL: the id alone
    settings.RIVET_WORKFLOWS = {
        **settings.RIVET_WORKFLOWS,
        "TRACE_URL": "http://jaeger:16686/trace/{trace_id}",
    }
    html = admin_client_.get(change_url(handle.actor_id)).content.decode()
    assert (
        f'<a href="http://jaeger:16686/trace/{trace_id}" target="_blank" rel="noopener">{trace_id}</a>'
        in html
    )
    untraced = rivet.client.counter.get_or_create("plain")
    assert 'id="rivet-trace-id"' not in admin_client_.get(change_url(untraced.actor_id)).content.decode()


def test_buttons_record_the_user_and_reason_and_the_trace_page_lists_operator_actions(admin_client_, rivet):
    handle = rivet.failed_order()
    page = admin_client_.get(change_url(handle.actor_id)).content.decode()
    assert 'id="rivet-reason"' in page and "No operator actions." in page
    recover = reverse("admin:rivet_workflows_actor_recover", args=[handle.actor_id])
    admin_client_.post(recover, {"reason": "card fixed"}, follow=True)
    rivet.drain()
    replay = reverse("admin:rivet_workflows_actor_replay", args=[handle.actor_id])
    admin_client_.post(replay, {"entry_id": "charge", "reason": ""}, follow=True)
    rows = rivet.runtime.store.operator_actions(handle.actor_id)
    assert [(r.action, r.who, r.reason) for r in rows] == [
        ("replay", "root", None),
        ("recover", "root", "card fixed"),
    ]
    html = admin_client_.get(change_url(handle.actor_id)).content.decode()
    assert 'id="rivet-audit"' in html and "card fixed" in html and "recover" in html
    assert "1: charge" in html  # the archived entries of each action, by key


def test_the_trace_page_tries_the_websocket_only_under_asgi(admin_client_, rivet, django_user_model):
    """Under WSGI (runserver, gunicorn) no WebSocket can be served: the page polls without trying one (the
    attempt logged a 404 on every load); under ASGI it gets the WebSocket path. The ASGI request is built
    with AsyncRequestFactory and the view called directly: an event loop run in this process (the async
    test client) would leave asgiref's executor thread behind in the daphne servers later tests fork."""
    from django.test import AsyncRequestFactory
    from django.urls import resolve

    handle = rivet.client.order.get_or_create("ws")
    url = change_url(handle.actor_id)
    wsgi = admin_client_.get(url).content.decode()
    assert 'data-ws-path=""' in wsgi

    request = AsyncRequestFactory().get(url)
    request.user = django_user_model.objects.get(username="root")
    match = resolve(url)
    response = match.func(request, *match.args, **match.kwargs)
    asgi = (response.render() if hasattr(response, "render") else response).content.decode()
    assert f'data-ws-path="/ws/rivet/actors/{handle.actor_id}/"' in asgi
