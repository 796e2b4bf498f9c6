"""Schedules as data on the in-memory store (``client().schedules``, DESIGN.md section 20): ticks, catch-up,
pause/resume/trigger/backfill, actions and the typed errors of bad definitions."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest

from rivet_workflows.engine.actor import data_schedules, firing
from rivet_workflows.engine.model import errors, ports
from rivet_workflows.engine.model.definitions import actor, setup, workflow
from rivet_workflows.testing import ManualClock, drain, make_runtime

START = datetime(2026, 1, 1, 0, 0, 30, tzinfo=UTC)


async def _report(ctx):
    return {"input": ctx.input}


def _runtime(clock: ManualClock, log: list | None = None):
    log = [] if log is None else log

    def tick(c, fire, *args):
        log.append((fire, args))
        c.state["ticks"] += 1

    registry = setup(
        use={
            "report": workflow(run=_report),
            "ticker": actor(state={"ticks": 0}, actions={"tick": tick}),
        }
    )
    return make_runtime(registry, clock=clock)


def _sweep(runtime) -> int:
    return firing.sweep_schedules(runtime, 100)


def _reports(runtime) -> list[list]:
    return [a.key for a in runtime.store.list_actors("report")]


def test_every_ticks_are_aligned_to_the_epoch_and_each_fire_starts_a_run() -> None:
    clock = ManualClock(START)
    runtime = _runtime(clock)
    schedules = runtime.client().schedules
    info = schedules.create("nightly", actor="report", every=60, input={"n": 1})
    assert info.next_fire_at == datetime(2026, 1, 1, 0, 1, tzinfo=UTC)
    assert (info.actor, info.key, info.every, info.cron, info.paused) == ("report", None, 60.0, None, False)
    assert _sweep(runtime) == 0
    clock.advance(30)
    assert _sweep(runtime) == 1
    assert _sweep(runtime) == 0  # the tick is not fired twice
    assert _reports(runtime) == [["nightly", "2026-01-01T00:01:00+00:00"]]
    drain(runtime, timeout=2)
    handle = runtime.client().report.get(["nightly", "2026-01-01T00:01:00+00:00"])
    assert handle.workflow_state() == ports.COMPLETED
    got = schedules.get("nightly")
    assert got.next_fire_at == datetime(2026, 1, 1, 0, 2, tzinfo=UTC)
    assert got.last_fired_at == clock()


def test_a_cron_schedule_with_a_key_and_action_runs_the_action_with_the_tick() -> None:
    clock = ManualClock(START)
    log: list = []
    runtime = _runtime(clock, log)
    runtime.client().schedules.create(
        "t", actor="ticker", key="main", cron="*/5 * * * *", action="tick", args=(1, "x")
    )
    clock.advance(timedelta(minutes=10))
    assert _sweep(runtime) == 1  # catchup "one": the latest of the two passed ticks
    fire, args = log[0]
    assert (fire.name, fire.scheduled_at, fire.missed, args) == (
        "t",
        datetime(2026, 1, 1, 0, 10, tzinfo=UTC),
        1,
        (1, "x"),
    )
    assert runtime.client().ticker.get("main").state()["ticks"] == 1


def test_catchup_one_all_none_after_downtime() -> None:
    clock = ManualClock(START)
    runtime = _runtime(clock)
    schedules = runtime.client().schedules
    for policy in ("one", "all", "none"):
        schedules.create(policy, actor="report", every=60, catchup=policy)

    def ticks() -> dict:
        return {p: [f.tick.strftime("%H:%M") for f in schedules.fires(p)] for p in ("one", "all", "none")}

    clock.advance(timedelta(minutes=5))  # ticks 00:01 .. 00:05 passed with no sweep (down)
    _sweep(runtime)
    assert ticks() == {"one": ["00:05"], "all": ["00:01", "00:02", "00:03", "00:04", "00:05"], "none": []}
    assert schedules.fires("one")[0].missed == 4
    clock.advance(60)  # up again: 00:06 is reached 30 s late, before the next tick
    _sweep(runtime)
    assert [t[-1] for t in ticks().values()] == ["00:06"] * 3
    clock.advance(timedelta(minutes=10))  # down: 00:07 .. 00:16 passed
    _sweep(runtime)
    assert ticks()["none"] == ["00:06"]
    assert ticks()["one"] == ["00:05", "00:06", "00:16"]
    assert len(ticks()["all"]) == 16
    assert all(s.next_fire_at == datetime(2026, 1, 1, 0, 17, tzinfo=UTC) for s in schedules.list())


def test_a_paused_schedule_fires_nothing_and_trigger_fires_once() -> None:
    clock = ManualClock(START)
    runtime = _runtime(clock)
    schedules = runtime.client().schedules
    schedules.create("p", actor="report", every=60)
    assert schedules.pause("p").paused
    assert schedules.get("p").next_fire_at is None
    clock.advance(timedelta(minutes=30))
    assert _sweep(runtime) == 0
    fire = schedules.trigger("p")
    assert (fire.how, fire.status, fire.tick) == ("trigger", "ok", clock())
    assert _reports(runtime) == [["p", clock().isoformat()]]
    assert _sweep(runtime) == 0
    resumed = schedules.resume("p")
    assert not resumed.paused and resumed.next_fire_at == datetime(2026, 1, 1, 0, 31, tzinfo=UTC)
    clock.advance(60)
    assert _sweep(runtime) == 1  # the paused half hour is not caught up
    assert len(_reports(runtime)) == 2


def test_backfill_of_a_day_of_an_hourly_schedule_fires_24_runs_in_order_once() -> None:
    clock = ManualClock(datetime(2026, 1, 3, tzinfo=UTC))
    runtime = _runtime(clock)
    schedules = runtime.client().schedules
    schedules.create("hourly", actor="report", cron="0 * * * *")
    day = datetime(2026, 1, 1, tzinfo=UTC)
    first = schedules.backfill("hourly", day + timedelta(hours=5), day + timedelta(hours=6))
    assert [f.tick for f in first] == [day + timedelta(hours=5)]
    fires = schedules.backfill("hourly", day, day + timedelta(days=1))
    assert [f.tick for f in fires] == [day + timedelta(hours=h) for h in range(24) if h != 5]
    assert [f.how for f in fires] == ["backfill"] * 23
    keys = _reports(runtime)
    assert keys == [["hourly", (day + timedelta(hours=h)).isoformat()] for h in (5, *range(5), *range(6, 24))]
    assert schedules.backfill("hourly", day, day + timedelta(days=1)) == []
    assert len(schedules.fires("hourly")) == 24


def test_delete_and_unknown_ids() -> None:
    runtime = _runtime(ManualClock(START))
    schedules = runtime.client().schedules
    schedules.create("x", actor="report", every=10)
    assert [s.schedule_id for s in schedules.list()] == ["x"]
    with pytest.raises(errors.ScheduleAlreadyExistsError):
        schedules.create("x", actor="report", every=10)
    schedules.delete("x")
    assert schedules.list() == []
    for call in (schedules.get, schedules.pause, schedules.resume, schedules.trigger, schedules.delete):
        with pytest.raises(errors.ScheduleNotFoundError):
            call("x")


@pytest.mark.parametrize(
    ("fields", "error", "field"),
    [
        ({"every": 0.5}, errors.InvalidScheduleError, "every"),
        ({"every": -1}, errors.InvalidScheduleError, "every"),
        ({"cron": "61 * * * *"}, errors.InvalidScheduleError, "cron"),
        ({"cron": "* * * * *", "every": 60}, errors.InvalidScheduleError, "cron"),
        ({}, errors.InvalidScheduleError, "cron"),
        ({"every": 60, "timezone": "Mars/Base"}, errors.InvalidScheduleError, "timezone"),
        ({"every": 60, "catchup": "some"}, errors.InvalidScheduleError, "catchup"),
        ({"every": 60, "actor": "nobody"}, errors.ActorNotFoundError, None),
        ({"every": 60, "action": "nope"}, errors.ActionNotFoundError, None),
        # found by a new user: never-firing and 6-field cron, a huge every, an id the URL cannot carry
        ({"cron": "0 0 30 2 *"}, errors.InvalidScheduleError, "cron"),
        ({"cron": "0 0 31 4 *"}, errors.InvalidScheduleError, "cron"),
        ({"cron": "0 0 * * * *"}, errors.InvalidScheduleError, "cron"),
        ({"every": 2**63}, errors.InvalidScheduleError, "every"),
        ({"every": 60, "schedule_id": "a/b"}, errors.InvalidScheduleError, "schedule_id"),
    ],
)
def test_bad_definitions_raise_typed_errors(fields: dict, error: type, field: str | None) -> None:
    runtime = _runtime(ManualClock(START))
    fields = {"actor": "report", **fields}
    schedule_id = fields.pop("schedule_id", "bad")
    with pytest.raises(error) as info:
        runtime.client().schedules.create(schedule_id, **fields)
    if field is not None:
        assert info.value.field == field and isinstance(info.value, ValueError)
    assert runtime.client().schedules.list() == []


def test_backfill_refuses_naive_or_reversed_ranges() -> None:
    runtime = _runtime(ManualClock(START))
    schedules = runtime.client().schedules
    schedules.create("b", actor="report", every=60)
    with pytest.raises(errors.InvalidScheduleError):
        schedules.backfill("b", datetime(2026, 1, 1), datetime(2026, 1, 2))
    with pytest.raises(errors.InvalidScheduleError):
        schedules.backfill("b", START, START - timedelta(hours=1))
    east = timezone(timedelta(hours=14))
    with pytest.raises(errors.InvalidScheduleError) as info:  # before datetime's range once in UTC
        schedules.backfill("b", datetime(1, 1, 1, tzinfo=east), datetime(1, 1, 1, 0, 1, tzinfo=east))
    assert info.value.field == "start"


def test_backfill_fires_no_tick_still_to_come() -> None:
    clock = ManualClock(START)
    runtime = _runtime(clock)
    schedules = runtime.client().schedules
    schedules.create("b", actor="report", every=60)
    fires = schedules.backfill("b", START - timedelta(minutes=3), START + timedelta(hours=1))
    assert [f.tick for f in fires] == [START.replace(second=0) - timedelta(minutes=m) for m in (2, 1, 0)]
    clock.advance(60)
    assert _sweep(runtime) == 1  # the next tick is the sweep's, fired once, at its time


def test_drain_sleeps_until_a_schedule_tick() -> None:
    runtime = make_runtime(setup(use={"report": workflow(run=_report)}))
    runtime.client().schedules.create("soon", actor="report", every=1)
    drain(runtime, timeout=1.5)
    (fired,) = runtime.store.list_actors("report")[:1]
    assert fired.key[0] == "soon"
    assert runtime.client().report.get(fired.key).workflow_state() == ports.COMPLETED


def test_next_tick_of_every_is_on_multiples_since_the_epoch() -> None:
    record = ports.ScheduleRecord(schedule_id="s", actor="report", every=3600)
    assert data_schedules.next_tick(record, START) == datetime(2026, 1, 1, 1, tzinfo=UTC)
    assert data_schedules.next_tick(record, datetime(2026, 1, 1, 1, tzinfo=UTC)) == datetime(
        2026, 1, 1, 2, tzinfo=UTC
    )


def test_a_fire_left_claimed_by_a_dead_worker_is_finished_once_without_an_action_only() -> None:
    clock = ManualClock(START)
    runtime = _runtime(clock)
    schedules = runtime.client().schedules
    schedules.create("runs", actor="report", every=3600)
    schedules.create("acts", actor="ticker", key="t", every=3600, action="tick")
    tick = datetime(2026, 1, 1, tzinfo=UTC)
    for schedule_id in ("runs", "acts"):  # what a worker killed right after its claim leaves
        claim = ports.ScheduleFireRecord(schedule_id=schedule_id, tick=tick, fired_at=clock(), how="backfill")
        assert runtime.store.schedule_claim_tick(claim)
    clock.advance(data_schedules.STALE_FIRE_SECONDS - 1)
    assert data_schedules.refire_stale(runtime) == 0  # maybe still running
    clock.advance(2)
    assert data_schedules.refire_stale(runtime) == 1
    assert data_schedules.refire_stale(runtime) == 0
    (runs,) = schedules.fires("runs")
    assert (runs.status, runs.actor_id is not None) == ("ok", True)
    assert _reports(runtime) == [["runs", tick.isoformat()]]
    (acts,) = schedules.fires("acts")
    assert acts.status == "claimed"  # its action may have run: never run again


def test_the_async_twins_do_what_the_sync_methods_do() -> None:
    import asyncio

    runtime = _runtime(ManualClock(START))
    schedules = runtime.client().schedules

    async def main():
        await schedules.acreate("a", actor="report", every=60)
        await schedules.apause("a")
        fire = await schedules.atrigger("a")
        return await schedules.aget("a"), fire, await schedules.alist()

    info, fire, listed = asyncio.run(main())
    assert info.paused and fire.status == "ok" and [s.schedule_id for s in listed] == ["a"]
