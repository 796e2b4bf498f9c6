"""``GET /actors`` by search attribute, creation time and cursor, and ``POST /actors/bulk/{action}`` with
its dry run and the operator permission (DESIGN.md section 19, docs/howto/operating-many-runs.md)."""

from __future__ import annotations

import json
from urllib.parse import quote

import pytest

from rivet_workflows import models
from rivet_workflows.engine.model import ports
from tests.api.support import api_user

API = "/api/rivet"


def _tag(rivet, actor_id: str, **attributes) -> None:
    """Give the actor search attributes, as its workflow's ``ctx.set_attributes`` would."""
    store = rivet.runtime.store
    token = store.claim_for_operator(actor_id, "test", 30)
    assert store.commit(actor_id, token, ports.Commit(attributes=attributes, release=True)).ok


@pytest.fixture
def world(rivet):
    """Failed orders of customers c-42 (o1, o2) and c-7 (o3), and a counter of c-42."""
    ids = {key: rivet.failed_order(key).actor_id for key in ("o1", "o2", "o3")}
    ids["c"] = rivet.client.counter.get_or_create("c").actor_id
    for key, customer in (("o1", "c-42"), ("o2", "c-42"), ("o3", "c-7"), ("c", "c-42")):
        _tag(rivet, ids[key], customer=customer, total=120)
    return ids


@pytest.fixture
def api(rivet, client, django_user_model):
    """A test client logged in as a user holding ``use_actor_api`` (dev mode: the inspector is open)."""
    client.force_login(api_user(django_user_model))
    return client


def _post(client, path: str, body: dict, **headers):
    return client.post(f"{API}{path}", json.dumps(body), content_type="application/json", **headers)


def test_listing_filters_by_attribute_and_creation_time_and_pages_by_cursor(api, world, rivet):
    client = api
    page = client.get(f"{API}/actors?attr.customer=c-42&limit=2").json()
    assert page["count"] == 3 and page["limit"] == 2
    assert [i["actor_id"] for i in page["items"]] == [world["c"], world["o2"]]  # newest first
    assert page["items"][0]["attributes"] == {"customer": "c-42", "total": 120}
    rest = client.get(f"{API}/actors?attr.customer=c-42&limit=2&cursor={page['next_cursor']}").json()
    assert [i["actor_id"] for i in rest["items"]] == [world["o1"]] and rest["next_cursor"] is None
    typed = client.get(f"{API}/actors?attr.total=120&attr.customer=c-7").json()
    assert [i["actor_id"] for i in typed["items"]] == [world["o3"]]
    assert client.get(f"{API}/actors?attr.total=%22120%22").json()["count"] == 0  # the text "120"
    since = quote(rivet.runtime.store.get_actor(world["o2"]).created_at.isoformat())
    after = client.get(f"{API}/actors?name=order&createdAfter={since}").json()
    assert [i["actor_id"] for i in after["items"]] == [world["o3"]]
    before = client.get(f"{API}/actors?name=order&createdBefore={since}").json()
    assert [i["actor_id"] for i in before["items"]] == [world["o1"]]


def test_bad_listing_filters_are_4xx_json(api, world):
    client = api
    assert client.get(f"{API}/actors?cursor=nope").status_code == 400
    assert client.get(f"{API}/actors?attr.a.b=1").json()["code"] == "invalid_attributes"
    assert client.get(f"{API}/actors?createdAfter=2026-01-01T00:00:00").status_code == 400  # no offset
    assert client.get(f"{API}/actors?createdAfter=yesterday").status_code == 422
    # times at the edge of datetime's range, once in UTC (a 500 before; found by a new user)
    for query in ("createdAfter=0001-01-01T00:00:00%2B14:00", "createdBefore=9999-12-31T23:59:59-14:00"):
        answer = client.get(f"{API}/actors?{query}")
        assert answer.status_code == 400 and answer.json()["code"] == "invalid_filter", query


def _audit_rows() -> list[tuple]:
    return sorted(models.OperatorAction.objects.values_list("actor_id", "action", "who", "reason"))


def _rows() -> list[dict]:
    return list(models.Actor.objects.order_by("pk").values())


def test_bulk_recover_by_attribute_acts_on_exactly_the_matching_actors_and_audits_each(client, world):
    body = {
        "filter": {"name": "order", "state": "failed", "attributes": {"customer": "c-42"}},
        "reason": "fixed",
    }
    dry = _post(client, "/actors/bulk/recover", {**body, "dryRun": True})
    assert dry.status_code == 200, dry.content
    rows_before, audit_before = _rows(), _audit_rows()
    assert dry.json()["actor_ids"] == [world["o1"], world["o2"]] and dry.json()["dry_run"] is True
    again = _post(client, "/actors/bulk/recover", {**body, "dryRun": True})
    assert (_rows(), _audit_rows()) == (rows_before, audit_before)  # a dry run writes nothing
    assert again.json() == dry.json()
    done = _post(client, "/actors/bulk/recover", body).json()
    assert {k: done[k] for k in ("matched", "changed", "unchanged", "actor_ids")} == {
        "matched": 2,
        "changed": 2,
        "unchanged": 0,
        "actor_ids": [world["o1"], world["o2"]],
    }
    assert [(a, action, reason) for a, action, _who, reason in _audit_rows()] == sorted(
        (world[k], "bulk_recover", "fixed") for k in ("o1", "o2")
    )


def test_bulk_needs_the_operator_permission_and_a_known_action(client, world, rivet, django_user_model):
    rivet.configure(DEV_MODE=False)
    client.force_login(
        api_user(django_user_model, "bob", "view_actor", is_staff=True)
    )  # sees, may not operate
    refused = _post(client, "/actors/bulk/pause", {"filter": {}})
    assert refused.status_code == 403 and refused.json()["code"] == "forbidden"
    client.force_login(api_user(django_user_model, "carol", "view_actor", "replay_workflow", is_staff=True))
    assert _post(client, "/actors/bulk/explode", {"filter": {}}).status_code == 404
    unknown = _post(client, "/actors/bulk/pause", {"filter": {"colour": "red"}})
    assert unknown.status_code == 422  # a strict body
    paused = _post(client, "/actors/bulk/pause", {"filter": {"name": "counter"}, "reason": "look"}).json()
    assert paused["actor_ids"] == [world["c"]] and paused["matched"] == 1
    assert _audit_rows() == [(world["c"], "bulk_pause", "carol", "look")]


def test_an_actor_shows_its_attributes_and_its_history_shows_the_attributes_entry(api, rivet):
    from rivet_workflows.engine.model.definitions import setup, workflow

    async def tagged(ctx):
        await ctx.set_attributes({"customer": "c-42"})
        await ctx.step("one", lambda step: 1)

    from rivet_workflows.engine.runtime import executor
    from rivet_workflows.engine.runtime.runtime import Runtime

    runtime = rivet.runtime
    local = Runtime(runtime.store, runtime.dispatcher, setup(use={"tagged": workflow(run=tagged)}))
    handle = local.client().tagged.create("t")
    executor.drain(local, timeout=5)
    assert handle.attributes() == {"customer": "c-42"}
    detail = api.get(f"{API}/actors/{handle.actor_id}").json()
    assert detail["attributes"] == {"customer": "c-42"}
    history = api.get(f"{API}/actors/{handle.actor_id}/inspector/workflow-history")
    assert history.status_code == 200 and "~attributes1" in history.content.decode()
