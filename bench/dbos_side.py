"""The DBOS Transact side of the benchmarks (run as ``python -m bench.dbos_side P1 '{...}'``).

Each benchmark uses DBOS the way its documentation shows: ``@DBOS.workflow()`` functions calling
``@DBOS.step()`` functions, ``DBOS.send``/``DBOS.recv`` for messages and ``DBOS.sleep`` for timers,
against the system database given in ``BENCH_DBOS_URL`` (the parent creates and drops it).
"""

from __future__ import annotations

import json
import logging
import os
import queue
import subprocess
import sys
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


@DBOS.step()
def stream_writes(items: int, gap: float) -> float:
    t0 = time.perf_counter()
    for _ in range(items):
        if gap:
            time.sleep(gap)
        DBOS.write_stream("out", time.time())
    return time.perf_counter() - t0


@DBOS.workflow()
def streamer(items: int, gap: float, wait: bool) -> float:
    if wait:  # the reader of another process is listening: go
        DBOS.recv("go", timeout_seconds=60)
    seconds = stream_writes(items, gap)
    DBOS.close_stream("out")
    return seconds


def _launch(executor_id: str | None = None) -> None:
    logging.getLogger("dbos").setLevel(logging.WARNING)
    config: DBOSConfig = {
        "name": "rivet-bench",
        "system_database_url": pg.url(DBNAME, driver="postgresql"),
        "log_level": "WARNING",
        "run_admin_server": False,
    }
    if executor_id:
        config["executor_id"] = executor_id
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
    t0, cpu0 = time.perf_counter(), time.process_time()
    for _ in range(workflows):
        ten_steps(steps)
    elapsed, cpu = time.perf_counter() - t0, time.process_time() - cpu0
    commits = meter.stop()
    DBOS.destroy()
    return {
        "workflows": workflows,
        "steps_per_workflow": steps,
        "seconds": elapsed,
        "workflows_per_s": workflows / elapsed,
        "steps_per_s": workflows * steps / elapsed,
        "cpu_ms_per_step": 1000 * cpu / (workflows * steps),
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


def p7_worker(workflows: int, concurrency: int, steps: int = 10, index: int = 0) -> dict[str, Any]:
    """One DBOS process of P7: ``concurrency`` threads run ``workflows`` ten-step workflows between them.

    Prints ``READY`` once launched and starts when a line arrives on stdin, so every process starts
    together; returns the wall-clock instants of its start and its last finished workflow.
    """
    _launch(executor_id=f"p7-{index}")
    counter = iter(range(workflows))
    lock = threading.Lock()

    def runner() -> int:
        done = 0
        while True:
            with lock:
                n = next(counter, None)
            if n is None:
                return done
            ten_steps(steps)
            done += 1

    print("READY", flush=True)
    sys.stdin.readline()
    started = time.time()
    threads: list[int] = []
    pool = [threading.Thread(target=lambda: threads.append(runner())) for _ in range(concurrency)]
    for t in pool:
        t.start()
    for t in pool:
        t.join()
    ended = time.time()
    DBOS.destroy()
    return {"started": started, "ended": ended, "finished": sum(threads)}


def p7_throughput(
    workflows: int = 2000, processes: int = 2, concurrency: int = 8, steps: int = 10, **_: Any
) -> dict[str, Any]:
    """``workflows`` ten-step workflows at once on ``processes`` DBOS processes of ``concurrency`` threads
    each (DBOS at its best: no queue polling; each thread calls the workflow function in turn).

    Steps/s from the common start to the last process's last workflow.
    """
    children = []
    share = [workflows // processes + (1 if i < workflows % processes else 0) for i in range(processes)]
    for i in range(processes):
        params = {"workflows": share[i], "concurrency": concurrency, "steps": steps, "index": i}
        children.append(
            subprocess.Popen(
                [sys.executable, "-m", "bench.dbos_side", "P7W", json.dumps(params)],
                cwd=proc.ROOT,
                env={**os.environ, "PYTHONPATH": str(proc.ROOT)},
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                text=True,
            )
        )
    for child in children:
        line = child.stdout.readline()
        if line.strip() != "READY":
            raise RuntimeError(f"DBOS P7 process did not start: {line!r}")
    meter = pg.CommitMeter(DBNAME)
    meter.start()
    for child in children:
        child.stdin.write("go\n")
        child.stdin.flush()
    results = []
    for child in children:
        out, _ = child.communicate(timeout=600)
        marked = [ln for ln in out.splitlines() if ln.startswith(proc.MARK)]
        if child.returncode != 0 or not marked:
            raise RuntimeError(f"DBOS P7 process exited {child.returncode}")
        results.append(json.loads(marked[-1][len(proc.MARK) :]))
    commits = meter.stop()
    seconds = max(r["ended"] for r in results) - min(r["started"] for r in results)
    finished = sum(r["finished"] for r in results)
    return {
        "workflows": workflows,
        "processes": processes,
        "concurrency": concurrency,
        "steps_per_workflow": steps,
        "finished": finished,
        "seconds": seconds,
        "steps_per_s": finished * steps / seconds,
        "commits_per_step": commits / max(1, finished * steps),
        "commits_per_wal_flush": commits / meter.wal_syncs if meter.wal_syncs else None,
    }


def p9_streams(items: int = 2000, latency_items: int = 200, gap: float = 0.005) -> dict[str, Any]:
    """Streams: items/s written by one ``@DBOS.step`` (``DBOS.write_stream``), and the latency from a write
    to ``DBOS.read_stream`` in another DBOS process (``latency_items`` writes ``gap`` seconds apart)."""
    _launch()
    streamer(20, 0.0, False)
    rounds = [streamer(items, 0.0, False) for _ in range(3)]  # best of 3, as ours
    seconds = min(rounds)
    wf_id = f"p9-{uuid.uuid4().hex}"
    with SetWorkflowID(wf_id):
        handle = DBOS.start_workflow(streamer, latency_items, gap, True)
    reader = subprocess.Popen(
        [sys.executable, "-m", "bench.dbos_side", "P9R", json.dumps({"workflow_id": wf_id})],
        cwd=proc.ROOT,
        env={**os.environ, "PYTHONPATH": str(proc.ROOT)},
        stdout=subprocess.PIPE,
        text=True,
    )
    line = reader.stdout.readline()
    if line.strip() != "READY":
        raise RuntimeError(f"the DBOS P9 reader did not start: {line!r}")
    time.sleep(0.5)
    DBOS.send(wf_id, "go", "go")
    handle.get_result()
    out, _ = reader.communicate(timeout=120)
    marked = [ln for ln in out.splitlines() if ln.startswith(proc.MARK)]
    if reader.returncode != 0 or not marked:
        raise RuntimeError(f"the DBOS P9 reader exited {reader.returncode}")
    DBOS.destroy()
    return {
        "items": items,
        "write_seconds": seconds,
        "items_per_s": items / seconds,
        "items_per_s_rounds": [items / r for r in rounds],
        "latency_items": latency_items,
        "gap": gap,
        **json.loads(marked[-1][len(proc.MARK) :]),
    }


def p9_reader(workflow_id: str) -> dict[str, Any]:
    """P9's reader process: ``DBOS.read_stream`` until the stream closes; latency of each value."""
    _launch(executor_id="p9-reader")
    samples = []
    print("READY", flush=True)
    for value in DBOS.read_stream(workflow_id, "out", timeout_seconds=120):
        samples.append(time.time() - value)
    DBOS.destroy()
    return stats.latency_summary(samples)


BENCHES = {
    "P9": p9_streams,
    "P9R": p9_reader,
    "P1": p1_sequential,
    "P2": p2_wake_latency,
    "P2G": p2_wake_latency,
    "P5": p5_timers,
    "P7": p7_throughput,
    "P7W": p7_worker,
}

if __name__ == "__main__":
    threading.current_thread().name = "bench-dbos"
    proc.child_main(BENCHES)
