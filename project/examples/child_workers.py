"""Spec "Child workers": an orchestrator starts three child actors, then for each batch
(``{"payload": number}``) runs all three in parallel and reconciles the total."""

from __future__ import annotations

from typing import Any

from rivet_workflows import WorkflowStepContextOf, actor, workflow

CHILDREN = ("child-a", "child-b", "child-c")


def process(_c: Any, payload: float) -> float:
    """Child action: three times the payload."""
    return payload * 3


child_worker_actor = actor(actions={"process": process})


def start_children(step: WorkflowStepContextOf[Any]) -> None:
    """Create every child (an action call creates the actor)."""
    client = step.client()
    for child in CHILDREN:
        client.child_worker_actor.get_or_create([child]).process(0)


def run_child_worker(step: WorkflowStepContextOf[Any], worker_id: str, payload: float) -> float:
    """Run one child on the payload."""
    return step.client().child_worker_actor.get_or_create([worker_id]).process(payload)


def _branch(worker_id: str, payload: float) -> Any:
    async def branch(join_ctx: Any) -> float:
        return await join_ctx.step(
            f"run-{worker_id}", lambda step: run_child_worker(step, worker_id, payload)
        )

    return branch


async def orchestrate_iteration(loop_ctx: Any) -> None:
    """One iteration of ``orchestrate-loop``."""
    messages = await loop_ctx.queue.next_batch("wait-batch", timeout=30)
    if not messages:
        return
    payload = messages[0].body["payload"]
    results = await loop_ctx.join(
        "collect-updates",
        {
            "a": {"run": _branch("child-a", payload)},
            "b": {"run": _branch("child-b", payload)},
            "c": {"run": _branch("child-c", payload)},
        },
    )

    async def reconcile(step: Any) -> None:
        step.state["last_total"] = results["a"] + results["b"] + results["c"]

    await loop_ctx.step("reconcile", reconcile)


async def run(ctx: Any) -> None:
    """Workflow: start the children, then the orchestrate loop, forever."""
    await ctx.step("start-children", start_children)
    await ctx.loop("orchestrate-loop", orchestrate_iteration)


orchestrator_actor = workflow(
    state={"last_total": 0},
    run=run,
    actions={"get_state": lambda c: c.state},
)
