"""Debounce on the Django stores (SQLite, or PostgreSQL under DATABASE_URL) in real time (DESIGN.md 20)."""

from __future__ import annotations

import time

import pytest

import rivet_workflows as rw
from rivet_workflows.engine.runtime import executor

pytestmark = pytest.mark.django_db(transaction=True)

STARTS: list = []


async def _index(ctx):
    await ctx.step("index", lambda step: STARTS.append((ctx.input, time.monotonic())))


def test_fifty_real_calls_within_the_delay_start_one_run_with_the_last_input(make_django_runtime):
    STARTS.clear()
    runtime = make_django_runtime(rw.setup(use={"index": rw.workflow(run=_index)}))
    index = runtime.client().index
    for n in range(50):
        index.debounce("doc", {"n": n}, delay=2.0)
        executor.drain(runtime, timeout=0)  # nothing is due yet
    last_call = time.monotonic()
    assert STARTS == []
    executor.drain(runtime, timeout=6)
    assert [value for value, _ in STARTS] == [{"n": 49}]
    assert STARTS[0][1] - last_call >= 1.95  # not before the delay after the last call
    assert index.get("doc").workflow_state() == "completed"


def test_max_delay_bounds_a_real_burst(make_django_runtime):
    STARTS.clear()
    runtime = make_django_runtime(rw.setup(use={"index": rw.workflow(run=_index)}))
    index = runtime.client().index
    first = time.monotonic()
    n = 0
    while not STARTS and time.monotonic() - first < 5:  # calls every 0.05 s, delay 0.5 s: never quiet
        index.debounce("doc", n, delay=0.5, max_delay=1.0)
        executor.drain(runtime, timeout=0.05)
        n += 1
    assert len(STARTS) == 1
    assert 0.9 <= STARTS[0][1] - first <= 2.5


def test_concurrent_debounce_calls_make_one_actor_and_one_run(make_django_runtime):
    from tests.conftest import run_in_threads

    STARTS.clear()
    runtime = make_django_runtime(rw.setup(use={"index": rw.workflow(run=_index)}))
    index = runtime.client().index

    def caller(i: int) -> str:
        return {index.debounce("doc", {"caller": i, "n": n}, delay=2.0).actor_id for n in range(6)}.pop()

    ids = run_in_threads(caller, 8)
    assert len(set(ids)) == 1 and len(runtime.store.list_actors("index")) == 1
    executor.drain(runtime, timeout=6)
    assert len(STARTS) == 1 and STARTS[0][0]["n"] == 5  # one run, with one caller's last input
