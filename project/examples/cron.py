"""Spec "Cron (queue-driven)": a scheduled action enqueues a ``cron-tick`` every 60 s and the workflow
loop does the job for each tick. The actor's input may set another interval (``{"interval": seconds}``,
at least 5), which the demo and tests use to see ticks sooner."""

from __future__ import annotations

from typing import Any

from rivet_workflows import ScheduledFireInfo, queue, workflow

#: the spec's interval (60000 ms)
TICK_INTERVAL = 60.0


def on_create(c: Any, input: Any = None) -> None:
    """Schedule ``enqueue_cron_tick`` every minute (created once, with the actor)."""
    interval = (input or {}).get("interval", TICK_INTERVAL) if isinstance(input, dict) else TICK_INTERVAL
    c.cron.every(
        name="workflow-tick",
        interval=interval,
        action="enqueue_cron_tick",
        args=(),
        max_history=100,
    )


def enqueue_cron_tick(c: Any, fire: ScheduledFireInfo) -> None:
    """The scheduled action: ``fire`` is a ``ScheduledFireInfo``; enqueue a tick carrying its instant."""
    c.queue.send("cron-tick", {"scheduled_at": fire.scheduled_at})


async def cron_iteration(loop_ctx: Any) -> None:
    """One iteration of ``cron-loop``: wait for a tick and run the job."""
    message = await loop_ctx.queue.next("wait-cron-tick")

    async def run_cron_job(step: Any) -> None:
        step.state["runs"] += 1
        step.state["last_run_at"] = message.body["scheduled_at"]

    await loop_ctx.step("run-cron-job", run_cron_job)


async def run(ctx: Any) -> None:
    """Workflow: the cron loop, forever."""
    await ctx.loop("cron-loop", cron_iteration)


cron_actor = workflow(
    state={"runs": 0, "last_run_at": None},
    queues={"cron-tick": queue()},
    on_create=on_create,
    actions={"enqueue_cron_tick": enqueue_cron_tick, "get_state": lambda c: c.state},
    run=run,
)
