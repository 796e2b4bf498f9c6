"""ENGINE-SCENARIOS.md "Steps": durable steps, replay, retries, timeouts, divergence."""

from __future__ import annotations

import asyncio
import uuid
from datetime import UTC, datetime, timedelta
from decimal import Decimal

import pytest

from rivet_workflows.engine.model import ports
from rivet_workflows.engine.model.definitions import workflow
from rivet_workflows.engine.model.errors import (
    CriticalError,
    RollbackError,
    StepExhaustedError,
    StepOnlyError,
)


def test_step_output_becomes_workflow_output(h):
    async def run(ctx):
        return await ctx.step("greet", lambda step: "hello world")

    h.setup(wf=workflow(run=run))
    aid = h.start()
    h.drain()
    actor = h.actor(aid)
    assert actor.workflow_state == ports.COMPLETED
    assert actor.output == "hello world"


@pytest.mark.parametrize("value", ["x", None, 0, "", [], False, {}])
def test_completed_step_is_not_rerun_on_replay(h, value):
    calls = []

    def body(step):
        calls.append(1)
        return value

    async def run(ctx):
        out = await ctx.step("once", body)
        await ctx.sleep("pause", 30)
        return out

    h.setup(wf=workflow(run=run))
    aid = h.start()
    h.run(aid)
    assert h.actor(aid).workflow_state == ports.SLEEPING
    # force a second replay before the sleep ends: the step must not run again
    h.run(aid)
    h.run(aid)
    assert calls == [1]
    assert h.history(aid)["once"].data["output"] == value


def test_three_sequential_steps(h):
    async def run(ctx):
        a = await ctx.step("a", lambda s: 1)
        b = await ctx.step("b", lambda s: 2)
        c = await ctx.step("c", lambda s: 3)
        return a + b + c

    h.setup(wf=workflow(run=run))
    aid = h.start()
    h.drain()
    assert h.actor(aid).output == 6


def _flaky(fail_times: int, message: str = "Transient failure", result: str = "success"):
    calls = []

    def body(step):
        calls.append(step.attempt)
        if len(calls) <= fail_times:
            raise RuntimeError(message)
        return result

    return body, calls


def test_retry_until_success_records_attempts(h):
    body, calls = _flaky(2)

    async def run(ctx):
        return await ctx.step("flaky", body, max_retries=3, retry_backoff_base=0.001)

    h.setup(wf=workflow(run=run))
    aid = h.start()
    h.drain()
    assert h.actor(aid).output == "success"
    assert calls == [1, 2, 3]
    assert h.history(aid)["flaky"].attempts == 3


def test_on_error_step_event_for_retryable_failure(h):
    events = []
    body, _ = _flaky(1, result="ok")

    async def run(ctx):
        return await ctx.step("flaky-step", body, max_retries=3, retry_backoff_base=0.25)

    h.setup(wf=workflow(run=run, on_error=lambda c, e: events.append(e)))
    aid = h.start()
    h.run(aid)
    assert h.actor(aid).workflow_state == ports.SLEEPING
    assert len(events) == 1
    step = events[0]["step"]
    assert list(events[0]) == ["step"]
    assert step["step_name"] == "flaky-step"
    assert step["attempt"] == 1
    assert step["max_retries"] == 3
    assert step["remaining_retries"] == 3
    assert step["will_retry"] is True
    assert step["retry_delay"] == pytest.approx(0.5)
    assert step["retry_at"] == h.actor(aid).wake_at
    assert step["error"]["name"] == "RuntimeError"
    assert step["error"]["message"] == "Transient failure"
    h.drain()
    assert h.actor(aid).output == "ok"
    assert len(events) == 1


def test_backoff_is_a_durable_sleep_with_a_fixed_deadline(h):
    body, calls = _flaky(100)

    async def run(ctx):
        return await ctx.step("flaky", body, retry_backoff_base=0.05, retry_backoff_max=0.1)

    h.setup(wf=workflow(run=run), manual_clock=True)
    aid = h.start()
    h.run(aid)
    first = h.actor(aid)
    assert first.workflow_state == ports.SLEEPING
    assert first.wake_at == h.history(aid)["flaky"].last_attempt_at + timedelta(seconds=0.1)
    h.run(aid)  # before the deadline: sleeps again, nothing ran
    again = h.actor(aid)
    assert again.workflow_state == ports.SLEEPING and again.wake_at == first.wake_at
    assert h.history(aid)["flaky"].attempts == 1
    for _ in range(3):
        h.clock.advance(1)
        h.run(aid)
    actor = h.actor(aid)
    assert actor.workflow_state == ports.FAILED
    assert actor.error["name"] == "StepExhaustedError"
    assert calls == [1, 2, 3, 4]


def test_backoff_in_live_mode_ends_exhausted_after_four_attempts(h):
    body, calls = _flaky(100)

    async def run(ctx):
        return await ctx.step("flaky", body, retry_backoff_base=0.005, retry_backoff_max=0.02)

    h.setup(wf=workflow(run=run))
    aid = h.start()
    h.run_live(aid)
    actor = h.actor(aid)
    assert actor.workflow_state == ports.FAILED
    assert actor.error["name"] == "StepExhaustedError"
    assert len(calls) == 4


@pytest.mark.parametrize("exc_cls", [CriticalError, RollbackError])
def test_critical_and_rollback_errors_are_not_retried(h, exc_cls):
    events = []
    calls = []

    def body(step):
        calls.append(1)
        raise exc_cls("stop")

    async def run(ctx):
        return await ctx.step("s", body)

    h.setup(wf=workflow(run=run, on_error=lambda c, e: events.append(e)))
    aid = h.start()
    h.drain()
    actor = h.actor(aid)
    assert actor.workflow_state == ports.FAILED
    assert actor.error["name"] == exc_cls.__name__
    assert calls == [1]
    assert h.history(aid)["s"].attempts == 1
    assert len(events) == 1
    assert events[0]["step"]["attempt"] == 1 and events[0]["step"]["will_retry"] is False


def test_exhausted_step_is_not_rerun_and_reported_once(h):
    events = []
    calls = []
    raised = []

    def body(step):
        calls.append(1)
        raise RuntimeError("boom")

    async def run(ctx):
        try:
            await ctx.step("s", body, max_retries=0)
        except StepExhaustedError as exc:
            raised.append(exc)
        await ctx.sleep("pause", 60)

    h.setup(wf=workflow(run=run, on_error=lambda c, e: events.append(e)))
    aid = h.start()
    h.run(aid)
    h.run(aid)
    assert [type(e) for e in raised] == [StepExhaustedError, StepExhaustedError]
    assert raised[1].step_name == "s" and raised[1].error["message"] == "boom"
    assert calls == [1]
    assert len(events) == 1 and events[0]["step"]["will_retry"] is False


def test_error_in_run_function_fires_workflow_event(h):
    events = []

    async def run(ctx):
        raise ValueError("workflow failed")

    h.setup(wf=workflow(run=run, on_error=lambda c, e: events.append(e)))
    aid = h.start()
    h.drain()
    assert h.actor(aid).workflow_state == ports.FAILED
    assert events == [{"workflow": {"workflow_id": aid, "error": events[0]["workflow"]["error"]}}]
    assert events[0]["workflow"]["error"]["name"] == "ValueError"
    assert events[0]["workflow"]["error"]["message"] == "workflow failed"


def test_always_failing_step_sleeps_twice_then_exhausts(h):
    body, calls = _flaky(100)

    async def run(ctx):
        return await ctx.step("s", body, max_retries=2, retry_backoff_base=0.01)

    h.setup(wf=workflow(run=run), manual_clock=True)
    aid = h.start()
    states = []
    for _ in range(3):
        h.run(aid)
        states.append(h.actor(aid).workflow_state)
        h.clock.advance(1)
    assert states == [ports.SLEEPING, ports.SLEEPING, ports.FAILED]
    assert h.actor(aid).error["name"] == "StepExhaustedError"
    assert h.history(aid)["s"].attempts == 3


def test_timeout_without_retry_is_critical(h):
    async def slow(step):
        await asyncio.sleep(0.5)
        return "late"

    async def run(ctx):
        return await ctx.step("slow", slow, timeout=0.01)

    h.setup(wf=workflow(run=run))
    aid = h.start()
    h.drain()
    actor = h.actor(aid)
    assert actor.workflow_state == ports.FAILED
    assert actor.error["name"] == "CriticalError"
    assert h.history(aid)["slow"].attempts == 1


def test_timeout_with_retry_on_timeout_retries_then_exhausts(h):
    async def slow(step):
        await asyncio.sleep(0.5)

    async def run(ctx):
        return await ctx.step("slow", slow, timeout=0.01, retry_on_timeout=True, max_retries=2)

    h.setup(wf=workflow(run=run), manual_clock=True)
    aid = h.start()
    states = []
    for _ in range(3):
        h.run(aid)
        states.append(h.actor(aid).workflow_state)
        h.clock.advance(1)
    assert states == [ports.SLEEPING, ports.SLEEPING, ports.FAILED]
    assert h.actor(aid).error["name"] == "StepExhaustedError"
    assert h.history(aid)["slow"].attempts == 3


def test_unawaited_step_then_another_primitive_raises_entry_in_progress(h):
    async def run(ctx):
        pending = ctx.step("a", lambda s: 1)
        try:
            await ctx.step("b", lambda s: 2)
        finally:
            pending.close()

    h.setup(wf=workflow(run=run))
    aid = h.start()
    h.drain()
    assert h.actor(aid).error["name"] == "EntryInProgressError"


def test_duplicate_step_name_diverges(h):
    async def run(ctx):
        await ctx.step("dup", lambda s: 1)
        await ctx.step("dup", lambda s: 2)

    h.setup(wf=workflow(run=run))
    aid = h.start()
    h.drain()
    assert h.actor(aid).error["name"] == "HistoryDivergedError"


def test_ephemeral_steps_ride_on_the_next_write(h):
    def count_commits(run_fn):
        h.setup(wf=workflow(run=run_fn))
        store = h.runtime.store
        seen = []
        original = store.commit

        def counting(actor_id, token, commit):
            if commit.upserts:
                seen.append([e.key for e in commit.upserts])
            return original(actor_id, token, commit)

        store.commit = counting
        aid = h.start()
        h.drain()
        return h, aid, seen

    async def only_durable(ctx):
        return await ctx.step("c", lambda s: 3)

    async def with_ephemeral(ctx):
        a = await ctx.step("a", lambda s: 1, ephemeral=True)
        b = await ctx.step("b", lambda s: 2, ephemeral=True)
        c = await ctx.step("c", lambda s: 3)
        return a + b + c

    _, _, baseline = count_commits(only_durable)
    _, aid, seen = count_commits(with_ephemeral)
    assert len(seen) == len(baseline)
    assert "a" in seen[0] and "b" in seen[0]
    assert h.actor(aid).output == 6
    assert {k: e.status for k, e in h.history(aid).items()} == {k: "completed" for k in ("a", "b", "c")}


def test_failed_attempt_stores_error_without_output(h):
    def body(step):
        raise RuntimeError("nope")

    async def run(ctx):
        return await ctx.step("s", body, max_retries=1, retry_backoff_base=10)

    h.setup(wf=workflow(run=run))
    aid = h.start()
    h.run(aid)
    entry = h.history(aid)["s"]
    assert entry.status == ports.ENTRY_FAILED
    assert "output" not in entry.data
    assert entry.error["message"] == "nope"


def test_renamed_step_diverges_before_it_runs(h):
    calls = []

    async def v1(ctx):
        await ctx.step("original", lambda s: 1)
        await ctx.sleep("wait", 60)

    async def v2(ctx):
        await ctx.step("renamed", lambda s: calls.append(1))
        await ctx.sleep("wait", 60)

    h.setup(wf=workflow(run=v1))
    aid = h.start()
    h.run(aid)
    before = h.history(aid)
    h.runtime.registry.get("wf").run = workflow(v2)
    h.run(aid)
    actor = h.actor(aid)
    assert actor.workflow_state == ports.FAILED
    assert actor.error["name"] == "HistoryDivergedError"
    assert "original" in actor.error["message"] and "ctx.removed" in actor.error["message"]
    assert calls == []
    assert set(h.history(aid)) == set(before)


def test_state_changes_of_failed_attempts_are_kept(h):
    def body(step):
        step.state["tries"] += 1
        if step.state["tries"] < 3:
            raise RuntimeError("again")
        return step.state["tries"]

    async def run(ctx):
        return await ctx.step("s", body, retry_backoff_base=0.001)

    h.setup(wf=workflow(run=run, state={"tries": 0}))
    aid = h.start()
    h.drain()
    actor = h.actor(aid)
    assert actor.output == 3
    assert actor.state == {"tries": 3}


def test_values_are_identical_on_first_run_and_replay(h):
    value = {
        "when": datetime(2024, 1, 2, 3, 4, 5, tzinfo=UTC),
        "amount": Decimal("1.10"),
        "id": uuid.UUID(int=7),
        "raw": b"\x00\x01",
        "pair": (1, 2),
    }
    seen = []

    async def run(ctx):
        got = await ctx.step("v", lambda s: value)
        seen.append(got)
        await ctx.sleep("pause", 60)

    h.setup(wf=workflow(run=run))
    aid = h.start()
    h.run(aid)
    h.run(aid)
    assert seen[0] == seen[1] == value
    assert type(seen[1]["pair"]) is tuple and type(seen[1]["amount"]) is Decimal


def test_unserializable_output_fails_the_step_at_once(h):
    calls = []

    def body(step):
        calls.append(1)
        return object()

    async def run(ctx):
        return await ctx.step("bad", body)

    h.setup(wf=workflow(run=run))
    aid = h.start()
    h.drain()
    actor = h.actor(aid)
    assert actor.error["name"] == "SerializationError"
    assert "bad" in actor.error["message"] and "object" in actor.error["message"]
    assert calls == [1]


def test_step_only_members_raise_outside_steps(h):
    async def run(ctx):
        try:
            ctx.state  # noqa: B018
        except StepOnlyError:
            return await ctx.step("s", lambda step: [step.state["n"], step.attempt, step.idempotency_key])

    h.setup(wf=workflow(run=run, state={"n": 5}))
    aid = h.start()
    h.drain()
    assert h.actor(aid).output == [5, 1, f"{aid}:s"]


def test_async_step_bodies_and_input(h):
    async def body(step):
        await asyncio.sleep(0)
        return "async"

    async def run(ctx):
        return [await ctx.step("a", body), ctx.input]

    h.setup(wf=workflow(run=run))
    aid = h.start(input={"x": 1})
    h.drain()
    assert h.actor(aid).output == ["async", {"x": 1}]


def test_recover_after_exhaustion_lets_more_attempts_run(h):
    calls = []

    def body(step):
        calls.append(step.attempt)
        raise RuntimeError("still broken")

    async def run(ctx):
        return await ctx.step("s", body, max_retries=0)

    h.setup(wf=workflow(run=run))
    handle = h.runtime.client().wf.get_or_create("k")
    h.drain()
    assert h.actor(handle.actor_id).workflow_state == ports.FAILED
    assert handle.recover() is True
    h.drain()
    actor = h.actor(handle.actor_id)
    assert actor.workflow_state == ports.FAILED and actor.error["name"] == "StepExhaustedError"
    assert len(calls) == 2


def test_removed_trailing_step_diverges_when_the_run_ends(h):
    async def v1(ctx):
        await ctx.step("a", lambda s: 1)
        await ctx.step("b", lambda s: 2)
        await ctx.sleep("wait", 60)

    async def v2(ctx):
        await ctx.step("a", lambda s: 1)
        return "done"

    h.setup(wf=workflow(run=v1))
    aid = h.start()
    h.run(aid)
    h.runtime.registry.get("wf").run = workflow(v2)
    h.run(aid)
    actor = h.actor(aid)
    assert actor.workflow_state == ports.FAILED
    assert actor.error["name"] == "HistoryDivergedError" and "'b'" in actor.error["message"]


def test_a_workflow_primitive_called_inside_a_step_body_fails_the_step_at_once(h):
    """Steps do not nest: ``ctx.step`` inside a body is a ``StepNestingError`` (critical, not retried)."""
    calls = []

    async def run(ctx):
        async def body(step):
            calls.append(step.attempt)
            return await ctx.step("inner", lambda s: 1)

        result = await ctx.try_step("outer", body, max_retries=3)
        return {"ok": result.ok, "error": result.failure["error"]["name"]}

    h.setup(wf=workflow(run=run))
    aid = h.start()
    h.drain()
    assert calls == [1]
    assert h.actor(aid).output == {"ok": False, "error": "StepNestingError"}
    assert h.history(aid)["outer"].attempts == 1
    assert "steps do not nest" in h.history(aid)["outer"].error["message"]


def test_a_step_that_was_never_awaited_fails_the_workflow_instead_of_being_skipped(h):
    ran = []

    async def run(ctx):
        await ctx.step("first", lambda s: ran.append("first"))
        ctx.step("forgotten", lambda s: ran.append("forgotten"))  # noqa: RUF006 - the bug under test
        return "done"

    h.setup(wf=workflow(run=run))
    aid = h.start()
    with pytest.warns(RuntimeWarning, match="never awaited"):
        h.drain()
        import gc

        gc.collect()
    actor = h.actor(aid)
    assert actor.workflow_state == ports.FAILED
    assert actor.error["name"] == "EntryInProgressError"
    assert "'forgotten'" in actor.error["message"] and "never awaited" in actor.error["message"]
    assert ran == ["first"]
