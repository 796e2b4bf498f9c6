"""Durable streams across a real worker crash (DESIGN.md section 17): a Celery worker SIGKILLed in the middle
of a step that streams items; a reader that lost the stream resumes from its last offset and sees every
item of the final attempt exactly once, in order; the killed attempt's items are marked discarded and the
recorded writes of workflow code are not written again by the replay. SQLite by default, PostgreSQL (whose
readers wait on LISTEN/NOTIFY) with DATABASE_URL."""

from __future__ import annotations

import threading
import time

import pytest

from rivet_workflows.engine.model import ports

from .workflows import STREAM_TOKENS

pytestmark = pytest.mark.system


def test_a_reader_resumes_after_a_worker_crash_and_sees_the_final_attempt_once(cluster, rt) -> None:
    cluster.arm("stream-mid")
    handle = rt.client().streamer.create("s1")
    cluster.start_worker()
    seen: list[ports.StreamItem] = []

    # the first reader follows the stream live until nothing new comes for 3 s (the worker is dead)
    def first_reader() -> None:
        seen.extend(handle.read_stream("tokens", timeout=3.0))
        rt.store.close_thread_connection()

    def started() -> bool:
        return bool(rt.store.stream_read(handle.actor_id, "tokens", 0, 1).items)

    cluster.wait_for(started, 60, what="the first item")  # the worker is up (its start takes a while)
    reader = threading.Thread(target=first_reader)
    reader.start()
    cluster.wait_for(lambda: cluster.fired("stream-mid"), 60, what="the kill point")
    reader.join(60)
    assert not reader.is_alive()
    assert [i.value for i in seen] == ["begin"] + [f"t{n}" for n in range(10)]  # read live, up to the kill
    assert all(i.attempt in (None, 1) for i in seen)
    last = seen[-1].offset

    # a new worker takes the run over; the reader resumes after its last offset and reads to the close
    cluster.start_worker()
    started = time.monotonic()
    resumed = list(handle.read_stream("tokens", offset=last + 1, timeout=60))
    assert time.monotonic() - started < 60
    assert handle.workflow_state() == "completed"
    assert [i.offset for i in resumed] == sorted({i.offset for i in resumed})  # in order, none twice
    final = [i.value for i in seen + resumed if i.attempt == 2]
    assert final == [f"t{n}" for n in range(STREAM_TOKENS)]  # every item of the final attempt, once
    assert [i.value for i in seen + resumed if i.attempt is None] == [
        "begin",
        "end",
    ]  # replay wrote none again

    every = list(handle.read_stream("tokens", include_discarded=True))
    assert [i.offset for i in every] == list(range(len(every)))  # dense offsets
    killed = [i for i in every if i.attempt == 1]
    assert [i.value for i in killed] == [f"t{n}" for n in range(10)] and all(i.discarded for i in killed)
    assert not any(i.discarded for i in every if i.attempt != 1)
    assert cluster.count("token", handle.actor_id) == 10 + STREAM_TOKENS
