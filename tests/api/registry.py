"""Actors used by the API, admin, realtime and browser tests of the inspector.

``is_broken()`` is read by the ``charge`` step at run time: a test breaks it (``FLAGS["broken"] = True``, or
a marker file for a server in another process), lets the workflow fail, "fixes the cause" by flipping the
flag back (removing the file) and replays.
"""

from __future__ import annotations

import os
from datetime import UTC, datetime
from decimal import Decimal

from rivet_workflows.engine.model import definitions as d

FLAGS: dict = {"broken": False}
#: env var naming a file whose existence also breaks ``charge`` (seen by forked server processes too)
BROKEN_FILE_ENV = "RIVET_TEST_BROKEN_FILE"


def is_broken() -> bool:
    """True while the test has broken the payment step (FLAGS, or the marker file of BROKEN_FILE_ENV)."""
    marker = os.environ.get(BROKEN_FILE_ENV)
    return bool(FLAGS.get("broken")) or bool(marker and os.path.exists(marker))


def _fetch(step):
    return {"order": 42}


def _charge(step):
    if is_broken():
        raise RuntimeError("card declined: payment service misconfigured")
    step.state["charged"] = step.state.get("charged", 0) + 1
    step.broadcast("charged", step.state["charged"])
    return {"charged": True}


def _ship(step):
    return "shipped"


async def order_run(ctx):
    order = await ctx.step("fetch-order", _fetch)
    await ctx.step(name="charge", run=_charge, max_retries=0)

    async def each(lctx, i):
        await lctx.step("pack", lambda s: i)
        return d.Loop.break_(i) if i >= 1 else d.Loop.continue_(i + 1)

    await ctx.loop(name="pack-items", state=0, run=each)
    await ctx.join(
        "notify",
        {
            "email": lambda b: b.step("send-email", lambda s: "mail"),
            "sms": lambda b: b.step("send-sms", lambda s: "sms"),
        },
    )
    shipped = await ctx.step("ship", _ship)
    return {"order": order["order"], "status": shipped}


def _boom(c):
    raise ValueError("boom")


order_actor = d.actor(
    state={"charged": 0},
    queues={"approval": d.queue()},
    actions={"get_state": lambda c: c.state, "boom": _boom, "add": lambda c, a, b: a + b},
    run=d.workflow(order_run),
)


async def waiter_run(ctx):
    message = await ctx.queue.next("wait-approval", names=["approval"], completable=True)
    await ctx.step("record", lambda s: s.state.update(approved=message.body))
    await message.complete({"ok": True, "got": message.body})
    return message.body


waiter_actor = d.actor(state={}, queues={"approval": d.queue()}, run=d.workflow(waiter_run))


async def reader_run(ctx):
    first = await ctx.queue.next("first", names=["inbox"])  # received, never completed
    await ctx.queue.next("second", names=["inbox"])
    return first.body


reader_actor = d.actor(state={}, queues={"inbox": d.queue()}, run=d.workflow(reader_run))

counter_actor = d.actor(
    state={"count": 0},
    actions={"increment": lambda c, n=1: c.state.update(count=c.state["count"] + n) or c.state["count"]},
    queries={"count": lambda c: c.state["count"]},
)


def _needs_order_id(c, input):
    c.state["order_id"] = input["order_id"]  # TypeError/KeyError without one


picky_actor = d.actor(state={}, on_create=_needs_order_id, actions={"get_state": lambda c: c.state})


async def shipment_run(ctx):
    """Charge, then wait for the ship order (no timeout): a run that ends in a queue wait."""
    await ctx.step(name="charge", run=_charge, max_retries=0)
    await ctx.queue.next("wait-ship", names=["approval"])
    return await ctx.step("ship", _ship)


shipment_actor = d.actor(state={"charged": 0}, queues={"approval": d.queue()}, run=d.workflow(shipment_run))

#: a due date with microseconds and an offset, shown as ISO 8601 by the API and the admin
DUE = datetime(2030, 1, 2, 3, 4, 5, 678000, tzinfo=UTC)


async def ledger_run(ctx):
    """Values JSON cannot hold (Decimal, datetime, tuple) in a step output, and every message status: a
    queue wait with a timeout whose message comes first (its deadline is interrupted), a received message,
    a completable message answered, a sleep and a checkpoint."""
    total = await ctx.step("total", lambda s: {"amount": Decimal("19.90"), "due": DUE, "lines": (1, 2)})
    await ctx.sleep("cool-off", 0)
    await ctx.queue.next_batch("settle", names=["approval"], timeout=3600)
    confirm = await ctx.queue.next("confirm", names=["approval"], completable=True)
    await confirm.complete({"ok": True, "at": DUE})
    await ctx.rollback_checkpoint("done")
    return total


ledger_actor = d.actor(
    state={"limit": Decimal("100.00"), "opened": DUE},
    queues={"approval": d.queue()},
    actions={"balance": lambda c: Decimal("5.50")},
    run=d.workflow(ledger_run),
)

registry = d.setup(
    use={
        "order": order_actor,
        "waiter": waiter_actor,
        "counter": counter_actor,
        "picky": picky_actor,
        "reader": reader_actor,
        "ledger": ledger_actor,
        "shipment": shipment_actor,
    }
)
