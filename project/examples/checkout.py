"""Spec "Rollback": each order (``{"order_id": str}`` on queue ``orders``) reserves inventory and charges
the card after a rollback checkpoint; if a later step fails for good, the compensations run in reverse
(refund the charge, release the reservation) and the workflow fails.

The inventory and "Stripe" endpoints are the fake service's; an order id starting with ``declined``
makes the charge fail.
"""

from __future__ import annotations

from typing import Any

from rivet_workflows import queue, workflow

from . import fake_service


def reserve_inventory(order_id: str) -> str:
    """Reserve stock; returns the reservation id."""
    return fake_service.post("/inventory/reserve", {"orderId": order_id})["reservationId"]


def release_inventory(reservation_id: str) -> None:
    """Release a reservation."""
    fake_service.post(f"/inventory/{reservation_id}/release")


def charge_card(order_id: str) -> str:
    """Charge the card; returns the charge id. Raises ``ServiceError`` when the card is declined."""
    return fake_service.post("/v1/charges", {"orderId": order_id})["id"]


def refund_charge(charge_id: str) -> None:
    """Refund a charge."""
    fake_service.post("/v1/refunds", {"charge": charge_id})


async def checkout_iteration(loop_ctx: Any) -> None:
    """One iteration of ``checkout-loop``."""
    message = await loop_ctx.queue.next("wait-order")
    order_id = message.body["order_id"]
    await loop_ctx.rollback_checkpoint("checkout-checkpoint")
    await loop_ctx.step(
        name="reserve-inventory",
        run=lambda _step: reserve_inventory(order_id),
        rollback=lambda _rollback_ctx, reservation_id: release_inventory(reservation_id),
    )
    await loop_ctx.step(
        name="charge-card",
        run=lambda _step: charge_card(order_id),
        rollback=lambda _rollback_ctx, charge_id: refund_charge(charge_id),
    )

    async def confirm(step: Any) -> None:
        step.state["status"] = "confirmed"

    await loop_ctx.step("confirm", confirm)


async def run(ctx: Any) -> None:
    """Workflow: the checkout loop, forever (until an order fails and rolls back)."""
    await ctx.loop("checkout-loop", checkout_iteration)


checkout_actor = workflow(
    state={"status": "pending"},
    queues={"orders": queue()},
    run=run,
    actions={"get_state": lambda c: c.state},
)
