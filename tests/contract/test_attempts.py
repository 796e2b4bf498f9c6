"""Case C57: every attempt of a step is kept (number, started, finished, outcome, error) and shown in the
history's entry metadata (``attemptLog``), the last 10 per step, including an attempt lost with its worker."""

from __future__ import annotations

from datetime import datetime

import pytest

from rivet_workflows.engine.model.definitions import workflow
from rivet_workflows.engine.operate import inspector


def _log(h, aid, key):
    return inspector.workflow_history(h.runtime, aid)["history"]["entryMetadata"][key]["attemptLog"]


def test_a_step_that_failed_twice_lists_three_attempts_with_the_first_two_errors(h):
    def flaky(step):
        if step.attempt < 3:
            raise ConnectionError(f"refused #{step.attempt}")
        return "ok"

    async def run(ctx):
        return await ctx.step("call", flaky, retry_backoff_base=0.001)

    h.setup(wf=workflow(run=run))
    aid = h.start()
    h.drain()
    assert h.actor(aid).output == "ok"
    log = _log(h, aid, "call")
    assert [(a["attempt"], a["outcome"]) for a in log] == [(1, "failed"), (2, "failed"), (3, "completed")]
    assert [a["error"] for a in log] == [
        {"name": "ConnectionError", "message": "refused #1"},
        {"name": "ConnectionError", "message": "refused #2"},
        None,
    ]
    starts = [datetime.fromisoformat(a["startedAt"]) for a in log]
    ends = [datetime.fromisoformat(a["finishedAt"]) for a in log]
    assert starts == sorted(starts) and all(s <= e for s, e in zip(starts, ends, strict=True))
    assert ends[0] <= starts[1] and ends[1] <= starts[2]
    meta = inspector.workflow_history(h.runtime, aid)["history"]["entryMetadata"]["call"]
    assert meta["attempts"] == 3 and meta["error"] is None
    assert (
        "attempt_log"
        not in inspector.workflow_history(h.runtime, aid)["history"]["entries"][0]["kind"]["data"]
    )


def test_the_attempt_log_keeps_the_last_ten_attempts(h):
    def flaky(step):
        if step.attempt < 13:
            raise ValueError(f"no {step.attempt}")
        return step.attempt

    async def run(ctx):
        return await ctx.step(
            "call", flaky, max_retries=20, retry_backoff_base=0.0001, retry_backoff_max=0.001
        )

    h.setup(wf=workflow(run=run))
    aid = h.start()
    h.drain()
    assert h.actor(aid).output == 13
    log = _log(h, aid, "call")
    assert [a["attempt"] for a in log] == list(range(4, 14))
    assert log[-1]["outcome"] == "completed" and log[0]["error"]["message"] == "no 4"


def test_an_exhausted_step_lists_every_failed_attempt_and_a_timeout_says_timed_out(h):
    import asyncio

    async def slow(step):
        await asyncio.sleep(5)

    async def run(ctx):
        await ctx.try_step(
            "slow", slow, timeout=0.05, retry_on_timeout=True, max_retries=1, retry_backoff_base=0.001
        )
        await ctx.step(
            "never",
            lambda s: (_ for _ in ()).throw(RuntimeError("down")),
            max_retries=1,
            retry_backoff_base=0.001,
        )

    h.setup(wf=workflow(run=run))
    aid = h.start()
    h.drain()
    assert [(a["attempt"], a["outcome"]) for a in _log(h, aid, "slow")] == [
        (1, "timed out"),
        (2, "timed out"),
    ]
    never = _log(h, aid, "never")
    assert [(a["attempt"], a["outcome"], a["error"]["message"]) for a in never] == [
        (1, "failed", "down"),
        (2, "failed", "down"),
    ]


def test_an_attempt_lost_with_its_worker_shows_as_worker_lost(h):
    crash = [True]

    def dies_once(step):
        if crash[0]:
            crash[0] = False
            raise KeyboardInterrupt  # the worker process dies mid-step
        return "done"

    async def run(ctx):
        return await ctx.step("fragile", dies_once, retry_backoff_base=0.001)

    h.setup(wf=workflow(run=run))
    aid = h.start()
    with pytest.raises(KeyboardInterrupt):
        h.drain()
    running = _log(h, aid, "fragile")
    assert [(a["attempt"], a["outcome"], a["finishedAt"]) for a in running] == [(1, "running", None)]
    h.restart(aid)
    h.drain()
    assert h.actor(aid).output == "done"
    log = _log(h, aid, "fragile")
    assert [(a["attempt"], a["outcome"]) for a in log] == [(1, "worker lost"), (2, "completed")]
    assert log[0]["finishedAt"] is None and log[0]["error"]["name"] == "WorkerLostError"
    assert log[0]["startedAt"] is not None
