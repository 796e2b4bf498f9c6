"""Spec "Checkpoint-friendly loop design": a payment loop that survives crashes and restarts.

Each iteration takes one payment message (``{"id": str, "amount": number}``) from any queue, records a
rollback checkpoint, builds a plan in one step and applies it to state in another.
"""

from __future__ import annotations

from typing import Any

from rivet_workflows import workflow


def build_payment_plan(payment: dict) -> dict:
    """The plan for one payment message: ``{"payment_id": str, "amount": number}``."""
    return {"payment_id": payment["id"], "amount": payment["amount"]}


async def payment_iteration(loop_ctx: Any) -> None:
    """One iteration of ``payment-loop`` (stateless: returning None continues)."""
    messages = await loop_ctx.queue.next_batch("wait-payment", timeout=30)
    if not messages:
        return
    payment = messages[0].body
    await loop_ctx.rollback_checkpoint("apply-payment-checkpoint")

    async def build_plan(_step: Any) -> dict:
        return build_payment_plan(payment)

    plan = await loop_ctx.step("build-plan", build_plan)

    async def apply_side_effects(step: Any) -> None:
        step.state["applied_count"] += 1
        step.state["total_amount"] += plan["amount"]
        step.state["last_payment_id"] = plan["payment_id"]

    await loop_ctx.step("apply-side-effects", apply_side_effects)


async def run(ctx: Any) -> None:
    """Workflow: the payment loop, forever."""
    await ctx.loop("payment-loop", payment_iteration)


checkpoint_friendly_actor = workflow(
    state={"applied_count": 0, "total_amount": 0, "last_payment_id": None},
    run=run,
    actions={"get_state": lambda c: c.state},
)
