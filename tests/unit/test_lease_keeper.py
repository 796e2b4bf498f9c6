"""The lease heartbeat is one process-wide keeper thread: it renews the lease of every run in progress,
evicts a run whose renew fails, and renews nothing of a run after its ``stop()`` returned."""

from __future__ import annotations

import asyncio
import os
import threading
import time
from types import SimpleNamespace

import pytest

from rivet_workflows.engine.model.definitions import setup, workflow
from rivet_workflows.engine.run import heartbeat
from rivet_workflows.engine.runtime import executor
from rivet_workflows.testing import make_runtime

LEASE = 0.3


def _renews_recorded(store, renews: list) -> None:
    real_renew = store.renew

    def renew(actor_id, token, lease_seconds):
        renews.append((actor_id, threading.current_thread().name))
        return real_renew(actor_id, token, lease_seconds)

    store.renew = renew


def test_the_keeper_renews_the_leases_of_two_concurrent_runs_from_one_thread():
    thefts: list = []
    renews: list = []

    def body(step):
        deadline = time.monotonic() + LEASE * 3
        while time.monotonic() < deadline:
            thefts.append(runtime.store.claim(step.actor_id, "thief", LEASE))
            time.sleep(0.05)
        return "done"

    async def run(ctx):
        return await ctx.step("long", body)

    runtime = make_runtime(setup(use={"wf": workflow(run=run)}), lease_seconds=LEASE)
    _renews_recorded(runtime.store, renews)
    ids = [runtime.client().wf.create(key).actor_id for key in ("a", "b")]
    runners = [threading.Thread(target=executor.run_actor, args=(runtime, aid)) for aid in ids]
    for t in runners:
        t.start()
    for t in runners:
        t.join()
    assert [runtime.store.get_actor(aid).output for aid in ids] == ["done", "done"]
    assert thefts and all(t is None for t in thefts)
    assert {aid for aid, _ in renews} == set(ids)
    assert {name for _, name in renews} == {"rivet-lease-keeper"}
    assert not [t for t in threading.enumerate() if t.name.startswith("rivet-heartbeat")]


@pytest.mark.parametrize("kind", ["sync", "async"])
def test_a_run_whose_renew_fails_is_evicted_and_its_body_cancelled(kind):
    seen: list[str] = []

    def sync_body(step):
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline:
            if step.cancelled.is_set():
                seen.append("cancelled")
                return "stopped"
            time.sleep(0.01)
        return "ran on"

    async def async_body(step):
        try:
            await asyncio.sleep(5)
        except asyncio.CancelledError:
            seen.append("cancelled")
            raise
        return "ran on"

    async def run(ctx):
        return await ctx.step("long", sync_body if kind == "sync" else async_body)

    runtime = make_runtime(setup(use={"wf": workflow(run=run)}), lease_seconds=LEASE)
    runtime.store.renew = lambda actor_id, token, lease_seconds: False  # the lease was taken over
    aid = runtime.client().wf.create("k").actor_id
    started = time.monotonic()
    summary = executor.run_actor(runtime, aid)
    assert time.monotonic() - started < 3
    assert seen == ["cancelled"]
    assert summary.workflow_state is None  # evicted: nothing committed
    assert runtime.store.get_actor(aid).output is None


def _fake_session(renew, lease=0.03):
    return SimpleNamespace(
        store=SimpleNamespace(renew=renew, close_thread_connection=lambda: None),
        actor_id="a",
        token=1,
        settings=SimpleNamespace(lease_seconds=lease),
        evict=lambda: None,
        bodies=SimpleNamespace(cancel_all=lambda: None),
    )


def test_no_renew_lands_after_stop_returns_even_with_one_in_flight():
    events: list[str] = []
    in_flight = threading.Event()

    def slow_renew(actor_id, token, lease_seconds):
        events.append("renew starts")
        in_flight.set()
        time.sleep(0.2)
        events.append("renew ends")
        return True

    loop = asyncio.new_event_loop()
    try:
        beat = heartbeat.Heartbeat(_fake_session(slow_renew), loop, loop.create_future())
        beat.start()
        assert in_flight.wait(5)
        beat.stop()
        events.append("stopped")
        time.sleep(0.2)  # many intervals of 10 ms
    finally:
        loop.close()
    assert events == ["renew starts", "renew ends", "stopped"]


def test_renews_run_every_third_of_the_lease_and_stop_ends_them():
    renews: list[float] = []
    loop = asyncio.new_event_loop()
    try:
        beat = heartbeat.Heartbeat(
            _fake_session(lambda *a: renews.append(time.monotonic()) or True), loop, None
        )
        beat.start()
        time.sleep(0.25)
        beat.stop()
        count = len(renews)
        time.sleep(0.1)
    finally:
        loop.close()
    assert 4 <= count <= 25  # about every 10 ms
    assert len(renews) == count


@pytest.mark.skipif(not hasattr(os, "fork"), reason="POSIX")
def test_a_forked_child_starts_a_keeper_of_its_own():
    loop = asyncio.new_event_loop()
    parent_beat = heartbeat.Heartbeat(_fake_session(lambda *a: True), loop, None)
    parent_beat.start()  # the parent's keeper runs
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: only this thread came along
        ok = 0
        try:
            renewed = threading.Event()
            beat = heartbeat.Heartbeat(_fake_session(lambda *a: renewed.set() or True), loop, None)
            beat.start()
            ok = int(renewed.wait(2))
            beat.stop()
        finally:
            os.write(write, bytes([ok]))
            os._exit(0)
    os.close(write)
    try:
        assert os.read(read, 1) == b"\x01"
    finally:
        os.close(read)
        os.waitpid(pid, 0)
        parent_beat.stop()
        loop.close()


def test_the_keeper_closes_its_connection_before_the_last_stop_returns_and_only_if_it_renewed():
    closed: list[str] = []
    renewed = threading.Event()
    session = _fake_session(lambda *a: renewed.set() or True)
    session.store.close_thread_connection = lambda: closed.append(threading.current_thread().name)
    idle = _fake_session(lambda *a: True, lease=30)  # never due: renews nothing
    idle.store.close_thread_connection = lambda: closed.append("never")
    loop = asyncio.new_event_loop()
    try:
        beats = [heartbeat.Heartbeat(s, loop, None) for s in (session, idle)]
        for beat in beats:
            beat.start()
        assert renewed.wait(2)
        beats[0].stop()
        time.sleep(0.05)
        assert closed == []  # a run is still registered: the connection stays open
        beats[1].stop()
        assert closed == ["rivet-lease-keeper"]
    finally:
        loop.close()
