"""Not in the spec: the actor the demo crashes. Three steps; the middle one is slow, so a worker can be
killed while it runs. Every step body counts its runs in the fake service (``POST /counters/<name>``),
which outlives the worker, so the demo can show which steps ran again after the crash.

Counter names: ``crash-demo:<key>:prepare``, ``...:slow-work:start``, ``...:slow-work:done``,
``...:finish``. Input: ``{"slow_seconds": float}`` (default 3.0).
"""

from __future__ import annotations

import time
from typing import Any

from rivet_workflows import workflow

from . import fake_service


def counter_name(key: str, name: str) -> str:
    """The fake-service counter a step of the actor with ``key`` bumps."""
    return f"crash-demo:{key}:{name}"


def bump(key: str, name: str) -> int:
    """Count one run of ``name`` in the fake service; returns the count so far."""
    return fake_service.post(f"/counters/{counter_name(key, name)}")["count"]


async def run(ctx: Any) -> dict:
    """Workflow: prepare, slow work (killed mid-way by the demo), finish; returns the step run counts."""
    key = ctx.key[0]
    slow_seconds = float((ctx.input or {}).get("slow_seconds", 3.0))

    def prepare(step: Any) -> int:
        step.state["prepare_runs"] += 1
        return bump(key, "prepare")

    def slow_work(step: Any) -> int:
        bump(key, "slow-work:start")
        time.sleep(slow_seconds)
        step.state["slow_work_runs"] += 1
        return bump(key, "slow-work:done")

    def finish(step: Any) -> int:
        step.state["finish_runs"] += 1
        return bump(key, "finish")

    prepared = await ctx.step("prepare", prepare)
    worked = await ctx.step(name="slow-work", run=slow_work, timeout=slow_seconds + 30)
    finished = await ctx.step("finish", finish)
    return {"prepare": prepared, "slow_work": worked, "finish": finished}


crash_demo_actor = workflow(
    state={"prepare_runs": 0, "slow_work_runs": 0, "finish_runs": 0},
    run=run,
    actions={"get_state": lambda c: c.state},
)
