"""The actor of the query tests: a workflow whose second step holds until the test releases it (at most 3 s)."""

from __future__ import annotations

import threading

from rivet_workflows.engine.model.definitions import setup, workflow

STARTED = threading.Event()
RELEASE = threading.Event()
FINISHED = threading.Event()


def _prepare(step):
    step.state["status"] = "prepared"


def _slow(step):
    step.state["status"] = "charging"  # not committed before the step ends
    STARTED.set()
    RELEASE.wait(3.0)
    step.state["status"] = "charged"
    FINISHED.set()


async def run(ctx):
    await ctx.step("prepare", _prepare)
    await ctx.step("slow", _slow, timeout=10)


def _write(c):
    c.state["status"] = "hacked"


querier = workflow(
    run=run,
    state={"status": "new", "items": [1, 2]},
    vars={"hits": 0},
    queries={
        "status": lambda c: c.state["status"],
        "echo": lambda c, x, y=None: {"status": c.state["status"], "x": x, "y": y, "vars": c.vars},
        "write": _write,
        "append": lambda c: c.state["items"].append(3),
        "assign": lambda c: setattr(c, "state", {}),
        "send": lambda c: c.queue.send("q", 1),
        "boom": lambda c: 1 / 0,
    },
    actions={"get": lambda c: c.state},
)

registry = setup(use={"querier": querier})


def reset() -> None:
    for event in (STARTED, RELEASE, FINISHED):
        event.clear()
