"""Schedules as data on the Django stores (SQLite; PostgreSQL under DATABASE_URL) with real concurrency:
sweeping processes never fire a tick twice, a process killed mid-fire does not get its tick fired again,
and a backfill of a day of an hourly schedule starts 24 runs in tick order (DESIGN.md section 20)."""

from __future__ import annotations

import os
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import pytest

from rivet_workflows.engine.actor import data_schedules
from rivet_workflows.engine.client.client import Client
from rivet_workflows.engine.model import ports
from rivet_workflows.engine.model.definitions import setup, workflow
from rivet_workflows.testing.process import GroupProcess
from tests.conftest import run_in_threads

from . import schedule_worker

pytestmark = pytest.mark.django_db(transaction=True)

BASE_DIR = Path(__file__).resolve().parents[2]


def _env(tmp_path: Path, **extra: str) -> dict[str, str]:
    from django.db import connection

    env = dict(os.environ)
    for key in ("RIVET_SQLITE_PATH", "DATABASE_URL"):
        env.pop(key, None)
    name = connection.settings_dict["NAME"]
    if connection.vendor == "sqlite":
        env["RIVET_SQLITE_PATH"] = str(name)
    else:
        url = os.environ["DATABASE_URL"]
        env["DATABASE_URL"] = urlunsplit(urlsplit(url)._replace(path=f"/{name}"))
    env.update(
        DJANGO_SETTINGS_MODULE="project.settings",
        RIVET_VAR_DIR=str(tmp_path / "var"),
        PYTHONPATH=str(BASE_DIR),
        PYTHONUNBUFFERED="1",
        **extra,
    )
    return env


def _sweeper(tmp_path: Path, name: str, seconds: float, **extra: str) -> GroupProcess:
    cmd = [sys.executable, "-m", "tests.integration.schedule_worker", str(seconds)]
    return GroupProcess(
        name, cmd, env=_env(tmp_path, **extra), log_path=tmp_path / f"{name}.log", cwd=BASE_DIR
    )


def _backdate(schedule_id: str, when: datetime) -> None:
    """Move the schedule's next tick into the past, as downtime would."""
    from rivet_workflows import models

    models.Schedule.objects.filter(pk=schedule_id).update(next_fire_at=when)


def _wait(proc: GroupProcess, timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while proc.alive() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not proc.alive(), proc.tail()


def test_three_sweeping_processes_fire_each_tick_exactly_once(tmp_path: Path) -> None:
    rt = schedule_worker.runtime()
    schedules = Client(rt).schedules
    schedules.create("count", actor="counter", key="c", every=1, action="bump", catchup="all")
    start = data_schedules.next_tick(rt.store.schedule_get("count"), rt.store.now() - timedelta(seconds=40))
    _backdate("count", start)  # a 40-tick backlog, then live ticks while the sweeps run
    procs = [_sweeper(tmp_path, f"sweep-{i}", 4.0) for i in range(3)]
    for proc in procs:
        _wait(proc)
    fired = [int(proc.tail(1).split()[-1]) for proc in procs]
    log = schedules.fires("count")
    ticks = Client(rt).counter.get("c").state()["ticks"]
    assert sum(fired) == len(log) == len(ticks) >= 42, [p.tail(5) for p in procs]
    assert len(set(ticks)) == len(ticks)  # no tick served twice
    assert {f.status for f in log} == {"ok"}
    # consecutive: catch-up "all" skipped nothing between the backlog's start and the last tick (two
    # sweeps may serve neighbouring ticks at the same time, so the order of service is not asserted)
    ticks.sort()
    first, last = datetime.fromisoformat(ticks[0]), datetime.fromisoformat(ticks[-1])
    assert first == start and len(ticks) == int((last - first).total_seconds()) + 1


def test_threads_racing_a_due_tick_with_trigger_and_backfill_fire_it_once() -> None:
    rt = schedule_worker.runtime()
    schedules = Client(rt).schedules
    schedules.create("race", actor="counter", key="r", every=3600, action="bump")
    tick = data_schedules.next_tick(rt.store.schedule_get("race"), rt.store.now() - timedelta(hours=1))
    _backdate("race", tick)

    def one(i: int) -> int:
        if i % 2:
            return data_schedules.fire_due(rt, 10)
        return len(schedules.backfill("race", tick, tick + timedelta(seconds=1)))

    assert sum(run_in_threads(one, 6)) == 1
    assert Client(rt).counter.get("r").state()["ticks"] == [tick.isoformat()]


def test_a_sweep_killed_mid_fire_leaves_its_tick_fired_once(tmp_path: Path) -> None:
    rt = schedule_worker.runtime()
    schedules = Client(rt).schedules
    schedules.create("crash", actor="counter", every=3600, action="bump", catchup="one")
    tick = data_schedules.next_tick(rt.store.schedule_get("crash"), rt.store.now() - timedelta(hours=1))
    _backdate("crash", tick)
    hang = tmp_path / "hang"
    proc = _sweeper(tmp_path, "doomed", 60.0, SCHEDULE_HANG_FILE=str(hang))
    deadline = time.monotonic() + 60
    while not hang.exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert hang.read_text() == tick.isoformat(), proc.tail()
    proc.kill()  # SIGKILL inside the action
    (row,) = schedules.fires("crash")
    assert (row.tick, row.status) == (tick, "claimed")
    # the tick is taken: neither another sweep (back-dated again) nor a backfill fires it again
    _backdate("crash", tick)
    after = _sweeper(tmp_path, "survivor", 1.0)
    _wait(after)
    assert schedules.backfill("crash", tick - timedelta(hours=2), tick + timedelta(seconds=1)) != []
    log = {f.tick: f for f in schedules.fires("crash")}
    assert log[tick].status == "claimed" and log[tick].how == "sweep"
    assert sorted(log) == [tick - timedelta(hours=2), tick - timedelta(hours=1), tick]
    actor = Client(rt).counter.get(["crash", tick.isoformat()])
    assert actor.state()["ticks"] == []  # the killed fire's action never completed, and never ran again


async def _report(ctx):
    return ctx.input


def test_backfill_of_a_day_of_an_hourly_schedule_starts_24_runs_in_tick_order(make_django_runtime) -> None:
    from rivet_workflows.engine.runtime.executor import drain

    rt = make_django_runtime(setup(use={"report": workflow(run=_report)}))
    schedules = rt.client().schedules
    schedules.create("hourly", actor="report", cron="0 * * * *", timezone="Europe/Amsterdam", input={"n": 1})
    day = datetime(2026, 3, 1, tzinfo=UTC)
    fires = schedules.backfill("hourly", day, day + timedelta(days=1))
    assert [f.tick for f in fires] == [day + timedelta(hours=h) for h in range(24)]
    actors = rt.store.list_actors("report")
    assert [a.key for a in actors] == [["hourly", f.tick.isoformat()] for f in fires]
    assert schedules.backfill("hourly", day, day + timedelta(days=1)) == []
    drain(rt, timeout=20)
    assert {rt.store.get_actor(a.actor_id).workflow_state for a in actors} == {ports.COMPLETED}
