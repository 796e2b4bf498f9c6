"""The claim's flow rules on every store (DESIGN.md section 12, the ``claim`` docstring of ``engine.ports``):
concurrency limits per type and per key, priority, run-start rate limits, pause and the workflow deadline."""

from __future__ import annotations

from datetime import timedelta

import pytest

from rivet_workflows.engine.model import errors, ports
from rivet_workflows.testing import MemoryStore
from tests.conftest import is_postgres, run_in_threads

from .support import HOUR


def limited(h, key: str, *, group: str = "", limit: int | None = 2, rate=None, priority=0, name="job"):
    """A due actor ``(name, [key])`` in concurrency group ``group`` (limit ``limit``, rate ``(count, per)``)."""
    flow = ports.Flow(
        concurrency_key=group,
        concurrency_limit=limit,
        rate_count=rate[0] if rate else None,
        rate_per=rate[1] if rate else None,
        priority=priority,
    )
    record, created = h.store.create_actor(name, [key], None, {}, due=True, flow=flow)
    assert created
    return record.actor_id


def age_starts(h, seconds: float) -> None:
    """Move every recorded run start ``seconds`` into the past (time passing for the rate window)."""
    if isinstance(h.store, MemoryStore):
        with h.store._lock:
            for starts in h.store._starts.values():
                starts[:] = [at - timedelta(seconds=seconds) for at in starts]
        return
    from django.db.models import F

    from rivet_workflows import models

    models.FlowStart.objects.update(started_at=F("started_at") - timedelta(seconds=seconds))


def test_the_flow_is_recorded_on_the_row_at_creation(h):
    flow = ports.Flow(concurrency_key="acme", concurrency_limit=3, priority=5, timeout=60.0)
    before = h.store.now()
    record, _ = h.store.create_actor("job", ["k"], None, {}, flow=flow)
    assert (record.concurrency_key, record.priority) == ("acme", 5)
    assert before + timedelta(seconds=59) < record.deadline_at < h.store.now() + timedelta(seconds=61)
    plain, _ = h.store.create_actor("job", ["plain"], None, {})
    assert (plain.concurrency_key, plain.priority, plain.deadline_at, plain.paused) == (None, 0, None, False)
    built, created = h.store.get_or_create_actor(
        "job", ["lazy"], None, lambda: {"tenant": "t1"}, flow=lambda state: ports.Flow(state["tenant"], 1)
    )
    assert created and built.concurrency_key == "t1"
    assert h.store.get_actor(built.actor_id).concurrency_key == "t1"


def test_a_claim_over_the_concurrency_limit_is_refused_until_a_slot_frees(h):
    a, b, c = (limited(h, k) for k in "abc")
    token_a = h.store.claim(a, "w1", 30)
    assert token_a is not None and h.store.claim_and_load(b, "w2", 30) is not None
    assert h.store.claim(c, "w3", 30) is None  # two of the type hold a lease: the limit
    assert h.store.claim_due("sweep", 10, 30) == []
    released = h.store.release(a, token_a)
    assert released.ok and c in released.woken  # the freed slot wakes the next due actor at once
    assert h.store.claim(c, "w3", 30) is not None


def test_an_expired_lease_frees_its_slot(h):
    a, b = limited(h, "a", limit=1), limited(h, "b", limit=1)
    assert h.store.claim(a, "dead", 30) is not None
    assert h.store.claim(b, "w", 30) is None
    h.set_columns(a, lease_expires_at=h.store.now() - timedelta(seconds=1))
    assert h.store.claim(b, "w", 30) is not None


def test_limits_count_per_key_value_and_leave_other_types_alone(h):
    a1, a2 = limited(h, "a1", group="acme", limit=1), limited(h, "a2", group="acme", limit=1)
    g1 = limited(h, "g1", group="globex", limit=1)
    other = limited(h, "o1", group="acme", limit=1, name="report")  # same key value, another type
    free = h.new_actor("free", due=True)
    claimed = {actor_id for actor_id, _ in h.store.claim_due("sweep", 10, 30)}
    assert claimed & {a1, a2} in ({a1}, {a2}) and {g1, other, free} <= claimed and len(claimed) == 4


def test_claim_due_takes_higher_priority_first_then_the_oldest_wake_at(h):
    now = h.store.now()
    low = limited(h, "low", limit=None, priority=0)
    high_late = limited(h, "high-late", limit=None, priority=5)
    high_early = limited(h, "high-early", limit=None, priority=5)
    h.set_columns(low, wake_at=now - HOUR)
    h.set_columns(high_late, wake_at=now - timedelta(minutes=1))
    h.set_columns(high_early, wake_at=now - timedelta(minutes=2))
    assert [a for a, _ in h.store.claim_due("sweep", 2, 30)] == [high_early, high_late]
    assert [a for a, _ in h.store.claim_due("sweep", 2, 30)] == [low]


def test_a_full_group_does_not_hold_up_the_batch(h):
    now = h.store.now()
    waiting = [limited(h, f"w{i}", limit=1) for i in range(6)]
    for i, actor_id in enumerate(waiting):
        h.set_columns(actor_id, wake_at=now - HOUR + timedelta(seconds=i))  # older than the free actor
    free = h.new_actor("free", due=True)
    claimed = [a for a, _ in h.store.claim_due("sweep", 2, 30)]
    if free not in claimed:  # a store may come back short while the group fills; the next claim passes it
        claimed += [a for a, _ in h.store.claim_due("sweep", 2, 30)]
    assert claimed == [waiting[0], free]


def test_the_slot_freed_wakes_the_highest_priority_then_oldest_waiting_actor(h):
    now = h.store.now()
    running = limited(h, "run", limit=1)
    token = h.store.claim(running, "w", 30)
    old, new, urgent = limited(h, "old", limit=1), limited(h, "new", limit=1), limited(h, "urg", limit=1)
    h.set_columns(old, wake_at=now - HOUR)
    h.set_columns(new, wake_at=now - timedelta(seconds=5))
    woken = h.store.release(running, token).woken  # itself (still due: no run committed) and the next
    assert [a for a in woken if a != running] == [old]
    h.set_columns(urgent, priority=9)  # the harness writes the column like a type with priority=9
    token = h.store.claim(old, "w", 30)
    result = h.store.commit(old, token, ports.Commit(workflow_state=ports.COMPLETED, release=True))
    assert result.woken == [urgent]


def test_concurrent_claims_never_pass_the_limit(h):
    if h.kind == "django" and is_postgres():
        pytest.skip(
            "the portable store's check is exact where writers are serialised; PostgresStore decides on PG"
        )
    ids = [limited(h, str(i), limit=3) for i in range(12)]
    batches = run_in_threads(lambda i: h.store.claim_due(f"sweep-{i}", 4, 30), 4)
    singles = run_in_threads(lambda i: h.store.claim(ids[i], f"w-{i}", 30), 8)
    claimed = [a for batch in batches for a, _ in batch] + [
        ids[i] for i, t in enumerate(singles) if t is not None
    ]
    assert len(claimed) == 3 and len(set(claimed)) == 3


def test_a_rate_limit_counts_run_starts_in_the_window(h):
    a, b, c = (limited(h, k, limit=None, rate=(2, 60.0)) for k in "abc")
    token_a = h.store.claim(a, "w", 30)
    assert token_a is not None
    assert h.store.release(a, token_a).ok
    assert h.store.claim(a, "w", 30) is not None  # a second start of the same actor counts too
    assert h.store.claim(b, "w", 30) is None and h.store.claim_due("sweep", 10, 30) == []
    retry = h.store.flow_retry_at(b)
    assert retry is not None and h.store.now() + timedelta(seconds=58) < retry < h.store.now() + timedelta(
        seconds=61
    )
    plain = h.new_actor("plain", due=True)
    assert h.store.flow_retry_at(plain) is None
    age_starts(h, 61)  # the window moved on
    assert h.store.flow_retry_at(b) is None
    assert {x for x, _ in h.store.claim_due("sweep", 10, 30)} == {b, c, plain}
    assert h.store.claim(limited(h, "d", limit=None, rate=(2, 60.0)), "w", 30) is None  # b and c started


def test_a_paused_actor_is_never_claimed_and_resumes_due(h):
    actor_id = h.new_actor("p", due=True)
    assert h.store.set_paused(actor_id, True, "maintenance") is True
    assert h.store.set_paused(actor_id, True) is False  # already paused
    record = h.store.get_actor(actor_id)
    assert (record.paused, record.pause_reason, record.workflow_state) == (True, "maintenance", ports.PAUSED)
    assert h.store.claim(actor_id, "w", 30) is None and h.store.claim_and_load(actor_id, "w", 30) is None
    assert h.store.claim_due("sweep", 10, 30) == []
    assert h.store.set_paused(actor_id, False) is True and h.store.set_paused(actor_id, False) is False
    assert h.store.get_actor(actor_id).workflow_state == ports.PENDING
    assert [a for a, _ in h.store.claim_due("sweep", 10, 30)] == [actor_id]  # its deadline kept: due at once


def test_an_operator_claim_takes_a_paused_or_limited_actor_but_not_a_live_lease(h):
    """``claim_for_operator``: the lease of a free or expired actor, whatever the pause and flow limits,
    and no run start recorded (DESIGN.md section 12: an operator cancels or replays what they paused)."""
    paused = h.new_actor("p", due=True)
    assert h.store.set_paused(paused, True)
    token = h.store.claim_for_operator(paused, "operator", 30)
    assert token is not None and token == h.store.get_actor(paused).lease_token
    assert h.store.claim_for_operator(paused, "other", 30) is None  # the lease is live now
    assert h.store.claim(paused, "w", 30) is None
    done = h.store.commit(
        paused, token, ports.Commit(workflow_state=ports.CANCELLED, wake_at=None, release=True)
    )
    assert done.ok and h.store.get_actor(paused).workflow_state == ports.CANCELLED

    a, b = limited(h, "a", limit=1, rate=(2, 60.0)), limited(h, "b", limit=1, rate=(2, 60.0))
    assert h.store.claim(a, "w", 30) is not None
    assert h.store.claim(b, "w", 30) is None  # the limit holds b back
    token_b = h.store.claim_for_operator(b, "operator", 30)
    assert token_b is not None
    assert h.store.release(b, token_b).ok
    h.expire_lease(a)
    assert h.store.claim(b, "w", 30) is not None  # the operator's claim was not a run start (1 of 2 used)
    gone = h.new_actor("gone")
    h.store.destroy_actor(gone)
    assert h.store.claim_for_operator(gone, "operator", 30) is None


def test_a_run_holding_the_lease_learns_of_the_pause_from_its_next_commit(h):
    actor_id = h.new_actor("p", due=True)
    token = h.store.claim(actor_id, "w", 30)
    assert h.store.commit(actor_id, token, ports.Commit(workflow_state=ports.RUNNING)).paused is False
    assert h.store.set_paused(actor_id, True)
    assert h.store.commit(actor_id, token, ports.Commit(state={"n": 1})).paused is True
    assert h.store.commit(actor_id, token, ports.Commit(workflow_state=ports.SLEEPING, release=True)).paused


def test_pausing_a_finished_workflow_changes_nothing(h):
    actor_id = h.new_actor("done", due=True)
    token = h.store.claim(actor_id, "w", 30)
    h.store.commit(actor_id, token, ports.Commit(workflow_state=ports.COMPLETED, release=True))
    assert h.store.set_paused(actor_id, True) is False
    with pytest.raises(errors.ActorNotFoundError):
        h.store.set_paused("0" * 32, True)


def test_claims_and_releases_racing_never_hold_more_than_the_limit(h):
    if h.kind == "django" and is_postgres():
        pytest.skip(
            "the portable store's check is exact where writers are serialised; PostgresStore decides on PG"
        )
    import random

    ids = [limited(h, str(i), limit=3) for i in range(10)]

    def live() -> int:  # one consistent reading: under the store's lock, or one query
        if isinstance(h.store, MemoryStore):
            with h.store._lock:
                now = h.store.now()
                return sum(
                    1 for a in ids if (r := h.store._actors[a]).lease_owner and r.lease_expires_at > now
                )
        from rivet_workflows import models

        now = h.store.now()
        return models.Actor.objects.filter(
            pk__in=ids, lease_owner__isnull=False, lease_expires_at__gt=now
        ).count()

    def worker(i: int) -> int:
        rng, peak = random.Random(i), 0
        for _ in range(12):
            if rng.random() < 0.5:
                got = h.store.claim_due(f"s{i}", 2, 30)
            else:
                target = rng.choice(ids)
                token = h.store.claim(target, f"w{i}", 30)
                got = [] if token is None else [(target, token)]
            peak = max(peak, live())
            for actor_id, token in got:
                h.store.release(actor_id, token)
        return peak

    assert max(run_in_threads(worker, 6)) <= 3


def test_a_paused_actor_sets_no_deadline(h):
    actor_id = h.new_actor("p", due=True)
    assert h.store.next_deadline() is not None
    h.store.set_paused(actor_id, True)
    assert h.store.next_deadline() is None  # drain does not wait for it
    h.store.set_paused(actor_id, False)
    assert h.store.next_deadline() is not None


def test_set_paused_writes_its_audit_row_with_the_change_only(h):
    actor_id = h.new_actor("p", due=True)

    def row(action, reason=None):
        return ports.OperatorActionRecord(actor_id=actor_id, action=action, who="carol", reason=reason)

    assert h.store.set_paused(actor_id, True, "deploy", audit=row("pause", "deploy")) is True
    assert h.store.set_paused(actor_id, True, "again", audit=row("pause", "again")) is False  # no row
    assert h.store.set_paused(actor_id, False, audit=row("resume")) is True
    assert h.store.set_paused(actor_id, False, audit=row("resume", "twice")) is False
    rows = h.store.operator_actions(actor_id)
    assert [(r.action, r.who, r.reason) for r in rows] == [
        ("resume", "carol", None),
        ("pause", "carol", "deploy"),
    ]
    assert all(r.at is not None and r.id for r in rows)


def _suspend(h, key: str, version: str | None) -> str:
    actor_id = h.new_actor(key, due=True)
    token = h.store.claim(actor_id, "w", 30)
    suspended = ports.Commit(
        workflow_state=ports.SUSPENDED, error={"name": "AttributeError"}, wake_at=None, release=True
    )
    suspended.code_version = version
    h.store.commit(actor_id, token, suspended)
    return actor_id


def test_suspended_runs_are_never_due_nor_paused_and_are_found_by_another_code_version(h):
    v1 = _suspend(h, "a", "v1")
    unversioned = _suspend(h, "b", None)
    v2 = _suspend(h, "c", "v2")
    assert h.store.claim_due("sweep", 10, 30) == []
    assert h.store.set_paused(v1, True) is False
    assert set(h.store.suspended_by_other_version("v2", 10)) == {v1, unversioned}
    assert set(h.store.suspended_by_other_version("v3", 10)) == {v1, unversioned, v2}
    assert len(h.store.suspended_by_other_version("v3", 2)) == 2
    h.store.send(v1, "go", 1)  # a suspended run keeps its messages and is not woken by them
    assert (
        h.store.claim_due("sweep", 10, 30) == [] and h.store.get_actor(v1).workflow_state == ports.SUSPENDED
    )
