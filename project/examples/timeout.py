"""Spec "Timeouts": a charge step with a 5 s timeout that retries on timeout (up to 5 retries, backoff
0.2 s doubling up to 2 s). Send ``{"order_id": str}`` to queue ``charge``.

The charge goes to the fake service's ``POST /v1/charges``; the demo makes its first call slower than
the timeout, so the first attempt times out and the retry succeeds.
"""

from __future__ import annotations

from typing import Any

from rivet_workflows import queue, workflow

from . import fake_service

#: the spec's step timeout (5000 ms); tests may shorten it
CHARGE_TIMEOUT = 5.0


def charge_card(order_id: str) -> str:
    """Charge through the fake service; returns the charge id."""
    return fake_service.post("/v1/charges", {"orderId": order_id})["id"]


async def charge_iteration(loop_ctx: Any) -> None:
    """One iteration of ``charge-loop``: wait for a charge request, charge, save the charge id."""
    message = await loop_ctx.queue.next("wait-charge")

    def charge(_step: Any) -> str:
        return charge_card(message.body["order_id"])

    charge_id = await loop_ctx.step(
        name="charge-card",
        timeout=CHARGE_TIMEOUT,
        retry_on_timeout=True,
        max_retries=5,
        retry_backoff_base=0.2,
        retry_backoff_max=2.0,
        run=charge,
    )

    async def save_charge(step: Any) -> None:
        step.state["last_charge_id"] = charge_id

    await loop_ctx.step("save-charge", save_charge)


async def run(ctx: Any) -> None:
    """Workflow: the charge loop, forever."""
    await ctx.loop("charge-loop", charge_iteration)


timeout_actor = workflow(
    state={"last_charge_id": None},
    queues={"charge": queue()},
    run=run,
)
