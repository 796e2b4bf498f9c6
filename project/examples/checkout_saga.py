"""Spec "Cross-Actor saga (compensating actions)": for each ``{"order_id", "amount"}`` message, reserve
with the inventory actor and charge with the billing actor; compensations (direct calls to the fake
service, since rollback handlers get no actor APIs) run in reverse if the saga fails for good.
"""

from __future__ import annotations

from typing import Any

from rivet_workflows import WorkflowStepContextOf, actor, workflow

from . import fake_service


def reserve(_c: Any, order_id: str) -> str:
    """Inventory action: reserve stock for the order."""
    return f"reserve-{order_id}"


def release(_c: Any, reservation_id: str) -> str:
    """Inventory action: release a reservation."""
    return reservation_id


def charge(_c: Any, amount: float) -> str:
    """Billing action: charge the amount. Raises ``ValueError`` for a non-positive amount."""
    if amount <= 0:
        raise ValueError(f"cannot charge {amount}")
    return f"charge-{amount}"


def refund(_c: Any, charge_id: str) -> str:
    """Billing action: refund a charge."""
    return charge_id


inventory_actor = actor(actions={"reserve": reserve, "release": release})
billing_actor = actor(actions={"charge": charge, "refund": refund})


def reserve_inventory_for_checkout(step: WorkflowStepContextOf[Any], order_id: str) -> str:
    """Reserve through the inventory actor."""
    return step.client().inventory_actor.get_or_create(["main"]).reserve(order_id)


def release_inventory_for_checkout(reservation_id: str) -> None:
    """Compensation: release through the fake service."""
    fake_service.post("/inventory/release", {"reservationId": reservation_id})


def charge_checkout(step: WorkflowStepContextOf[Any], amount: float) -> str:
    """Charge through the billing actor."""
    return step.client().billing_actor.get_or_create(["main"]).charge(amount)


def refund_checkout(charge_id: str) -> None:
    """Compensation: refund through the fake service."""
    fake_service.post("/billing/refund", {"chargeId": charge_id})


def mark_order_complete(step: WorkflowStepContextOf[Any]) -> None:
    """Count the completed order."""
    step.state["completed_orders"] += 1


async def saga_iteration(loop_ctx: Any) -> None:
    """One iteration of ``checkout-loop``."""
    messages = await loop_ctx.queue.next_batch("wait-order", timeout=30)
    if not messages:
        return
    checkout = messages[0].body
    await loop_ctx.rollback_checkpoint("checkout-saga")
    await loop_ctx.step(
        name="reserve-inventory",
        run=lambda step: reserve_inventory_for_checkout(step, checkout["order_id"]),
        # Rollback handlers get a rollback context, not actor APIs like client(): compensate with
        # direct external calls.
        rollback=lambda _rollback_ctx, output: release_inventory_for_checkout(output),
    )
    await loop_ctx.step(
        name="charge-card",
        run=lambda step: charge_checkout(step, checkout["amount"]),
        rollback=lambda _rollback_ctx, output: refund_checkout(output),
    )
    await loop_ctx.step("mark-complete", mark_order_complete)


async def run(ctx: Any) -> None:
    """Workflow: the saga loop, forever (until an order fails and rolls back)."""
    await ctx.loop("checkout-loop", saga_iteration)


checkout_saga_actor = workflow(
    state={"completed_orders": 0},
    run=run,
    actions={"get_state": lambda c: c.state},
)
