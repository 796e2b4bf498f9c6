"""Differential tests of the port's wake rules (DESIGN.md section 15): the rule written once in
``engine/model/wake.py`` against what the Django stores do in SQL on generated cases (Hypothesis).

The PostgreSQL store restates the rules in SQL to save round trips (the fenced UPDATE clears the ``wake_at``
of a finished workflow, the release's conditional UPDATE, the one-statement send, the group query); the ORM
store restates the next actor of a group as a query. Each case is written to the test database as actor and
message rows, run through the store, and its outcome compared with the rule's on the same values.
"""

from __future__ import annotations

from datetime import datetime, timedelta

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rivet_workflows import models
from rivet_workflows.engine.model import ports, wake
from rivet_workflows.storage import DjangoStore, PostgresStore
from tests.conftest import is_postgres

STORES = [DjangoStore, *([PostgresStore] if is_postgres() else [])]
CASES = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])

STATES = [ports.PENDING, ports.RUNNING, ports.SLEEPING, ports.SUSPENDED, *sorted(ports.FINISHED_STATES)]
NAMES = ["a", "b", "c"]
#: an instant relative to the commit's clock, in hours (None: unset); hours apart, so "now" is unambiguous
offsets = st.one_of(st.none(), st.sampled_from([-2, -1, 1, 2]))
waits = st.lists(st.sampled_from([*NAMES, "*"]), max_size=2, unique=True)
messages = st.lists(
    st.tuples(st.sampled_from(NAMES), st.sampled_from([ports.MESSAGE_PENDING, "received"])), max_size=3
)


def _at(now: datetime, hours: int | None) -> datetime | None:
    return None if hours is None else now + timedelta(hours=hours)


def _seen(value: datetime | None, now: datetime) -> datetime | str | None:
    """A wake-up instant as compared: ``"now"`` for the commit's own clock (read a moment after ``now``)."""
    if value is not None and abs(value - now) < timedelta(minutes=5):
        return "now"
    return value


def _clean() -> None:
    models.QueueMessage.objects.all().delete()
    models.HistoryEntry.objects.all().delete()
    models.Actor.objects.all().delete()


def _actor(store, key: str, **columns) -> str:
    record, _ = store.create_actor("order", [key], {"in": 1}, {"count": 0})
    models.Actor.objects.filter(pk=record.actor_id).update(**columns)
    return record.actor_id


@pytest.fixture(params=STORES, ids=lambda cls: cls.__name__)
def store(request, transactional_db):
    return request.param(poll_interval=0.005)


@CASES
@given(
    state=st.sampled_from(STATES),
    wake_hours=offsets,
    waiting=waits,
    pending=messages,
    set_state=st.one_of(st.none(), st.sampled_from(STATES)),
    set_wake=st.one_of(st.none(), offsets),
    set_waiting=st.one_of(st.none(), waits),
    defer_hours=offsets,
    release=st.booleans(),
)
def test_the_wake_after_a_commit_is_the_rule(
    store, state, wake_hours, waiting, pending, set_state, set_wake, set_waiting, defer_hours, release
):
    _clean()
    now = store.now()
    actor_id = _actor(
        store,
        "k",
        workflow_state=state,
        wake_at=_at(now, wake_hours),
        waiting_for=waiting,
        lease_owner="w",
        lease_token=7,
        lease_expires_at=now + timedelta(hours=1),
    )
    for name, status in pending:
        models.QueueMessage.objects.create(
            actor_id=actor_id, name=name, body=None, status=status, created_at=now
        )
    commit = ports.Commit(release=release)
    if set_state is not None:
        commit.workflow_state = set_state
    if set_wake is not None:
        commit.wake_at = _at(now, set_wake)
    if set_waiting is not None:
        commit.waiting_for = set_waiting
    if defer_hours is not None:
        commit.defer_until = _at(now, defer_hours)

    result = store.commit(actor_id, 7, commit)

    columns = {"workflow_state": state, "wake_at": _at(now, wake_hours), "waiting_for": waiting}
    for name in columns:
        if getattr(commit, name) is not ports.UNSET:
            columns[name] = getattr(commit, name)
    expected = wake.settle(
        **columns,
        release=release,
        now=now,
        has_matching_message=lambda names: any(
            status == ports.MESSAGE_PENDING and wake.matches(names, name) for name, status in pending
        ),
        defer_until=commit.defer_until,
    )
    row = models.Actor.objects.get(pk=actor_id)
    assert result.ok
    assert _seen(result.wake_at, now) == _seen(row.wake_at, now) == _seen(expected, now)
    assert (actor_id in result.woken) == (release and wake.due_now(expected, now))
    assert (row.lease_owner is None) == release


@CASES
@given(
    state=st.sampled_from(STATES),
    wake_hours=offsets,
    waiting=waits,
    leased=st.booleans(),
    name=st.sampled_from(NAMES),
)
def test_a_delivery_wakes_by_the_rule(store, state, wake_hours, waiting, leased, name):
    _clean()
    now = store.now()
    actor_id = _actor(
        store,
        "k",
        workflow_state=state,
        wake_at=_at(now, wake_hours),
        waiting_for=waiting,
        lease_owner="w" if leased else None,
        lease_expires_at=now + timedelta(hours=1) if leased else None,
    )
    if state in ports.CLOSED_STATES:
        return  # a send is refused before the rule (tests/port/test_store_conformance.py)
    store.send(actor_id, name, {"n": 1})
    woke = wake.delivery_wakes(state, waiting, leased, name)
    before = _at(now, wake_hours)
    expected = wake.delivered_wake_at(before, now) if woke else before
    assert _seen(models.Actor.objects.get(pk=actor_id).wake_at, now) == _seen(expected, now)


members = st.lists(
    st.tuples(
        offsets,  # wake_at
        st.sampled_from([0, 0, 1, 5]),  # priority
        st.one_of(st.none(), st.sampled_from([-1, 1])),  # lease expiry
        st.booleans(),  # paused
        st.booleans(),  # destroyed
    ),
    min_size=1,
    max_size=5,
)


@CASES
@given(group=members)
def test_the_next_actor_of_a_group_is_the_rule(store, group):
    _clean()
    now = store.now()
    releasing = _actor(store, "releasing", concurrency_key="g", concurrency_limit=1)
    ids = []
    for i, (wake_hours, priority, lease_hours, paused, destroyed) in enumerate(group):
        ids.append(
            _actor(
                store,
                f"m{i}",
                concurrency_key="g",
                concurrency_limit=1,
                wake_at=_at(now, wake_hours),
                priority=priority,
                lease_owner=None if lease_hours is None else "w",
                lease_expires_at=_at(now, lease_hours),
                paused_at=now if paused else None,
                destroyed=destroyed,
            )
        )
    _actor(store, "other", concurrency_key="h", concurrency_limit=1, wake_at=now - timedelta(hours=3))
    rows = models.Actor.objects.filter(concurrency_key="g")
    expected = wake.next_in_group(
        (
            wake.GroupMember(
                actor_id=r.actor_id,
                wake_at=r.wake_at,
                priority=r.priority,
                created_at=r.created_at,
                lease_expires_at=r.lease_expires_at,
                paused=r.paused_at is not None,
                destroyed=r.destroyed,
            )
            for r in rows
        ),
        releasing=releasing,
        now=now,
    )
    if isinstance(store, PostgresStore):
        woken: list[str] = []
        store._wake_next_in_group(releasing, "order", "g", now, woken)
        found = woken[0] if woken else None
    else:
        found = store._next_in_group(releasing, "order", "g", now)
    assert found == expected
