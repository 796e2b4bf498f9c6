"""Listing by search attributes and bulk actions by filter (DESIGN.md section 19): a bulk recover by attribute
and time range touches exactly the matching actors and audits each; a dry run writes nothing; keyset pages
neither skip nor repeat an actor while actors are created. Runs on MemoryStore here and on the Django store
(SQLite or PostgreSQL) in tests/integration/test_contract_on_django.py."""

from __future__ import annotations

import pytest

from rivet_workflows.engine.model import errors, ports
from rivet_workflows.engine.model.definitions import workflow
from rivet_workflows.engine.operate import search

FLAGS = {"fail": False}


def _charge(step):
    if FLAGS["fail"]:
        raise errors.CriticalError("card declined")
    return "charged"


async def _checkout(ctx):
    await ctx.set_attributes({"customer": ctx.input["customer"]})
    return await ctx.step("charge", _charge)


def _world(h):
    """Failed checkouts of customers c-42 (three) and c-7 (one), and a completed one of c-42, in creation
    order; returns their ids by label."""
    h.setup(checkout=workflow(run=_checkout))
    ids = {}
    FLAGS["fail"] = True
    for label, customer in (("old", "c-42"), ("a", "c-42"), ("other", "c-7"), ("b", "c-42")):
        ids[label] = h.start("checkout", label, input={"customer": customer})
    h.drain()
    FLAGS["fail"] = False
    ids["done"] = h.start("checkout", "done", input={"customer": "c-42"})
    h.drain()
    assert [h.actor(ids[k]).workflow_state for k in ("old", "a", "other", "b", "done")] == [
        ports.FAILED,
        ports.FAILED,
        ports.FAILED,
        ports.FAILED,
        ports.COMPLETED,
    ]
    return ids


def test_a_bulk_recover_by_attribute_and_time_range_touches_exactly_the_matching_actors(h):
    ids = _world(h)
    client = h.runtime.client()
    since = h.actor(ids["old"]).created_at  # exclusive: "old" is left out
    before = {label: h.snapshot(aid) for label, aid in ids.items()}
    result = client.bulk(
        "recover", state="failed", attributes={"customer": "c-42"}, created_after=since, reason="card fixed"
    )
    assert (result.matched, result.changed, result.unchanged) == (2, 2, 0)
    assert result.actor_ids == [ids["a"], ids["b"]]
    for label in ("a", "b"):
        (row,) = h.runtime.store.operator_actions(ids[label])
        assert (row.action, row.who, row.reason) == ("bulk_recover", "python", "card fixed")
    for label in ("old", "other", "done"):
        assert h.snapshot(ids[label]) == before[label]  # untouched: no write, no audit row
    h.drain()
    assert h.actor(ids["a"]).workflow_state == ports.COMPLETED
    assert h.actor(ids["b"]).workflow_state == ports.COMPLETED
    assert h.actor(ids["old"]).workflow_state == ports.FAILED


def test_a_dry_run_writes_nothing_and_names_what_would_change(h):
    ids = _world(h)
    before = {label: h.snapshot(aid) for label, aid in ids.items()}
    result = h.runtime.client().bulk("recover", attributes={"customer": "c-42"}, dry_run=True)
    assert (result.matched, result.changed, result.unchanged) == (4, 3, 1)  # "done" is not failed
    assert result.actor_ids == [ids["old"], ids["a"], ids["b"]]
    assert {label: h.snapshot(aid) for label, aid in ids.items()} == before


def test_a_bulk_replay_goes_through_every_batch_and_audits_each_actor(h):
    ids = _world(h)
    seen: list[int] = []
    query = search.make_filter(attributes={"customer": "c-42"})
    result = search.bulk_by_filter(h.runtime, "replay", query, batch=1, progress=seen.append)
    assert seen == [1, 2, 3, 4]
    assert (result.matched, result.changed) == (4, 4)
    assert result.actor_ids == [ids["old"], ids["a"], ids["b"], ids["done"]]
    for label in ("old", "a", "b", "done"):
        assert [r.action for r in h.runtime.store.operator_actions(ids[label])] == ["bulk_replay_all"]
    assert h.runtime.store.operator_actions(ids["other"]) == []
    h.drain()
    assert h.actor(ids["old"]).workflow_state == ports.COMPLETED
    cancelled = h.runtime.client().bulk("cancel", attributes={"customer": "c-42"})
    assert (cancelled.matched, cancelled.changed, cancelled.unchanged) == (4, 0, 4)  # finished already


def test_an_unknown_action_or_filter_is_refused_before_anything_is_read(h):
    _world(h)
    client = h.runtime.client()
    with pytest.raises(errors.InvalidFilterError):
        client.bulk("explode")
    with pytest.raises(errors.InvalidFilterError):
        client.bulk("recover", state="broken")
    with pytest.raises(errors.InvalidAttributesError):
        client.list_actors(attributes={"customer": ["c-42"]})
    with pytest.raises(errors.InvalidFilterError):
        client.list_actors(cursor="not-a-cursor")


def test_list_actors_pages_by_attribute_without_gaps_or_duplicates_while_actors_are_created(h):
    ids = _world(h)
    client = h.runtime.client()
    page = client.list_actors(attributes={"customer": "c-42"}, limit=2)
    assert [s.actor_id for s in page.items] == [ids["old"], ids["a"]]
    assert page.items[0].attributes == {"customer": "c-42"} and page.items[0].name == "checkout"
    seen = [s.actor_id for s in page.items]
    created = []
    while page.next_cursor is not None:
        FLAGS["fail"] = False
        created.append(h.start("checkout", f"new-{len(created)}", input={"customer": "c-42"}))
        h.drain()
        page = client.list_actors(attributes={"customer": "c-42"}, limit=2, cursor=page.next_cursor)
        seen += [s.actor_id for s in page.items]
        assert len(created) < 20
    assert len(seen) == len(set(seen))
    assert seen == [ids["old"], ids["a"], ids["b"], ids["done"], *created]


def test_an_empty_filter_is_refused_instead_of_acting_on_every_actor(h):
    ids = _world(h)
    with pytest.raises(errors.InvalidFilterError) as info:
        h.runtime.client().bulk("cancel")
    assert info.value.field == "filter"
    assert h.actor(ids["old"]).workflow_state == ports.FAILED  # nothing was cancelled
