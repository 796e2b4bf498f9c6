"""Actors for the ``rivet list|show|start|send`` tests: ``order`` reserves, takes an approval (a completable
message it answers) and charges, failing the charge's first attempt; ``note`` is a cron-free actor without a
workflow."""

from __future__ import annotations

from rivet_workflows.engine.definitions import actor, queue, setup, workflow

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


order = workflow(run=run_order, state={}, queues={"approve": queue()})
note = actor(state={"text": ""}, actions={"read": lambda c: c.state})

registry = setup(use={"order": order, "note": note})
