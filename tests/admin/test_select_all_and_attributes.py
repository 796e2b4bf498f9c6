"""The actor list's "select all N" works with every bulk action (each actor of the filtered list, acted on
in batches), and the list filters and searches by search attribute (DESIGN.md section 19)."""

from __future__ import annotations

import pytest
from django.contrib.admin.helpers import ACTION_CHECKBOX_NAME

from rivet_workflows import models
from rivet_workflows.admin import bulk as admin_bulk
from rivet_workflows.engine.model import ports

LIST = "/admin/rivet_workflows/actor/"


@pytest.fixture
def root(client, django_user_model):
    client.force_login(django_user_model.objects.create_superuser("root", password="pw"))
    return client


def _tag(rivet, actor_id: str, **attributes) -> None:
    store = rivet.runtime.store
    token = store.claim_for_operator(actor_id, "test", 30)
    assert store.commit(actor_id, token, ports.Commit(attributes=attributes, release=True)).ok


@pytest.fixture
def waiters(rivet):
    ids = {k: rivet.client.waiter.get_or_create(k).actor_id for k in ("a", "b", "c", "d", "e")}
    rivet.drain()
    for k in ("a", "b", "c", "d"):
        _tag(rivet, ids[k], customer="c-42")
    _tag(rivet, ids["e"], customer="c-7")
    return ids


def test_the_list_searches_and_filters_by_attribute(root, waiters):
    page = root.get(LIST, {"q": "customer=c-7"}).content.decode()
    assert waiters["e"] in page and waiters["a"] not in page
    page = root.get(LIST, {"attr": "customer=c-42"}).content.decode()
    assert all(waiters[k] in page for k in "abcd") and waiters["e"] not in page
    assert "customer=c-42" in root.get(LIST).content.decode()  # offered as a filter choice


@pytest.mark.parametrize("action", sorted(admin_bulk.BULK_ACTIONS))
def test_select_all_acts_on_every_actor_of_the_filtered_list(root, waiters, monkeypatch, action):
    monkeypatch.setattr(admin_bulk, "BATCH", 2)  # several batches
    monkeypatch.setattr(admin_bulk, "CONFIRM_LISTED", 1)
    url = f"{LIST}?attr=customer%3Dc-42"
    first = {
        "action": f"{action}_selected",
        ACTION_CHECKBOX_NAME: [waiters["a"]],
        "select_across": "1",
        "index": "0",
    }
    confirm = root.post(url, first)
    assert confirm.status_code == 200
    page = confirm.content.decode()
    assert "and 3 more" in page and 'name="select_across" value="1"' in page
    done = root.post(
        url,
        {
            "action": f"{action}_selected",
            ACTION_CHECKBOX_NAME: [waiters["a"]],
            "select_across": "1",
            "post": "yes",
        },
        follow=True,
    )
    said = [str(m) for m in done.context["messages"]]
    verb = admin_bulk.BULK_ACTIONS[action][0]
    assert said[0].startswith(f"Bulk {verb}: ") and said[0].count(" ") > 3
    counts = [int(word) for word in said[0].replace(",", "").split() if word.isdigit()]
    assert sum(counts) == 4  # every actor of the filtered list, none of the others
    assert not models.OperatorAction.objects.filter(actor_id=waiters["e"]).exists()


def test_select_all_pause_then_resume_changes_exactly_the_filtered_actors(root, waiters, rivet, monkeypatch):
    monkeypatch.setattr(admin_bulk, "BATCH", 3)
    url = f"{LIST}?attr=customer%3Dc-42"
    body = {
        "action": "pause_selected",
        ACTION_CHECKBOX_NAME: [waiters["a"]],
        "select_across": "1",
        "post": "yes",
    }
    root.post(url, body, follow=True)
    states = {k: rivet.runtime.store.get_actor(aid).workflow_state for k, aid in waiters.items()}
    assert states == {"a": "paused", "b": "paused", "c": "paused", "d": "paused", "e": "sleeping"}
    audited = models.OperatorAction.objects.filter(action="bulk_pause").values_list("actor_id", flat=True)
    assert sorted(audited) == sorted(waiters[k] for k in "abcd")
