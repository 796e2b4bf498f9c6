"""Not in the spec: an atomic step writing the example shop's ``Order`` model (manual: "Exactly-once
database writes"). The demo SIGKILLs the worker while this workflow is in its slow ``ship`` step, after
the order was placed; the next worker resumes it and the order is not placed again: one row at the end.
(The kill *between* an atomic body and its commit is tests/system/test_atomic_crash.py.)

``place-order`` creates the row (or, replayed, updates it: keyed by the checkout), sets the state and returns the order id, all in the transaction that
records the step; ``ship`` counts its runs in the fake service (``POST /counters/shop:<key>:ship``) and
sleeps ``ship_seconds`` (input, default 3.0). The checkout key is the actor's key.
"""

from __future__ import annotations

import time
from typing import Any

from rivet_workflows import workflow

from . import fake_service


def counter_name(key: str, name: str) -> str:
    """The fake-service counter a step of the checkout ``key`` bumps."""
    return f"shop:{key}:{name}"


def place_order(step: Any) -> int:
    """Atomic: the ``Order`` row, the state change and the step's history entry commit together."""
    from project.shop.models import Order  # the app registry is ready when a step runs

    # keyed by the checkout, so a replay of this step updates its order instead of placing a second one
    order, _ = Order.objects.update_or_create(
        checkout=step.key[0], defaults={"item": "book", "quantity": 2, "attempt": step.attempt}
    )
    step.state["order_id"] = order.pk
    step.state["status"] = "placed"
    return order.pk


async def run(ctx: Any) -> dict:
    """Workflow: place the order (atomic), ship it (slow: the demo kills the worker here)."""
    key = ctx.key[0]
    ship_seconds = float((ctx.input or {}).get("ship_seconds", 3.0))
    order_id = await ctx.step("place-order", place_order, atomic=True)

    def ship(step: Any) -> int:
        runs = fake_service.post(f"/counters/{counter_name(key, 'ship')}")["count"]
        time.sleep(ship_seconds)
        step.state["status"] = "shipped"
        return runs

    shipped = await ctx.step(name="ship", run=ship, timeout=ship_seconds + 30)
    return {"order_id": order_id, "ship_runs": shipped}


shop_order_actor = workflow(
    state={"status": "new", "order_id": None},
    run=run,
    queries={"status": lambda c: c.state["status"]},
    actions={"get_state": lambda c: c.state},
)
