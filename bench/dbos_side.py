"""The DBOS Transact side of the benchmarks (run as ``python -m bench.dbos_side P1 '{...}'``).

Each benchmark uses DBOS the way its documentation shows: ``@DBOS.workflow()`` functions calling
``@DBOS.step()`` functions, ``DBOS.send``/``DBOS.recv`` for messages and ``DBOS.sleep`` for timers,
against the system database given in ``BENCH_DBOS_URL`` (the parent creates and drops it).
"""

from __future__ import annotations

import logging
import os
import queue
import threading
import time
import uuid
from typing import Any

from dbos import DBOS, DBOSConfig, SetWorkflowID

from bench import pg, proc, stats

DBNAME = os.environ.get("BENCH_DBOS_DB", "rivet_bench_dbos")
_latencies: queue.Queue[float] = queue.Queue()


@DBOS.step()
def trivial_step(i: int) -> int:
    return i


@DBOS.workflow()
def ten_steps(n: int) -> int:
    total = 0
    for i in range(n):
        total += trivial_step(i)
    return total


@DBOS.step()
def note_wake(sent_at: float) -> float:
    # The step starting is the moment the workflow "woke" for the message.
    latency = time.time() - sent_at
    _latencies.put(latency)
    return latency


@DBOS.workflow()
def receiver(count: int) -> int:
    for _ in range(count):
        sent_at = DBOS.recv("wake", timeout_seconds=60)
        note_wake(sent_at)
    return count


@DBOS.step()
def note_timer(due_at: float) -> float:
    lateness = time.time() - due_at
    _latencies.put(lateness)
    return lateness


@DBOS.workflow()
def sleeper(seconds: float) -> float:
    due_at = time.time() + seconds
    DBOS.sleep(seconds)
    return note_timer(due_at)


def _launch() -> None:
    logging.getLogger("dbos").setLevel(logging.WARNING)
    config: DBOSConfig = {
        "name": "rivet-bench",
        "system_database_url": pg.url(DBNAME, driver="postgresql"),
        "log_level": "WARNING",
        "run_admin_server": False,
    }
    DBOS(config=config)
    DBOS.launch()


def p1_sequential(
    workflows: int = 200, steps: int = 10, warmup: int = 10, idle_window: float = 2.0
) -> dict[str, Any]:
    """Run ``workflows`` ten-step workflows one after another; report workflows/s and commits per step."""
    _launch()
    for _ in range(warmup):
        ten_steps(steps)
    meter = pg.CommitMeter(DBNAME)
    meter.measure_idle(idle_window)
    meter.start()
    t0 = time.perf_counter()
    for _ in range(workflows):
        ten_steps(steps)
    elapsed = time.perf_counter() - t0
    commits = meter.stop()
    DBOS.destroy()
    return {
        "workflows": workflows,
        "steps_per_workflow": steps,
        "seconds": elapsed,
        "workflows_per_s": workflows / elapsed,
        "steps_per_s": workflows * steps / elapsed,
        "commits": commits,
        "commits_per_step": commits / (workflows * steps),
        "commits_per_workflow": commits / workflows,
        "idle_commits_per_s": meter.idle_rate,
        "connections_opened": meter.connections,
    }


def p2_wake_latency(messages: int = 200, idle_window: float = 2.0, gap: float = 0.0) -> dict[str, Any]:
    """One waiting workflow; send ``messages`` one at a time, each after the previous was received
    (and ``gap`` seconds more, default 0).

    Latency is from just before ``DBOS.send`` to the start of the step that follows ``DBOS.recv``.
    """
    _launch()
    wf_id = f"p2-{uuid.uuid4().hex}"
    with SetWorkflowID(wf_id):
        handle = DBOS.start_workflow(receiver, messages + 5)
    for _ in range(5):  # warm-up
        DBOS.send(wf_id, time.time(), "wake")
        _latencies.get(timeout=30)
    meter = pg.CommitMeter(DBNAME)
    meter.measure_idle(idle_window)
    meter.start()
    samples = []
    for _ in range(messages):
        if gap:
            time.sleep(gap)
        DBOS.send(wf_id, time.time(), "wake")
        samples.append(_latencies.get(timeout=30))
    commits = meter.stop()
    handle.get_result()
    DBOS.destroy()
    result = stats.latency_summary(samples)
    result.update(
        commits_per_message=commits / messages,
        connections_opened=meter.connections,
        idle_commits_per_s=meter.idle_rate,
    )
    return result


def p5_timers(sleepers: int = 1000, seconds: float = 1.0) -> dict[str, Any]:
    """Start ``sleepers`` workflows that each ``DBOS.sleep(seconds)``; report how late each woke."""
    _launch()
    handles = [DBOS.start_workflow(sleeper, seconds) for _ in range(sleepers)]
    for h in handles:
        h.get_result()
    samples = [_latencies.get(timeout=1) for _ in range(sleepers)]
    DBOS.destroy()
    return stats.latency_summary(samples)


BENCHES = {"P1": p1_sequential, "P2": p2_wake_latency, "P5": p5_timers}

if __name__ == "__main__":
    threading.current_thread().name = "bench-dbos"
    proc.child_main(BENCHES)
