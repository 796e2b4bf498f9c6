"""Actors for the ``rivet list|show|start|send`` tests: ``order`` reserves, takes an approval (a completable
message it answers) and charges, failing the charge's first attempt; ``note`` is a cron-free actor without a
workflow; ``booking`` is rolled back after a queue wait that times out."""

from __future__ import annotations

from rivet_workflows.engine.model.definitions import actor, queue, setup, workflow
from rivet_workflows.engine.model.errors import CriticalError

ATTEMPTS: dict[str, int] = {}


def _reserve(step):
    step.state["reserved"] = True
    return "r-1"


def _charge(step):
    ATTEMPTS[step.actor_id] = ATTEMPTS.get(step.actor_id, 0) + 1
    if ATTEMPTS[step.actor_id] == 1:
        raise RuntimeError("card network down")
    return "paid"


async def run_order(ctx):
    await ctx.step("reserve", _reserve)
    approval = await ctx.queue.next("wait-approval", names=["approve"], completable=True)
    await approval.complete({"approved_by": approval.body})
    await ctx.step("charge", _charge, retry_backoff_base=0.0)
    return {"input": ctx.input}


def _notify(step):
    raise CriticalError("mail server rejected us")


async def run_booking(ctx):
    """Reserves (undone by a rollback), waits 10 ms for a payment that never comes, then fails for good:
    the reservation is compensated."""
    await ctx.rollback_checkpoint("start")
    await ctx.step("reserve", _reserve, rollback=lambda step, output: None)
    await ctx.queue.next_batch("payment", names=["pay"], timeout=0.01)
    await ctx.step("notify", _notify)


order = workflow(run=run_order, state={}, queues={"approve": queue()})
booking = workflow(run=run_booking, state={}, queues={"pay": queue()})
note = actor(state={"text": ""}, actions={"read": lambda c: c.state})

registry = setup(use={"order": order, "booking": booking, "note": note})
