"""``bridge.run_sync`` reuses one event loop per thread, yet each call keeps ``asyncio.run``'s semantics: two
runs in a row on one thread share nothing but the loop object."""

from __future__ import annotations

import asyncio
import contextvars
import gc
import os
import threading
import time

import pytest

from rivet_workflows.engine.actor import bridge

var: contextvars.ContextVar[str] = contextvars.ContextVar("var", default="unset")


async def _loop() -> asyncio.AbstractEventLoop:
    return asyncio.get_running_loop()


def test_runs_on_one_thread_reuse_its_loop_and_the_loop_is_not_the_threads_current_one():
    first = bridge.run_sync(_loop)
    assert bridge.run_sync(_loop) is first
    assert not first.is_closed() and not first.is_running()
    assert bridge._loops.loop is None


def test_a_task_left_pending_by_a_run_is_cancelled_at_its_end_not_run_during_the_next():
    seen: list[str] = []

    async def leaves_a_task():
        async def pending():
            try:
                await asyncio.sleep(0.2)
                seen.append("ran on")
            except asyncio.CancelledError:
                seen.append("cancelled")
                raise

        asyncio.get_running_loop().create_task(pending())
        await asyncio.sleep(0)  # the task starts and waits

    bridge.run_sync(leaves_a_task)
    assert seen == ["cancelled"]

    async def later():
        await asyncio.sleep(0.3)
        return asyncio.all_tasks()

    assert len(bridge.run_sync(later)) == 1  # only its own task
    assert seen == ["cancelled"]


def test_an_error_of_a_pending_task_on_cancel_goes_to_the_loops_exception_handler():
    reported: list[dict] = []

    async def leaves_a_failing_task():
        async def pending():
            try:
                await asyncio.sleep(10)
            finally:
                raise ValueError("in cleanup")  # noqa: B012

        loop = asyncio.get_running_loop()
        loop.set_exception_handler(lambda _loop, context: reported.append(context))
        loop.create_task(pending())
        await asyncio.sleep(0)

    bridge.run_sync(leaves_a_failing_task)
    assert [str(c["exception"]) for c in reported] == ["in cleanup"]
    assert bridge.run_sync(_loop).get_exception_handler() is None  # the handler went with its run


def test_an_unfinished_async_generator_is_closed_at_the_end_of_its_run():
    events: list[str] = []
    kept: list = []

    async def gen():
        try:
            yield 1
            yield 2
        finally:
            events.append("finally")

    async def stops_halfway():
        agen = gen()
        kept.append(agen)  # still referenced: only the end of the run can close it
        assert await agen.__anext__() == 1

    bridge.run_sync(stops_halfway)
    assert events == ["finally"]


def test_a_timer_left_by_a_run_never_fires_in_the_next():
    fired: list[int] = []

    async def schedules():
        asyncio.get_running_loop().call_later(0.05, fired.append, 1)

    bridge.run_sync(schedules)
    bridge.run_sync(asyncio.sleep, 0.15)
    assert fired == []


def test_the_executor_threads_of_a_sync_body_are_gone_after_the_run():
    threads: list[threading.Thread] = []

    def body():
        threads.append(threading.current_thread())
        return 7

    async def runs_sync_bodies():
        loop = asyncio.get_running_loop()
        return await asyncio.gather(*(loop.run_in_executor(None, body) for _ in range(3)))

    assert bridge.run_sync(runs_sync_bodies) == [7, 7, 7]
    assert threads and not any(t.is_alive() for t in threads)
    assert bridge.run_sync(runs_sync_bodies) == [7, 7, 7]  # the next run gets an executor of its own


def test_each_run_has_its_own_copy_of_the_callers_context():
    async def read_and_set():
        value = var.get()
        var.set("set by the run")
        return value

    token = var.set("caller")
    try:
        assert bridge.run_sync(read_and_set) == "caller"
        assert var.get() == "caller"
        assert bridge.run_sync(read_and_set) == "caller"  # not what the first run set
    finally:
        var.reset(token)


def test_the_result_and_the_exception_come_back():
    async def fails():
        raise KeyError("x")

    with pytest.raises(KeyError):
        bridge.run_sync(fails)

    async def add(a, b=0):
        return a + b

    assert bridge.run_sync(add, 1, b=2) == 3


def test_a_nested_call_from_a_coroutine_raises_and_from_an_inline_call_runs_on_a_loop_of_its_own():
    async def nested():
        with pytest.raises(RuntimeError):
            bridge.run_sync(_loop)
        assert bridge.in_run_loop()
        outer = asyncio.get_running_loop()
        inner = bridge.call_inline(bridge.run_sync, _loop)
        assert inner is not outer and inner.is_closed()
        assert bridge.in_run_loop()
        return outer

    assert bridge.run_sync(nested) is bridge.run_sync(_loop)


def test_a_thread_loop_is_closed_when_the_thread_ends_and_threads_do_not_share_loops():
    loops: list = []
    thread = threading.Thread(target=lambda: loops.append(bridge.run_sync(_loop)))
    thread.start()
    thread.join()
    gc.collect()
    assert loops[0].is_closed()
    assert bridge.run_sync(_loop) is not loops[0]


@pytest.mark.skipif(not hasattr(os, "fork"), reason="POSIX")
def test_a_forked_child_makes_a_loop_of_its_own_and_leaves_the_parents_working():
    parent = bridge.run_sync(_loop)
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child
        ok = 0
        try:
            child = bridge.run_sync(_loop)
            ok = int(child is not parent and not parent.is_closed())
        finally:
            os.write(write, bytes([ok]))
            os._exit(0)
    os.close(write)
    assert os.read(read, 1) == b"\x01"
    os.close(read)
    os.waitpid(pid, 0)

    async def woken_from_another_thread():
        # The parent's self-pipe still wakes its loop at once (a child closing the loop would have
        # unregistered it from the epoll instance they share: the loop would sleep to its next timer).
        loop = asyncio.get_running_loop()
        future = loop.create_future()
        threading.Timer(0.05, loop.call_soon_threadsafe, (future.set_result, "woken")).start()
        started = time.monotonic()
        await asyncio.wait_for(future, 3)
        return time.monotonic() - started

    assert bridge.run_sync(woken_from_another_thread) < 1.0
    assert bridge.run_sync(_loop) is parent


def test_a_keyboard_interrupt_in_a_task_ends_the_run_and_the_next_run_starts_clean():
    events: list[str] = []

    async def interrupted():
        async def inner():
            raise KeyboardInterrupt

        async def waiter(task):
            try:
                await task
            except BaseException as exc:
                events.append(type(exc).__name__)
                raise

        task = asyncio.ensure_future(inner())
        await waiter(task)  # its wake-up is still scheduled when the interrupt leaves the loop

    with pytest.raises(KeyboardInterrupt):
        bridge.run_sync(interrupted)
    assert events == ["CancelledError"]  # cancelled at the end of the run, as asyncio.run does
    assert bridge.run_sync(_loop) is not None
