"""Spec "Setup and teardown around a loop": open a resource on wake, close it on sleep, initialise once
in a step, then tick every second.

``RESOURCE_EVENTS`` counts opens and closes in this process (the spec's open/close are local stubs).
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from rivet_workflows import workflow

#: opens and closes of the resource in this process (``{"open": n, "close": n}``)
RESOURCE_EVENTS: Counter[str] = Counter()


def open_resource() -> str:
    """Open the resource; returns its handle."""
    RESOURCE_EVENTS["open"] += 1
    return "connected"


def close_resource(_resource: str) -> None:
    """Close the resource."""
    RESOURCE_EVENTS["close"] += 1


def on_wake(c: Any) -> None:
    """Open the resource each time the actor wakes (vars are rebuilt on every wake)."""
    c.vars["resource"] = open_resource()


def on_sleep(c: Any) -> None:
    """Close the resource when the actor goes to sleep."""
    if not c.vars.get("resource"):
        return
    close_resource(c.vars["resource"])
    c.vars["resource"] = None


async def run(ctx: Any) -> None:
    """Workflow: set up once, then tick every second forever."""

    async def setup_step(step: Any) -> None:
        if not step.vars.get("resource"):
            step.vars["resource"] = open_resource()
        step.state["initialized"] = True

    await ctx.step("setup", setup_step)

    async def tick(loop_ctx: Any) -> None:
        await loop_ctx.sleep("tick", 1.0)

        async def tick_step(step: Any) -> None:
            step.state["ticks"] += 1

        await loop_ctx.step("tick-step", tick_step)

    await ctx.loop("main-loop", tick)


setup_run_teardown_actor = workflow(
    vars={"resource": None},
    state={"initialized": False, "ticks": 0},
    on_wake=on_wake,
    on_sleep=on_sleep,
    run=run,
    actions={"get_state": lambda c: c.state},
)
