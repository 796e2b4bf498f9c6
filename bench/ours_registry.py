"""The actors the benchmarks run on our engine, written against the public API (DESIGN.md section 2).

Steps report timings out of band (a UDP datagram to the harness, or a list in this process when the
harness drains in-process) so that measuring adds no database work.
"""

from __future__ import annotations

import json
import os
import socket
import time
from datetime import UTC, datetime
from typing import Any

try:
    from rivet_workflows import Loop, queue, setup, workflow
except ImportError:  # until rivet_workflows/__init__.py re-exports the engine's public names
    from rivet_workflows.engine.model.definitions import Loop, queue, setup, workflow

STEPS = int(os.environ.get("BENCH_STEPS", "10"))
ITERATIONS = int(os.environ.get("BENCH_ITERATIONS", "10000"))
PRUNE_INTERVAL = 20
TIMER_SECONDS = float(os.environ.get("BENCH_TIMER_SECONDS", "1.0"))
REPORT_PORT = int(os.environ.get("BENCH_REPORT_PORT", "0"))
# P3 (in-process drain): (perf_counter, process CPU time, SQL statements so far, seconds spent in SQL
# so far) at each iteration.
ITER_TIMES: list[tuple[float, float, float, float]] = []
SQL_COUNT = [0, 0.0]  # statements and their seconds, kept by the harness's execute_wrapper

_sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)


def report(payload: dict[str, Any], port: int | None = None) -> None:
    """Send ``payload`` as one JSON datagram to the harness listening on 127.0.0.1:``port``."""
    _sock.sendto(json.dumps(payload).encode(), ("127.0.0.1", port or REPORT_PORT))


async def _trivial(step: Any) -> int:
    return 1


# P1 / P6: a workflow of STEPS trivial steps.
async def sequential_run(ctx: Any) -> None:
    for i in range(STEPS):
        await ctx.step(f"s{i}", _trivial)
    if REPORT_PORT:
        await ctx.step("done", lambda step: report({"done": ctx.actor_id, "at": time.time()}))


# P7: STEPS trivial steps; the last one reports (no extra step), so a workflow is exactly STEPS steps.
async def parallel_run(ctx: Any) -> None:
    for i in range(STEPS - 1):
        await ctx.step(f"s{i}", _trivial)
    await ctx.step(f"s{STEPS - 1}", lambda step: report({"done": ctx.actor_id, "at": time.time()}))


# P1's marginal cost: the same workflow with twice the steps (the difference is STEPS more steps).
async def sequential_long_run(ctx: Any) -> None:
    for i in range(2 * STEPS):
        await ctx.step(f"s{i}", _trivial)


# P2: wait on a queue forever; the step after each receive reports how long the wake took.
async def waiter_run(ctx: Any) -> None:
    async def body(lctx: Any) -> None:
        msg = await lctx.queue.next("wait", names=["wake"])
        sent = msg.body

        def note(step: Any) -> float:
            latency = time.time() - sent["sent_at"]
            report({"seq": sent["seq"], "latency": latency}, sent["port"])
            return latency

        await lctx.step("note", note)

    await ctx.loop("messages", body)


# P3: a long loop; each iteration one step; history is pruned every PRUNE_INTERVAL iterations.
async def looper_run(ctx: Any) -> int:
    async def tick(step: Any) -> float:
        now = time.perf_counter()
        ITER_TIMES.append((now, time.process_time(), SQL_COUNT[0], SQL_COUNT[1]))
        return now

    async def body(lctx: Any, n: int) -> Any:
        await lctx.step("tick", tick)
        n += 1
        # BENCH_DEADLINE caps the run time of a slow build (not deterministic; fine for a benchmark).
        over = time.time() > float(os.environ.get("BENCH_DEADLINE", "inf"))
        return Loop.break_(n) if n >= ITERATIONS or over else Loop.continue_(n)

    return await ctx.loop(name="iterations", state=0, run=body, history_prune_interval=PRUNE_INTERVAL)


# P4: sleep for an hour (an idle actor the sweep must not touch).
async def sleeper_run(ctx: Any) -> None:
    await ctx.sleep("nap", 3600.0)


# P5: sleep until a recorded instant TIMER_SECONDS ahead; the next step reports how late it started.
async def timer_run(ctx: Any) -> None:
    due = await ctx.step("due", lambda step: time.time() + TIMER_SECONDS)
    await ctx.sleep_until("nap", datetime.fromtimestamp(due, UTC))
    await ctx.step("woke", lambda step: report({"actor": ctx.actor_id, "late": time.time() - due}))


# P9: one step writes ``items`` stream items (each value: the wall clock at its write), ``gap`` seconds apart;
# the step's output is the seconds the writes took. The workflow's end closes the stream.
async def streamer_run(ctx: Any) -> float:
    spec = ctx.input or {}

    def write_items(step: Any) -> float:
        stream = step.stream("out")
        gap = float(spec.get("gap", 0.0))
        t0 = time.perf_counter()
        for _ in range(int(spec.get("items", 0))):
            if gap:
                time.sleep(gap)
            stream.write(time.time())
        return time.perf_counter() - t0

    return await ctx.step("write", write_items, timeout=600)


registry = setup(
    use={
        "bench_streamer": workflow(run=streamer_run),
        "bench_sequential": workflow(run=sequential_run),
        "bench_parallel": workflow(run=parallel_run),
        "bench_sequential_long": workflow(run=sequential_long_run),
        "bench_waiter": workflow(run=waiter_run, queues={"wake": queue()}),
        "bench_looper": workflow(run=looper_run),
        "bench_sleeper": workflow(run=sleeper_run),
        "bench_timer": workflow(run=timer_run),
    }
)
