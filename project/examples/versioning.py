"""Spec "Versioned workflow evolution" (``removed``) and "Version gates with getVersion".

``run_v1`` / ``run_version_gate_v1`` are the code *before* the deploy (kept so tests and the demo can
start an instance under the old code and resume it under the new one); the actors use the new code.
"""

from __future__ import annotations

from typing import Any

from rivet_workflows import workflow


async def _count_run(step: Any) -> None:
    step.state["runs"] += 1


async def run_v1(ctx: Any) -> None:
    """The workflow before the deploy: step ``validate-v1``, then loop ``main-loop-v2``."""
    await ctx.step("validate-v1", _count_run)
    await _main_loop(ctx)


async def _main_loop(ctx: Any) -> None:
    async def iteration(loop_ctx: Any) -> None:
        await loop_ctx.sleep("idle", 0.5)
        await loop_ctx.step("heartbeat-v2", _count_run)

    await ctx.loop("main-loop-v2", iteration)


async def run(ctx: Any) -> None:
    """The workflow after the deploy: ``validate-v2`` replaces ``validate-v1`` (retired with ``removed``)."""
    await ctx.step("validate-v2", _count_run)
    await ctx.removed("validate-v1", "step")
    await _main_loop(ctx)


async def run_migrated(ctx: Any) -> None:
    """The same deploy written for instances in flight across it.

    The spec's ``run`` creates ``validate-v2`` ahead of the recorded ``validate-v1`` and ``main-loop-v2``;
    our engine checks the scope before creating an entry (ENGINE-SEMANTICS.md section 2), so an old
    instance stops there with a divergence. Gating the new step keeps both kinds of instance working: a
    fresh one resolves the gate to 2 and runs ``validate-v2``; an old one resolves it to 1, skips the new
    step, retires ``validate-v1`` and resumes its loop.
    """
    if await ctx.get_version("validate", 2) >= 2:
        await ctx.step("validate-v2", _count_run)
    await ctx.removed("validate-v1", "step")
    await _main_loop(ctx)


versioned_workflow_actor = workflow(
    state={"runs": 0},
    run=run,
    actions={"get_state": lambda c: c.state},
)

#: the same actor as deployed before the change (register it under the same name to start old instances)
versioned_workflow_actor_v1 = workflow(
    state={"runs": 0},
    run=run_v1,
    actions={"get_state": lambda c: c.state},
)


#: the deploy for a fleet with instances in flight (``run_migrated``), under the same actor name
versioned_workflow_actor_migrated = workflow(
    state={"runs": 0},
    run=run_migrated,
    actions={"get_state": lambda c: c.state},
)


# --- version gate ----------------------------------------------------------------------------------


def _process(step: Any, version: int) -> None:
    step.state["processed"] += 1
    step.state.setdefault("versions", []).append(version)


async def run_version_gate_v1(ctx: Any) -> None:
    """The loop before the deploy: no gate, step ``process-v1``."""

    async def iteration(loop_ctx: Any) -> None:
        await loop_ctx.step("process-v1", lambda step: _process(step, 1))
        await loop_ctx.sleep("idle", 1.0)

    await ctx.loop("process-loop", iteration)


async def run_version_gate(ctx: Any) -> None:
    """The loop after the deploy: iterations in flight under v1 stay on v1, new ones take v2."""

    async def iteration(loop_ctx: Any) -> None:
        version = await loop_ctx.get_version("process-message", 2)
        if version == 1:
            # Preserve the original behaviour for iterations in flight across the deploy.
            await loop_ctx.step("process-v1", lambda step: _process(step, 1))
        else:
            await loop_ctx.step("process-v2", lambda step: _process(step, 2))
        await loop_ctx.sleep("idle", 1.0)

    await ctx.loop("process-loop", iteration)


version_gate_actor = workflow(
    state={"processed": 0, "versions": []},
    run=run_version_gate,
    actions={"get_state": lambda c: c.state},
)

#: the version-gate actor as deployed before the gate existed
version_gate_actor_v1 = workflow(
    state={"processed": 0, "versions": []},
    run=run_version_gate_v1,
    actions={"get_state": lambda c: c.state},
)
