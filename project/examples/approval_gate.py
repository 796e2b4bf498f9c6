"""Spec "Human approval gate": validate an order, pause for an approval message, then fulfil or cancel.

The order id comes from the actor's input (``{"order_id": ...}``, default ``"order-123"``). The order
service is the local fake service (``fake_service``); send ``{"approved": bool}`` to queue ``approval``.
"""

from __future__ import annotations

from typing import Any

from rivet_workflows import queue, workflow

from . import fake_service


def validate_order(order_id: str) -> None:
    """``POST /orders/<id>/validate``; raises ``RuntimeError`` when the service rejects the order."""
    try:
        fake_service.post(f"/orders/{order_id}/validate")
    except fake_service.ServiceError as exc:
        raise RuntimeError("Order validation failed") from exc


def fulfill_order(order_id: str) -> None:
    """``POST /orders/<id>/fulfill``."""
    fake_service.post(f"/orders/{order_id}/fulfill")


def cancel_order(order_id: str) -> None:
    """``POST /orders/<id>/cancel``."""
    fake_service.post(f"/orders/{order_id}/cancel")


async def run(ctx: Any) -> None:
    """Workflow: validate, wait for the decision on ``approval``, fulfil or cancel."""
    order_id = (ctx.input or {}).get("order_id", "order-123")

    def validate(step: Any) -> None:  # sync: blocking HTTP runs in a worker thread
        validate_order(order_id)
        step.state["status"] = "awaiting_approval"

    await ctx.step("validate-order", validate)
    decision = await ctx.queue.next("wait-approval")
    if decision.body["approved"]:

        def fulfill(step: Any) -> None:
            fulfill_order(order_id)
            step.state["status"] = "fulfilled"

        await ctx.step("fulfill-order", fulfill)
    else:

        def cancel(step: Any) -> None:
            cancel_order(order_id)
            step.state["status"] = "cancelled"

        await ctx.step("cancel-order", cancel)


approval_gate_actor = workflow(
    state={"status": "pending"},
    queues={"approval": queue()},
    run=run,
    actions={"get_state": lambda c: c.state},
)
