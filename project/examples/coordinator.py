"""Spec "Coordinator to worker RPC": send ``{"task_id", "worker_id", "value"}``; the coordinator calls
``run_task`` on the worker actor keyed ``worker_id`` and records the result."""

from __future__ import annotations

from typing import Any

from rivet_workflows import WorkflowStepContextOf, actor, workflow


def run_task(_c: Any, value: float) -> float:
    """Worker action: twice the value."""
    return value * 2


worker_actor = actor(actions={"run_task": run_task})


def dispatch_task(step: WorkflowStepContextOf[Any], task: dict) -> float:
    """Call the worker actor of the task (sync: the client runs in a worker thread)."""
    worker = step.client().worker_actor.get_or_create([task["worker_id"]])
    return worker.run_task(task["value"])


async def orchestrator_iteration(loop_ctx: Any) -> None:
    """One iteration of ``orchestrator-loop``."""
    messages = await loop_ctx.queue.next_batch("wait-task", timeout=30)
    if not messages:
        return
    task = messages[0].body
    result = await loop_ctx.step("dispatch-rpc", lambda step: dispatch_task(step, task))

    async def record(step: Any) -> None:
        step.state["last_task_id"] = task["task_id"]
        step.state["last_result"] = result

    await loop_ctx.step("record-result", record)


async def run(ctx: Any) -> None:
    """Workflow: the coordinator loop, forever."""
    await ctx.loop("orchestrator-loop", orchestrator_iteration)


coordinator_actor = workflow(
    state={"last_task_id": None, "last_result": 0},
    run=run,
    actions={"get_state": lambda c: c.state},
)
