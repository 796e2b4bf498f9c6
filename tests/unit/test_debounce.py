"""Debounce (``client().TYPE.debounce``, DESIGN.md section 20) on MemoryStore with a ManualClock: one run with
the last input after a burst, the start pushed back by each call and bounded by ``max_delay``."""

from __future__ import annotations

import pytest

import rivet_workflows as rw
from rivet_workflows.testing import ManualClock, drain, make_runtime

RUNS: list = []


async def _index(ctx):
    RUNS.append(ctx.input)
    return ctx.input


def _runtime(**types):
    clock = ManualClock()
    runtime = make_runtime(rw.setup(use={"index": rw.workflow(run=_index), **types}), clock=clock)
    return runtime, clock


@pytest.fixture(autouse=True)
def _reset():
    RUNS.clear()


def test_fifty_calls_within_the_delay_start_one_run_with_the_last_input():
    runtime, clock = _runtime()
    index = runtime.client().index
    handles = set()
    for n in range(50):
        handles.add(index.debounce("doc-1", {"version": n}, delay=5))
        clock.advance(1)  # each call within the delay of the previous one
        drain(runtime, timeout=0.05)
        assert RUNS == [] and index.get("doc-1").workflow_state() == "pending"
    assert len(handles) == 1
    clock.advance(3.9)  # 4.9 s after the last call
    drain(runtime, timeout=0.05)
    assert RUNS == []
    clock.advance(0.2)
    drain(runtime, timeout=0.05)
    assert RUNS == [{"version": 49}]
    assert handles.pop().workflow_state() == "completed"


def test_max_delay_bounds_a_never_ending_burst():
    runtime, clock = _runtime()
    index = runtime.client().index
    for n in range(30):  # a call every 2 s for a minute: the delay alone would never pass
        index.debounce("doc", n, delay=5, max_delay=20)
        drain(runtime, timeout=0.05)
        if RUNS:
            break
        clock.advance(2)
    # started 20 s after the first call (at the call of t=20 s, which found it due and behaved as get_or_create)
    assert RUNS == [9]
    index.debounce("doc", "late", delay=5, max_delay=20)  # started: a get_or_create, nothing changes
    clock.advance(60)
    drain(runtime, timeout=0.05)
    assert RUNS == [9] and index.get("doc").record().input == 9


def test_a_delay_beyond_a_year_is_refused_before_anything_is_written():
    runtime, _ = _runtime()
    for delay, max_delay in ((1e12, None), (5, 1e12)):
        with pytest.raises(ValueError, match="at most"):
            runtime.client().index.debounce("k", "x", delay=delay, max_delay=max_delay)
    assert runtime.store.list_actors("index") == []


def test_a_call_after_the_workflow_started_is_a_get_or_create():
    runtime, clock = _runtime()
    index = runtime.client().index
    handle = index.get_or_create("k", "first")  # due at once
    assert index.debounce("k", "second", delay=5) == handle
    drain(runtime, timeout=0.05)
    assert RUNS == ["first"]


def test_each_call_rebuilds_the_initial_state_from_its_input_and_on_create_runs_once():
    created = []

    def on_create(c, input):
        created.append(input)

    typed = rw.workflow(run=_index, create_state=lambda input: {"seen": input})
    hooked = rw.workflow(run=_index, create_state=lambda input: {"seen": input}, on_create=on_create)
    runtime, clock = _runtime(typed=typed, hooked=hooked)
    client = runtime.client()
    for n in range(3):
        client.typed.debounce("a", n, delay=1)
        client.hooked.debounce("a", n, delay=1)
    clock.advance(2)
    drain(runtime, timeout=0.05)
    assert sorted(RUNS) == [2, 2]  # both ran once, with the last input
    assert client.typed.get("a").state() == {"seen": 2}
    # with on_create the hook ran once, at the first call, and the state it built is kept
    assert created == [0] and client.hooked.get("a").state() == {"seen": 0}


def test_debounce_validates_its_arguments():
    runtime, _ = _runtime(plain=rw.actor(state={}))
    with pytest.raises(ValueError):
        runtime.client().index.debounce("k", delay=-1)
    with pytest.raises(TypeError, match="no workflow"):
        runtime.client().plain.debounce("k")
