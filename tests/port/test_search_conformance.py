"""Search attributes and filtered listings on every store (MemoryStore, DjangoStore, PostgresStore):
``Commit.attributes`` merges, ``find_actors``/``count_actors`` select and page alike (DESIGN.md section 19)."""

from __future__ import annotations

from datetime import timedelta

from rivet_workflows.engine.model import ports


def _set(h, actor_id: str, attributes: dict) -> None:
    token = h.store.claim(actor_id, "w", 30)
    assert token is not None
    assert h.store.commit(actor_id, token, ports.Commit(attributes=attributes, release=True)).ok


def _ids(records) -> list[str]:
    return [r.actor_id for r in records]


def test_a_new_actor_has_no_attributes_and_commits_merge_them(h):
    store = h.store
    actor_id = h.new_actor()
    assert store.get_actor(actor_id).attributes == {}
    _set(h, actor_id, {"customer": "c-42", "total": 120})
    _set(h, actor_id, {"total": 99.5, "vip": True, "note": None})
    assert store.get_actor(actor_id).attributes == {
        "customer": "c-42",
        "total": 99.5,
        "vip": True,
        "note": None,
    }


def test_a_fenced_commit_leaves_the_attributes_alone(h):
    store = h.store
    actor_id = h.new_actor()
    token = store.claim(actor_id, "w", 30)
    assert not store.commit(actor_id, token + 1, ports.Commit(attributes={"x": 1})).ok
    assert store.get_actor(actor_id).attributes == {}


def test_an_attribute_only_commit_moves_updated_at(h):
    store = h.store
    actor_id = h.new_actor()
    before = store.get_actor(actor_id).updated_at
    _set(h, actor_id, {"x": 1})
    assert store.get_actor(actor_id).updated_at >= before
    assert not ports.Commit(attributes={"x": 1}).lease_only


def test_find_actors_filters_by_attribute_type_state_and_time(h):
    store = h.store
    a = h.new_actor("a")
    b = h.new_actor("b")
    c = h.new_actor("c", name="invoice")
    _set(h, a, {"customer": "c-42", "total": 120})
    _set(h, b, {"customer": "c-7", "total": 120})
    _set(h, c, {"customer": "c-42"})
    everyone = ports.ActorFilter()
    assert _ids(store.find_actors(everyone, limit=10)) == [a, b, c]
    assert _ids(store.find_actors(ports.ActorFilter(attributes={"customer": "c-42"}), limit=10)) == [a, c]
    both = ports.ActorFilter(attributes={"customer": "c-42", "total": 120})
    assert _ids(store.find_actors(both, limit=10)) == [a]
    assert _ids(store.find_actors(ports.ActorFilter(attributes={"total": "120"}), limit=10)) == []  # a str
    assert _ids(store.find_actors(ports.ActorFilter(attributes={"missing": "x"}), limit=10)) == []
    assert _ids(store.find_actors(ports.ActorFilter(name="invoice"), limit=10)) == [c]
    assert store.count_actors(ports.ActorFilter(attributes={"customer": "c-42"})) == 2
    # states as a record shows them: paused hides the stored state
    assert store.set_paused(b, True, "look")
    assert _ids(store.find_actors(ports.ActorFilter(state=ports.PAUSED), limit=10)) == [b]
    assert _ids(store.find_actors(ports.ActorFilter(state=ports.PENDING), limit=10)) == [a, c]
    # created bounds are exclusive
    created_b = store.get_actor(b).created_at
    after_b = ports.ActorFilter(created_after=created_b)
    assert b not in _ids(store.find_actors(after_b, limit=10))
    later = ports.ActorFilter(created_after=created_b + timedelta(days=1))
    assert _ids(store.find_actors(later, limit=10)) == []
    assert store.count_actors(ports.ActorFilter(created_before=created_b + timedelta(days=1))) == 3


def test_find_actors_pages_by_keyset_without_gaps_while_actors_are_created(h):
    store = h.store
    first = [h.new_actor(f"k{i}") for i in range(5)]
    seen: list[str] = []
    page = store.find_actors(ports.ActorFilter(), limit=2)
    created_meanwhile: list[str] = []
    while page:
        seen += _ids(page)
        created_meanwhile.append(h.new_actor(f"new{len(created_meanwhile)}"))
        last = page[-1]
        page = store.find_actors(ports.ActorFilter(), limit=2, after=(last.created_at, last.actor_id))
        if len(created_meanwhile) > 20:
            break
    assert seen[:5] == first
    assert len(seen) == len(set(seen))  # no duplicate
    assert set(first) | set(created_meanwhile[:-1]) <= set(seen)  # nothing skipped
