"""The admin's fork buttons and confirmation page (DESIGN.md section 19): beside "Replay from this step"."""

from __future__ import annotations

import json

import pytest
from django.urls import reverse

from rivet_workflows import models


@pytest.fixture
def admin_client_(client, django_user_model):
    user = django_user_model.objects.create_superuser("root", password="pw")
    client.force_login(user)
    return client


def fork_url(actor_id):
    return reverse("admin:rivet_workflows_actor_fork", args=[actor_id])


def test_the_trace_page_has_fork_buttons_beside_replay(admin_client_, rivet):
    handle = rivet.failed_order()
    html = admin_client_.get(reverse("admin:rivet_workflows_actor_change", args=[handle.actor_id])).content
    html = html.decode()
    assert 'class="button rivet-fork-step" data-entry="charge"' in html and 'id="rivet-fork"' in html
    assert fork_url(handle.actor_id) in html


def test_the_confirmation_page_shows_what_is_copied_and_the_editable_input(admin_client_, rivet):
    handle = rivet.failed_order()
    page = admin_client_.get(fork_url(handle.actor_id), {"entry_id": "charge"})
    assert page.status_code == 200
    html = page.content.decode()
    assert 'id="rivet-fork-copied"' in html and "<code>fetch-order</code>" in html
    assert 'id="rivet-fork-input"' in html and 'id="rivet-fork-confirm"' in html
    assert models.Actor.objects.count() == 1  # a GET writes nothing


def test_confirming_forks_with_edited_input_and_shows_the_new_actor(admin_client_, rivet):
    source = rivet.failed_order()
    form = {"entry_id": "charge", "input": json.dumps({"coupon": "FIX"}), "reason": "fixed card"}
    response = admin_client_.post(fork_url(source.actor_id), form, follow=True)
    assert response.status_code == 200
    assert "Forked order" in response.content.decode()
    forked = models.Actor.objects.exclude(pk=source.actor_id).get()
    assert response.redirect_chain[-1][0].endswith(f"/{forked.pk}/change/")
    rivet.drain()
    handle = rivet.client.order.get_for_id(forked.pk)
    assert handle.workflow_state() == "completed" and handle.record().input == {"coupon": "FIX"}
    assert source.workflow_state() == "failed"
    rows = models.OperatorAction.objects.filter(action="fork")
    assert {r.actor_id for r in rows} == {source.actor_id, forked.pk}
    assert all(r.who == "root" and "fixed card" in r.reason for r in rows)


def test_bad_json_shows_the_form_again_and_a_taken_key_is_reported(admin_client_, rivet):
    source = rivet.failed_order()
    page = admin_client_.post(fork_url(source.actor_id), {"input": "{not json"})
    assert page.status_code == 400 and "input: not valid JSON" in page.content.decode()
    taken = admin_client_.post(fork_url(source.actor_id), {"input": "null", "key": "o1"})
    assert taken.status_code == 400 and "already exists" in taken.content.decode()
    assert models.Actor.objects.count() == 1
    assert not models.OperatorAction.objects.exists()


def test_a_refused_fork_goes_back_with_the_refusal(admin_client_, rivet):
    source = rivet.failed_order()
    rivet.runtime.store.claim(source.actor_id, "another-worker", 30)
    text = admin_client_.post(fork_url(source.actor_id), {"input": "null"}, follow=True).content.decode()
    assert "Fork refused" in text and "running" in text
    assert models.Actor.objects.count() == 1
