"""The admin trace reads as the user wrote the code (DESIGN.md section 16; docs/howto/admin.md):
one queue wait is one row (its deadline and count are details of that row), a wait whose timeout passed
reads "timed out", and the actor list says what the run does now, not a finished wait."""

from __future__ import annotations

import re

from django.urls import reverse

from rivet_workflows import models
from rivet_workflows.engine.model import ports
from tests.admin.test_admin import admin_client_ as admin_client_  # noqa: F401 - the fixture
from tests.admin.test_admin import change_url


def _rows(html):
    return dict(re.findall(r'<li class="[^"]*" data-key="([^"]+)" data-status="([^"]*)"', html))


def test_one_queue_wait_is_one_row_with_its_deadline_and_messages_as_details(admin_client_, rivet):
    rivet.configure(REGISTRY="tests.api.registry.registry")
    handle = rivet.client.ledger.get_or_create("l1")
    rivet.drain()
    html = admin_client_.get(change_url(handle.actor_id)).content.decode()
    assert _rows(html)["settle"] == "waiting"  # waiting now, its deadline ahead
    handle.send("approval", "first")
    rivet.drain()
    handle.send("approval", "second")
    rivet.drain()

    html = admin_client_.get(change_url(handle.actor_id)).content.decode()
    rows = _rows(html)
    assert rows["settle"] == "received" and rows["confirm"] == "received"
    assert not [key for key in rows if re.search(r":(deadline|count|\d+)$", key)]
    settle = html.split('data-key="settle"', 1)[1].split("</li>", 1)[0]
    assert "queue approval · 1 message · deadline " in settle
    assert "Message 0 (approval, sent" in settle and "&quot;first&quot;" in settle
    trace = html.split('id="rivet-trace"', 1)[1].split("Actor state", 1)[0]
    assert "interrupted" not in trace and "messages</small>" not in trace
    assert trace.count(">sleep<") == 1  # the workflow's own ctx.sleep("cool-off"), not the wait's deadline
    confirm = html.split('data-key="confirm"', 1)[1].split("</li>", 1)[0]
    assert "answered)" in confirm


def test_a_wait_whose_timeout_passed_reads_timed_out(admin_client_, rivet):
    rivet.configure(REGISTRY="tests.ops.inspect_registry.registry")
    handle = rivet.client.booking.get_or_create("b-1")
    rivet.drain(timeout=2)
    assert handle.workflow_state() == ports.FAILED
    html = admin_client_.get(change_url(handle.actor_id)).content.decode()
    assert _rows(html)["payment"] == "timed out"
    payment = html.split('data-key="payment"', 1)[1].split("</li>", 1)[0]
    assert "timed out at " in payment and "0 messages" not in payment
    assert "sleep completed" not in html


def test_the_actor_list_shows_what_the_run_does_now(admin_client_, rivet):
    rivet.configure(REGISTRY="tests.ops.inspect_registry.registry")
    handle = rivet.client.order.get_or_create("o-1")
    rivet.drain()
    url = reverse("admin:rivet_workflows_actor_changelist")

    def row():
        html = admin_client_.get(url).content.decode()
        return next(r for r in html.split("<tr")[1:] if "o-1" in r)

    assert "wait-approval" not in row() and "approve" in row()  # waits on its queue
    # the approval came and a worker runs the next step: no finished wait, no past wake time
    models.Actor.objects.filter(pk=handle.actor_id).update(wake_at=rivet.runtime.store.now())
    token = rivet.runtime.store.claim(handle.actor_id, "worker-1", 30)
    assert "running now" in row() and "approve" not in row()
    page = admin_client_.get(change_url(handle.actor_id)).content.decode()
    assert '<dd id="rivet-waiting-on">running now</dd>' in page
    rivet.runtime.store.commit(handle.actor_id, token, ports.Commit(release=True))
    assert "due now" in row() and "approve" not in row()
