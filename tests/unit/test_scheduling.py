"""Cron and one-off schedules on the in-memory store (engine.slots, schedules, firing): slots, DST, catch-up."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest

from project.examples.cron import cron_actor
from rivet_workflows.engine.actor import firing, slots
from rivet_workflows.engine.model import errors, ports
from rivet_workflows.engine.model.definitions import actor, queue, setup, workflow
from rivet_workflows.testing import ManualClock, drain, make_runtime

AMS = ZoneInfo("Europe/Amsterdam")


def _fires_between(expression: str, tz: str, start: datetime, end: datetime) -> list[datetime]:
    out, t = [], start
    while True:
        t = slots.next_cron_slot(expression, tz, t)
        if t > end:
            return out
        out.append(t)


def _ticker(log: list) -> object:
    def tick(c, fire, *args):
        log.append((fire, args))
        c.state["ticks"] += 1

    return actor(state={"ticks": 0}, actions={"tick": tick, "noop": lambda c: None})


def _runtime(clock: ManualClock, **defs: object):
    return make_runtime(setup(use=defs), clock=clock)


def test_spring_forward_amsterdam_fires_once_per_local_slot() -> None:
    # 2026-03-29: 02:00 CET jumps to 03:00 CEST. The 02:30 slot does not exist.
    start = datetime(2026, 3, 28, 23, 0, tzinfo=UTC)
    fires = _fires_between("30 * * * *", "Europe/Amsterdam", start, start + timedelta(hours=5))
    local = [f.astimezone(AMS).strftime("%H:%M") for f in fires]
    assert local == ["00:30", "01:30", "03:30", "04:30", "05:30"]
    assert len(set(fires)) == len(fires)


def test_fall_back_amsterdam_fires_repeated_slot_once() -> None:
    # 2026-10-25: 03:00 CEST falls back to 02:00 CET; 02:30 happens twice.
    start = datetime(2026, 10, 24, 22, 0, tzinfo=UTC)  # 00:00 CEST
    fires = _fires_between("30 2 * * *", "Europe/Amsterdam", start, start + timedelta(hours=24))
    assert len(fires) == 1
    assert fires[0] == datetime(2026, 10, 25, 0, 30, tzinfo=UTC)  # the first 02:30 (CEST)
    hourly = _fires_between("0 * * * *", "Europe/Amsterdam", start, start + timedelta(hours=6))
    assert [f.astimezone(AMS).strftime("%H") for f in hourly] == ["01", "02", "03", "04", "05"]


def test_daily_job_keeps_local_time_across_both_changes() -> None:
    start = datetime(2026, 3, 27, 12, 0, tzinfo=UTC)
    fires = _fires_between("0 9 * * *", "Europe/Amsterdam", start, datetime(2026, 10, 27, tzinfo=UTC))
    assert {f.astimezone(AMS).hour for f in fires} == {9}
    assert len(fires) == 213  # one per day, 2026-03-28 .. 2026-10-26


def test_cron_set_fires_through_dst_with_a_manual_clock() -> None:
    clock = ManualClock(datetime(2026, 3, 29, 0, 10, tzinfo=UTC))  # 01:10 CET
    log: list = []
    runtime = _runtime(clock, ticker=_ticker(log))
    handle = runtime.client().ticker.get_or_create("a")
    from rivet_workflows.engine.actor.actor_context import ActorContext

    c = ActorContext(runtime, runtime.registry.get("ticker"), handle.actor_id, handle.key)
    c.cron.set(name="half-past", expression="30 * * * *", timezone="Europe/Amsterdam", action="tick")
    for _ in range(4 * 60):  # four hours, minute by minute
        clock.advance(60)
        firing.fire_due(runtime)
    local = [f.scheduled_at.astimezone(AMS).strftime("%H:%M") for f, _ in log]
    assert local == ["01:30", "03:30", "04:30", "05:30"]
    assert all(f.lateness < 60 for f, _ in log)
    assert handle.state()["ticks"] == 4


def test_downtime_of_many_intervals_gives_one_catch_up_fire() -> None:
    clock = ManualClock(datetime(2026, 1, 1, tzinfo=UTC))
    log: list = []
    runtime = _runtime(clock, ticker=_ticker(log))
    handle = runtime.client().ticker.get_or_create("a")
    from rivet_workflows.engine.actor.actor_context import ActorContext

    c = ActorContext(runtime, runtime.registry.get("ticker"), handle.actor_id, handle.key)
    c.cron.every(name="t", interval=10, action="tick", args=("x",), max_history=3)
    clock.advance(10)
    assert firing.fire_due(runtime) == 1
    clock.advance(3600 + 5)  # 360 intervals with no sweep
    assert firing.fire_due(runtime) == 1
    assert firing.fire_due(runtime) == 0
    fire, args = log[-1]
    assert args == ("x",)
    assert fire.missed == 359
    assert fire.scheduled_at == datetime(2026, 1, 1, 1, 0, 10, tzinfo=UTC)  # latest missed slot
    (entry,) = runtime.store.cron_list(handle.actor_id)
    assert entry.next_fire_at == datetime(2026, 1, 1, 1, 0, 20, tzinfo=UTC)  # cadence kept
    for _ in range(5):
        clock.advance(10)
        firing.fire_due(runtime)
    assert len(runtime.store.cron_fires(entry.id)) == 3  # capped at max_history
    assert handle.state()["ticks"] == 7


def test_registering_again_keeps_the_schedule_and_validation_errors() -> None:
    clock = ManualClock(datetime(2026, 1, 1, tzinfo=UTC))
    runtime = _runtime(clock, ticker=_ticker([]))
    handle = runtime.client().ticker.get_or_create("a")
    from rivet_workflows.engine.actor.actor_context import ActorContext

    c = ActorContext(runtime, runtime.registry.get("ticker"), handle.actor_id, handle.key)
    first = c.cron.every(name="t", interval=timedelta(seconds=30), action="tick")
    clock.advance(20)
    again = c.cron.every(name="t", interval=30, action="tick")
    assert again.next_fire_at == first.next_fire_at
    with pytest.raises(ValueError, match="at least 5"):
        c.cron.every(name="fast", interval=1, action="tick")
    with pytest.raises(errors.ActionNotFoundError):
        c.cron.every(name="x", interval=10, action="missing")
    with pytest.raises(ValueError, match="cron expression"):
        c.cron.set(name="bad", expression="not a cron", action="tick")
    with pytest.raises(ValueError, match="timezone"):
        c.cron.set(name="bad", expression="* * * * *", timezone="Mars/Base", action="tick")
    assert c.cron.remove("t") is True
    assert runtime.store.cron_list(handle.actor_id) == []


def test_schedule_after_fires_once_and_concurrent_sweeps_do_not_double() -> None:
    clock = ManualClock(datetime(2026, 1, 1, tzinfo=UTC))
    log: list = []
    runtime = _runtime(clock, ticker=_ticker(log))
    handle = runtime.client().ticker.get_or_create("a")
    from rivet_workflows.engine.actor.actor_context import ActorContext

    c = ActorContext(runtime, runtime.registry.get("ticker"), handle.actor_id, handle.key)
    c.schedule.after(30, "tick", 1, 2)
    c.schedule.at(datetime(2026, 1, 1, 0, 1, tzinfo=UTC), "tick", 3)
    clock.advance(29)
    assert firing.fire_due(runtime) == 0
    clock.advance(1)
    (due,) = runtime.store.cron_due(10)
    # a second sweep that read the same row loses the compare-and-set
    assert runtime.store.cron_advance(due.id, due.next_fire_at, None) is True
    assert runtime.store.cron_advance(due.id, due.next_fire_at, None) is False
    clock.advance(60)
    assert firing.fire_due(runtime) == 1
    assert [(f.kind, a) for f, a in log] == [(ports.CRON_ONCE, (3,))]


def test_spec_cron_example_runs_on_the_memory_store() -> None:
    clock = ManualClock(datetime(2026, 1, 1, tzinfo=UTC))
    runtime = _runtime(clock, cron_actor=cron_actor)
    handle = runtime.client().cron_actor.get_or_create("c")
    drain(runtime, timeout=1)
    for _ in range(3):
        clock.advance(60)
        drain(runtime, timeout=1)
    state = handle.state()
    assert state["runs"] == 3
    assert state["last_run_at"] == datetime(2026, 1, 1, 0, 3, tzinfo=UTC)


def test_drain_sleeps_until_the_next_fire() -> None:
    log: list = []
    runtime = make_runtime(
        setup(
            use={
                "w": workflow(
                    run=_loop_run,
                    queues={"go": queue()},
                    actions={"go": lambda c, fire: c.queue.send("go", 1)},
                )
            }
        )
    )
    handle = runtime.client().w.get_or_create("a")
    from rivet_workflows.engine.actor.actor_context import ActorContext

    c = ActorContext(runtime, runtime.registry.get("w"), handle.actor_id, handle.key)
    c.schedule.after(0.3, "go")
    summary = drain(runtime, timeout=5)
    assert handle.workflow_state() == ports.COMPLETED, (summary, log)


async def _loop_run(ctx):
    message = await ctx.queue.next("wait-go")
    return message.body


def test_schedule_after_a_negative_delay_fires_on_the_next_sweep_and_nan_is_refused() -> None:
    clock = ManualClock(datetime(2026, 1, 1, tzinfo=UTC))
    log: list = []
    runtime = _runtime(clock, ticker=_ticker(log))
    handle = runtime.client().ticker.get_or_create("a")
    from rivet_workflows.engine.actor.actor_context import ActorContext

    c = ActorContext(runtime, runtime.registry.get("ticker"), handle.actor_id, handle.key)
    c.schedule.after(-5, "tick", 1)
    c.schedule.after(timedelta(seconds=-30), "tick", 2)
    with pytest.raises(ValueError, match="finite"):
        c.schedule.after(float("nan"), "tick", 3)
    assert firing.fire_due(runtime) == 2
    assert sorted(a for _, a in log) == [(1,), (2,)]
