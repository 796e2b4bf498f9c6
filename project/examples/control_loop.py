"""Spec "Signal-driven control loop": pause/resume/stop signals (``{"kind": ...}``) drive the mode."""

from __future__ import annotations

from typing import Any

from rivet_workflows import WorkflowStepContextOf, workflow

MODES = {"pause": "paused", "resume": "running", "stop": "stopped"}


def apply_control_signal(step: WorkflowStepContextOf[Any], kind: str) -> None:
    """Count the signal and switch ``mode`` for ``pause``, ``resume`` and ``stop``."""
    step.state["handled_signals"] += 1
    if kind in MODES:
        step.state["mode"] = MODES[kind]


async def control_iteration(loop_ctx: Any) -> None:
    """One iteration of ``control-loop``: wait up to 30 s for a signal and apply it."""
    messages = await loop_ctx.queue.next_batch("wait-signal", timeout=30)
    if not messages:
        return
    signal = messages[0].body

    async def apply_signal(step: Any) -> None:
        apply_control_signal(step, signal["kind"])

    await loop_ctx.step("apply-signal", apply_signal)


async def run(ctx: Any) -> None:
    """Workflow: the control loop, forever."""
    await ctx.loop("control-loop", control_iteration)


control_loop_actor = workflow(
    state={"mode": "running", "handled_signals": 0},
    run=run,
    actions={"get_state": lambda c: c.state},
)
