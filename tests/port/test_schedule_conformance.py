"""Conformance of the ``schedule_*`` members of ``ports.Store`` (schedules as data, DESIGN.md section 20)."""

from __future__ import annotations

from datetime import timedelta

import pytest

from rivet_workflows.engine.model import errors, ports
from tests.conftest import run_in_threads

from .support import HOUR, StoreHarness


def _create(
    h: StoreHarness, schedule_id: str = "s1", *, due_in: timedelta = -HOUR, **fields
) -> ports.ScheduleRecord:
    record = ports.ScheduleRecord(
        schedule_id=schedule_id,
        actor="order",
        every=3600.0,
        input={"n": 1},
        args=[1, "two"],
        next_fire_at=h.store.now() + due_in,
        **fields,
    )
    return h.store.schedule_create(record)


def _fire(h: StoreHarness, tick, how: str = "sweep", schedule_id: str = "s1") -> ports.ScheduleFireRecord:
    return ports.ScheduleFireRecord(schedule_id=schedule_id, tick=tick, fired_at=h.store.now(), how=how)


def test_created_schedule_reads_back_as_written(h: StoreHarness) -> None:
    created = _create(h, key=["a", 1], action="tick", catchup="all")
    got = h.store.schedule_get("s1")
    assert got == created
    assert (got.key, got.every, got.input, got.args, got.action, got.catchup) == (
        ["a", 1],
        3600.0,
        {"n": 1},
        [1, "two"],
        "tick",
        "all",
    )
    assert got.created_at is not None and got.last_fired_at is None
    assert h.store.schedule_get("nope") is None


def test_a_taken_schedule_id_is_refused(h: StoreHarness) -> None:
    _create(h)
    with pytest.raises(errors.ScheduleAlreadyExistsError):
        _create(h)


def test_list_is_ordered_by_id_and_delete_removes_schedule_and_log(h: StoreHarness) -> None:
    _create(h, "b")
    _create(h, "a")
    assert [r.schedule_id for r in h.store.schedule_list()] == ["a", "b"]
    tick = h.store.now()
    assert h.store.schedule_claim_tick(_fire(h, tick, schedule_id="a"))
    assert h.store.schedule_delete("a") is True
    assert h.store.schedule_delete("a") is False
    assert h.store.schedule_fires("a") == []
    _create(h, "a")  # the id is free again, its old log gone with it
    assert h.store.schedule_claim_tick(_fire(h, tick, schedule_id="a"))


def test_due_lists_unpaused_schedules_whose_tick_passed(h: StoreHarness) -> None:
    _create(h, "late", due_in=-2 * HOUR)
    _create(h, "due", due_in=-HOUR)
    _create(h, "future", due_in=HOUR)
    _create(h, "paused", due_in=-HOUR, paused=True)
    assert [r.schedule_id for r in h.store.schedule_due(10)] == ["late", "due"]
    assert [r.schedule_id for r in h.store.schedule_due(1)] == ["late"]
    assert h.store.schedule_next_deadline() == h.store.schedule_get("late").next_fire_at


def test_pause_clears_the_deadline_and_advance_refuses_a_paused_schedule(h: StoreHarness) -> None:
    record = _create(h)
    paused = h.store.schedule_set_paused("s1", True, None)
    assert paused.paused and paused.next_fire_at is None
    assert h.store.schedule_due(10) == [] and h.store.schedule_next_deadline() is None
    assert h.store.schedule_advance("s1", record.next_fire_at, record.next_fire_at + HOUR) is False
    assert h.store.schedule_set_paused("nope", True, None) is None


def test_advance_is_a_compare_and_set(h: StoreHarness) -> None:
    record = _create(h)
    later = record.next_fire_at + HOUR
    assert h.store.schedule_advance("s1", record.next_fire_at, later) is True
    assert h.store.schedule_advance("s1", record.next_fire_at, later + HOUR) is False
    assert h.store.schedule_get("s1").next_fire_at == later


def test_a_tick_is_claimed_once_whoever_claims_it(h: StoreHarness) -> None:
    _create(h)
    tick = h.store.now().replace(microsecond=0)
    assert h.store.schedule_claim_tick(_fire(h, tick, "sweep")) is True
    assert h.store.schedule_claim_tick(_fire(h, tick, "backfill")) is False
    assert h.store.schedule_claim_tick(_fire(h, tick + HOUR, "trigger")) is True
    h.store.schedule_fire_done("s1", tick, "ok", "actor-1", None)
    h.store.schedule_fire_done("s1", tick + HOUR, "error", None, {"type": "Boom"})
    log = h.store.schedule_fires("s1")
    assert [(f.tick, f.how, f.status, f.actor_id, f.error) for f in log] == [
        (tick, "sweep", "ok", "actor-1", None),
        (tick + HOUR, "trigger", "error", None, {"type": "Boom"}),
    ]
    assert [f.tick for f in h.store.schedule_fires("s1", limit=1)] == [tick + HOUR]
    assert h.store.schedule_get("s1").last_fired_at is not None


def test_a_paused_schedule_refuses_sweep_claims_but_not_trigger_or_backfill(h: StoreHarness) -> None:
    _create(h, paused=True)
    tick = h.store.now()
    assert h.store.schedule_claim_tick(_fire(h, tick, "sweep")) is False
    assert h.store.schedule_claim_tick(_fire(h, tick, "trigger")) is True
    assert h.store.schedule_claim_tick(_fire(h, tick + HOUR, "backfill")) is True
    assert h.store.schedule_claim_tick(_fire(h, tick, "sweep", schedule_id="gone")) is False


def test_concurrent_claims_of_one_tick_have_one_winner(h: StoreHarness) -> None:
    _create(h)
    tick = h.store.now().replace(microsecond=0)
    won = run_in_threads(lambda i: h.store.schedule_claim_tick(_fire(h, tick, "sweep")), 6)
    assert won.count(True) == 1
    assert len(h.store.schedule_fires("s1")) == 1


def test_stale_claimed_fires_of_schedules_without_action_are_retaken_once(h: StoreHarness) -> None:
    _create(h, "plain")
    _create(h, "acting", action="tick")
    tick = h.store.now().replace(microsecond=0)
    for schedule_id in ("plain", "acting"):
        assert h.store.schedule_claim_tick(_fire(h, tick, schedule_id=schedule_id))
    assert h.store.schedule_claim_tick(_fire(h, tick + HOUR, schedule_id="plain"))
    h.store.schedule_fire_done("plain", tick + HOUR, "ok", "a1", None)  # finished: not stale
    assert h.store.schedule_stale_fires(h.store.now() - HOUR, 10) == []
    (stale,) = h.store.schedule_stale_fires(h.store.now() + HOUR, 10)
    assert (stale.schedule_id, stale.tick, stale.status) == ("plain", tick, "claimed")
    later = stale.fired_at + timedelta(minutes=5)
    assert h.store.schedule_retake_fire("plain", tick, stale.fired_at, later) is True
    assert h.store.schedule_retake_fire("plain", tick, stale.fired_at, later) is False
    assert h.store.schedule_fires("plain")[0].fired_at == later
