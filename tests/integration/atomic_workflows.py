"""Workflows of the atomic-step tests: each writes ``shop.Order`` rows from an atomic step.

``PLAN`` tells the bodies what to do per actor key and attempt: ``"fail"`` (write, then raise), ``"steal"``
(write, then move the lease on as another executor's claim would, inside the same transaction), or a
callable run inside the body. Every body records its attempts in ``CALLS``.
"""

from __future__ import annotations

from typing import Any

from django.db.models import F

from project.shop.models import Order
from rivet_workflows import models
from rivet_workflows.engine.model.definitions import queue, setup, workflow

PLAN: dict[tuple[str, int], Any] = {}
CALLS: list[tuple[str, int]] = []


def place_order(step: Any) -> int:
    checkout = step.key[0]
    CALLS.append((checkout, step.attempt))
    order = Order.objects.create(checkout=checkout, item="book", quantity=2, attempt=step.attempt)
    step.state["status"] = "placed"
    step.state["attempts"] = step.state.get("attempts", 0) + 1
    step.queue.send("placed", {"order": order.pk})
    what = PLAN.get((checkout, step.attempt))
    if what == "fail":
        raise RuntimeError(f"payment service down (attempt {step.attempt})")
    if what == "steal":
        models.Actor.objects.filter(pk=step.actor_id).update(lease_token=F("lease_token") + 1)
    elif callable(what):
        what(step)
    return order.pk


async def run_checkout(ctx: Any) -> dict:
    order_id = await ctx.step("place-order", place_order, atomic=True, max_retries=2, retry_backoff_base=0)
    received = await ctx.queue.next_batch("receive", names=["placed"], count=5, timeout=0)
    return {"order": order_id, "messages": [m.body for m in received]}


checkout = workflow(run=run_checkout, state={"status": "new"}, queues={"placed": queue()})

registry = setup(use={"checkout": checkout})


def reset() -> None:
    PLAN.clear()
    CALLS.clear()
