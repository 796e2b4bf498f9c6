"""Spec "Handling terminal failures as data": ``try_step`` (payment_actor) and ``try_`` (run_payment_flow).

``payment_actor`` charges a card with ``try_step``; a failed charge becomes data (status
``manual-review`` with the reason) instead of failing the workflow. The order id comes from the actor's
input (``{"order_id": ...}``, default ``"order-123"`` as in the spec); an id starting with ``declined``
makes the charge fail on every attempt, to show the failure path.

``run_payment_flow(ctx)`` is the spec's ``ctx.try`` block; ``payment_flow_actor`` runs it and stores
the ``TryResult`` in state.
"""

from __future__ import annotations

from typing import Any

from rivet_workflows import workflow


async def charge_card(order_id: str) -> str:
    """Charge the order's card; returns the charge id. Raises ``RuntimeError`` for a declined card."""
    if order_id.startswith("declined"):
        raise RuntimeError(f"card declined for {order_id}")
    return f"charge-{order_id}"


def _order_id(ctx: Any) -> str:
    data = ctx.input if isinstance(ctx.input, dict) else {}
    return data.get("order_id", "order-123")


async def run_payment(ctx: Any) -> None:
    """Workflow of payment_actor: try the charge, then record paid or manual-review in state."""
    order_id = _order_id(ctx)

    async def charge(_step: Any) -> str:
        return await charge_card(order_id)

    charge_result = await ctx.try_step(name="charge-card", max_retries=3, run=charge)

    async def store_result(step: Any) -> None:
        if not charge_result.ok:
            step.state["status"] = "manual-review"
            step.state["reason"] = (
                charge_result.failure.error.message
            )  # the spec's charge.failure.error.message
            return
        step.state["status"] = "paid"
        step.state["reason"] = None

    await ctx.step("store-charge-result", store_result)


payment_actor = workflow(
    state={"status": "pending", "reason": None},
    run=run_payment,
    actions={"get_state": lambda c: c.state},
)


# --- try_ block ------------------------------------------------------------------------------------


async def authorize_order(order_id: str) -> str:
    """Authorize the order; returns an authorization id."""
    return f"auth-{order_id}"


async def capture_order(order_id: str) -> str:
    """Capture the authorized payment; returns a capture id."""
    return f"capture-{order_id}"


async def run_payment_flow(ctx: Any) -> Any:
    """The spec's ``ctx.try("payment-flow", ...)``: returns a ``TryResult`` whose value is
    ``{"auth": ..., "capture": ...}`` or whose failure names the failed step."""

    async def authorize(_step: Any) -> str:
        return await authorize_order("order-123")

    async def capture(_step: Any) -> str:
        return await capture_order("order-123")

    async def block(block_ctx: Any) -> dict:
        auth = await block_ctx.step("authorize", authorize)
        captured = await block_ctx.step("capture", capture)
        return {"auth": auth, "capture": captured}

    return await ctx.try_("payment-flow", block)


async def run_payment_flow_actor(ctx: Any) -> None:
    """Workflow of payment_flow_actor: run the try block and store its outcome in state."""
    result = await run_payment_flow(ctx)

    async def store(step: Any) -> None:
        step.state["ok"] = result.ok
        step.state["value"] = result.value if result.ok else None
        step.state["failure"] = None if result.ok else result.failure

    await ctx.step("store-flow-result", store)


payment_flow_actor = workflow(
    state={"ok": None, "value": None, "failure": None},
    run=run_payment_flow_actor,
    actions={"get_state": lambda c: c.state},
)
