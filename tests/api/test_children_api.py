"""Parent and child actors over HTTP and in the admin trace (DESIGN.md section 20): ``GET /actors/{id}`` names
the parent and children, ``cancel`` accepts ``children``, the trace page links them."""

from __future__ import annotations

import pytest
from django.urls import reverse

from tests.admin.test_admin import admin_client_, change_url  # noqa: F401 - fixture
from tests.api.support import api_user
from tests.api.test_api import API, post


@pytest.fixture
def api(rivet, client, django_user_model):
    client.force_login(api_user(django_user_model))
    return client


def _family(rivet):
    """A sleeping ``waiter`` with a child and a grandchild (created as a run's ``step.client()`` would)."""
    store = rivet.runtime.store
    parent = rivet.client.waiter.get_or_create("parent")
    child, _ = store.create_actor("waiter", ["child"], None, {}, due=True, parent_id=parent.actor_id)
    grandchild, _ = store.create_actor("waiter", ["grandchild"], None, {}, due=True, parent_id=child.actor_id)
    rivet.drain()
    return parent, child.actor_id, grandchild.actor_id


def test_get_actor_names_the_parent_and_the_children(api, rivet):
    parent, child, _ = _family(rivet)
    body = api.get(f"{API}/actors/{parent.actor_id}").json()
    assert body["parent_id"] is None and body["children"] == [child]
    assert api.get(f"{API}/actors/{child}").json()["parent_id"] == parent.actor_id


@pytest.mark.parametrize("children", [False, True])
def test_http_cancel_with_children_cancels_the_descendants_too(api, rivet, children):
    parent, child, grandchild = _family(rivet)
    path = f"/actors/{parent.actor_id}/inspector/workflow/cancel"
    answer = post(api, path, {"reason": "done", "children": children})
    assert answer.status_code == 200 and answer.json()["changed"] is True
    store = rivet.runtime.store
    expected = "cancelled" if children else "sleeping"
    assert [store.get_actor(a).workflow_state for a in (child, grandchild)] == [expected, expected]
    assert len(store.operator_actions(grandchild)) == int(children)
    assert post(api, path, {"children": "yes"}).status_code == 422


def test_the_trace_page_links_parent_and_children_and_cancels_with_children(admin_client_, rivet):  # noqa: F811
    parent, child, grandchild = _family(rivet)
    page = admin_client_.get(change_url(parent.actor_id)).content.decode()
    assert 'id="rivet-children"' in page and change_url(child) in page and 'id="rivet-parent"' not in page
    child_page = admin_client_.get(change_url(child)).content.decode()
    assert 'id="rivet-parent"' in child_page and change_url(parent.actor_id) in child_page
    assert change_url(grandchild) in child_page
    cancel = reverse("admin:rivet_workflows_actor_cancel", args=[parent.actor_id])
    text = admin_client_.post(cancel, {"reason": "", "children": "1"}, follow=True).content.decode()
    assert "Cancelled" in text
    store = rivet.runtime.store
    assert {store.get_actor(a).workflow_state for a in (parent.actor_id, child, grandchild)} == {"cancelled"}
    assert [r.who for r in store.operator_actions(grandchild)] == ["root"]
