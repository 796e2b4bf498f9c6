"""ENGINE-SCENARIOS.md "Join", "Race" and "Try" (try_step part)."""

from __future__ import annotations

import asyncio
import time

import pytest

from rivet_workflows.engine.model import ports
from rivet_workflows.engine.model.definitions import Loop, workflow
from rivet_workflows.engine.model.errors import CriticalError, JoinError, RollbackError


def test_join_branches_interleave(h):
    events = []
    started = {"a": asyncio.Event(), "b": asyncio.Event()}

    def branch(name):
        other = "b" if name == "a" else "a"

        async def body(step):
            # Each body waits until the other has started: branches run one after the other would time out
            # here (a fixed sleep instead let a loaded machine finish one body before the other began).
            events.append(f"{name}-start")
            started[name].set()
            await asyncio.wait_for(started[other].wait(), timeout=10)
            events.append(f"{name}-end")
            return 1 if name == "a" else 2

        async def run(ctx):
            return await ctx.step("work", body)

        return run

    async def run(ctx):
        out = await ctx.join("both", {"a": branch("a"), "b": {"run": branch("b")}})
        return out["a"] + out["b"]

    h.setup(wf=workflow(run=run))
    aid = h.start()
    h.drain()
    assert h.actor(aid).output == 3
    assert events.index("a-start") < events.index("b-end")
    assert events.index("b-start") < events.index("a-end")
    assert set(h.history(aid)) == {"both", "both/a/work", "both/b/work"}


def test_join_failure_lets_other_branches_finish_and_repeats(h):
    finished = []

    async def bad(ctx):
        raise RuntimeError("bad branch")

    async def good(ctx):
        async def body(step):
            await asyncio.sleep(0.02)
            finished.append(1)
            return "ok"

        return await ctx.step("slow", body)

    raised = []

    async def run(ctx):
        try:
            await ctx.join("j", {"bad": bad, "good": good})
        except JoinError as exc:
            raised.append(exc)
        await ctx.sleep("pause", 60)

    h.setup(wf=workflow(run=run))
    aid = h.start()
    h.run(aid)
    h.run(aid)
    assert len(raised) == 2
    assert list(raised[0].errors) == ["bad"] and list(raised[1].errors) == ["bad"]
    assert raised[0].errors["bad"]["message"] == "bad branch"
    assert finished == [1]


def test_join_failure_fails_the_workflow(h):
    async def bad(ctx):
        await ctx.step("explode", lambda s: (_ for _ in ()).throw(CriticalError("nope")))

    async def run(ctx):
        return await ctx.join("j", {"bad": bad, "ok": lambda c: c.step("fine", lambda s: 1)})

    h.setup(wf=workflow(run=run))
    aid = h.start()
    h.drain()
    actor = h.actor(aid)
    assert actor.workflow_state == ports.FAILED
    assert actor.error["name"] == "JoinError"
    assert h.history(aid)["j/ok/fine"].status == ports.ENTRY_COMPLETED


def test_join_replay_does_not_rerun_branches_and_nests(h):
    calls = []

    async def leaf(ctx):
        return await ctx.step("leaf", lambda s: calls.append(1) or 1)

    async def nested(ctx):
        out = await ctx.join("inner", {"x": leaf, "y": leaf})
        return out["x"] + out["y"]

    async def racer(ctx):
        async def slow(c):
            await c.sleep("slow", 5)
            return "slow"

        result = await ctx.race(
            "r", [("plain", lambda c: c.step("plain", lambda s: "plain")), ("slow", slow)]
        )
        return f"winner:{result.value}"

    async def run(ctx):
        out = await ctx.join("outer", {"a": leaf, "b": nested, "c": leaf, "d": racer})
        await ctx.sleep("pause", 60)
        return out

    h.setup(wf=workflow(run=run))
    aid = h.start()
    h.run(aid)
    h.run(aid)
    assert len(calls) == 4
    out = h.history(aid)["outer"].data["branches"]
    assert out["a"]["output"] + out["b"]["output"] + out["c"]["output"] == 4
    assert out["d"]["output"] == "winner:plain"


def test_join_branch_retry_sleeps_then_completes(h):
    attempts = []

    def flaky(step):
        attempts.append(step.attempt)
        if step.attempt == 1:
            raise RuntimeError("once")
        return "a"

    async def run(ctx):
        out = await ctx.join(
            "j",
            {
                # a backoff long enough that branch b's commit cannot outlast it on a loaded machine
                # (the join would then find the deadline passed and retry at once, which is right too)
                "a": lambda c: c.step("flaky", flaky, max_retries=1, retry_backoff_base=0.75),  # 1.5 s
                "b": lambda c: c.step("b", lambda s: "b"),
            },
        )
        return out["a"] + out["b"]

    h.setup(wf=workflow(run=run))
    aid = h.start()
    h.run(aid)
    assert h.actor(aid).workflow_state == ports.SLEEPING
    h.drain(timeout=15)
    assert h.actor(aid).output == "ab"
    assert h.history(aid)["j/a/flaky"].attempts == 2


def test_join_waits_merge_to_earliest_deadline_and_all_queues(h):
    async def run(ctx):
        return await ctx.join(
            "j",
            {
                "sleep": lambda c: c.sleep("nap", 30),
                "msg": lambda c: c.queue.next("in", "inbox"),
                "short": lambda c: c.sleep("nap", 10),
            },
        )

    h.setup(wf=workflow(run=run))
    aid = h.start()
    h.run(aid)
    actor = h.actor(aid)
    assert actor.waiting_for == ["inbox"]
    assert actor.wake_at == h.history(aid)["j/short/nap"].data["deadline"]


# --- race ------------------------------------------------------------------------------------------


def test_race_fast_branch_wins_and_loser_is_cancelled(h):
    cancelled = []

    async def slow_body(step):
        try:
            await asyncio.sleep(5)
        except asyncio.CancelledError:
            cancelled.append(1)
            raise
        return "slow"

    async def run(ctx):
        result = await ctx.race(
            "r",
            [
                {"name": "slow", "run": lambda c: c.step("slow", slow_body)},
                ("fast", lambda c: c.step("fast", lambda s: "fast")),
            ],
        )
        return [result.winner, result.value]

    h.setup(wf=workflow(run=run))
    aid = h.start()
    h.drain()
    assert h.actor(aid).output == ["fast", "fast"]
    assert cancelled == [1]
    history = h.history(aid)
    assert "r/slow/slow" not in history
    assert history["r"].data["winner"] == "fast"


def test_race_all_fail(h):
    def boom(step):
        raise CriticalError("boom")

    async def run(ctx):
        return await ctx.race("r", [("a", lambda c: c.step("a", boom)), ("b", lambda c: c.step("b", boom))])

    h.setup(wf=workflow(run=run))
    aid = h.start()
    h.drain()
    assert h.actor(aid).error["name"] == "RaceError"


def test_race_with_nested_join_and_race(h):
    async def slow(c):
        await c.sleep("z", 30)
        return "slow"

    async def with_join(c):
        out = await c.join(
            "j", {"x": lambda b: b.step("x", lambda s: 1), "y": lambda b: b.step("y", lambda s: 2)}
        )
        return out["x"] + out["y"]

    async def with_race(c):
        inner = await c.race(
            "inner", [("nested-fast", lambda b: b.step("f", lambda s: "nested-fast")), ("s", slow)]
        )
        return inner.value

    async def run(ctx):
        a = await ctx.race("r1", [("fast", with_join), ("slow", slow)])
        b = await ctx.race("r2", [("fast", with_race), ("slow", slow)])
        return [a.winner, a.value, b.value]

    h.setup(wf=workflow(run=run))
    aid = h.start()
    h.drain()
    assert h.actor(aid).output == ["fast", 3, "nested-fast"]
    assert h.actor(aid).wake_at is None


def test_race_flaky_branch_against_sleep(h):
    def flaky(step):
        if step.attempt == 1:
            raise RuntimeError("flaky")
        return "flaky"

    async def sleeper(c):
        await c.sleep("nap", 8.0)
        return "sleep"

    async def run(ctx):
        # backoff 1 s: long enough that the sleeper branch's commit cannot outlast it on a loaded machine
        result = await ctx.race(
            "r", [("flaky", lambda c: c.step("s", flaky, retry_backoff_base=0.5)), ("sleep", sleeper)]
        )
        return [result.winner, result.value]

    h.setup(wf=workflow(run=run))
    aid = h.start()
    h.run(aid)
    assert h.actor(aid).workflow_state == ports.SLEEPING
    h.drain(timeout=15)
    assert h.actor(aid).output == ["flaky", "flaky"]
    history = h.history(aid)
    assert history["r/flaky/s"].attempts == 2
    assert not any(k.startswith("r/sleep") for k in history)


def test_race_winner_is_never_redecided(h):
    runs = []

    async def run(ctx):
        result = await ctx.race("r", [("a", lambda c: c.step("a", lambda s: runs.append(1) or "a"))])
        await ctx.sleep("pause", 60)
        return result.winner

    h.setup(wf=workflow(run=run))
    aid = h.start()
    h.run(aid)
    h.run(aid)
    assert runs == [1]


# --- try_step --------------------------------------------------------------------------------------


def test_try_step_critical_failure_shape(h):
    def stop(step):
        raise CriticalError("stop")

    async def run(ctx):
        result = await ctx.try_step("charge", stop)
        return [result.ok, result.failure]

    h.setup(wf=workflow(run=run))
    aid = h.start()
    h.drain()
    actor = h.actor(aid)
    assert actor.workflow_state == ports.COMPLETED
    ok, failure = actor.output
    assert ok is False
    assert failure["kind"] == "critical" and failure["step_name"] == "charge" and failure["attempts"] == 1
    assert failure["error"]["name"] == "CriticalError" and failure["error"]["message"] == "stop"


def test_try_step_exhausted(h):
    def fail(step):
        raise RuntimeError("always")

    async def run(ctx):
        result = await ctx.try_step("s", fail, max_retries=1, retry_backoff_base=0.001)
        return result.failure

    h.setup(wf=workflow(run=run))
    aid = h.start()
    h.drain()
    failure = h.actor(aid).output
    assert failure["kind"] == "exhausted" and failure["attempts"] == 2


def test_try_step_rollback_only_with_catch(h):
    def rb(step):
        raise RollbackError("undo")

    async def run(ctx):
        caught = await ctx.try_step("caught", rb, catch=("rollback",))
        assert caught.failure["kind"] == "rollback"
        await ctx.try_step("uncaught", rb)

    h.setup(wf=workflow(run=run))
    aid = h.start()
    h.drain()
    actor = h.actor(aid)
    assert actor.workflow_state == ports.FAILED
    assert actor.error["name"] == "RollbackError"


def test_try_step_success(h):
    async def run(ctx):
        result = await ctx.try_step("s", lambda s: 5)
        return [result.ok, result.value, result.failure]

    h.setup(wf=workflow(run=run))
    aid = h.start()
    h.drain()
    assert h.actor(aid).output == [True, 5, None]


def test_command_loop_with_nested_loops_join_and_race(h):
    async def process_item(ctx, state):
        items, i, out = state
        if i >= len(items):
            return Loop.break_(out)
        item = items[i]
        joined = await ctx.join(
            "per-item",
            {
                "upper": lambda c: c.step("u", lambda s: item),
                "len": lambda c: c.step("l", lambda s: len(item)),
            },
        )

        async def slow(c):
            await c.sleep("slow", 30)
            return None

        raced = await ctx.race(
            "pick", [("fast", lambda c: c.step("f", lambda s: joined["upper"])), ("slow", slow)]
        )
        return Loop.continue_([items, i + 1, out + [raced.value]])

    async def command(ctx, processed):
        msg = await ctx.queue.next("cmd", completable=True)
        out = await ctx.loop(name="items", state=[msg.body, 0, []], run=process_item)
        msg.complete(out)
        return Loop.continue_(processed + out)

    async def run(ctx):
        return await ctx.loop(name="commands", state=[], run=command)

    h.setup(wf=workflow(run=run))
    aid = h.start()
    h.send(aid, "cmd", ["a", "b"], completable=True)
    h.drain()
    actor = h.actor(aid)
    assert actor.workflow_state == ports.SLEEPING
    loop_state = h.history(aid)["commands"].data["state"]
    assert loop_state == ["a", "b"]
    h.send(aid, "cmd", ["c"], completable=True)
    h.drain()
    assert h.history(aid)["commands"].data["state"] == ["a", "b", "c"]


def test_handle_send_wakes_the_workflow_and_reads_output(h):
    async def run(ctx):
        msg = await ctx.queue.next("wait-approval", "approval")
        return msg.body["ok"]

    h.setup(wf=workflow(run=run))
    client = h.runtime.client()
    handle = client.wf.get_or_create("order-1")
    h.drain()
    handle.send("approval", {"ok": True})
    h.drain()
    assert h.actor(handle.actor_id).output is True


def test_wide_join_side_effects_happen_once_across_a_crash(h):
    effects = []
    crash = [True]

    def after(step):
        if crash[0]:
            crash[0] = False
            raise KeyboardInterrupt  # the worker dies after the join
        return "after"

    def branch(i):
        return lambda c: c.step("effect", lambda s: effects.append(i) or i)

    async def run(ctx):
        out = await ctx.join("fan", {f"b{i}": branch(i) for i in range(200)})
        await ctx.step("after", after)
        return sum(out.values())

    h.setup(wf=workflow(run=run))
    aid = h.start()
    with pytest.raises(KeyboardInterrupt):
        h.run(aid)
    h.restart(aid)  # the interrupted "after" attempt counts as failed: it is retried after its backoff
    h.drain()
    assert h.actor(aid).output == sum(range(200))
    assert sorted(effects) == list(range(200))


def test_race_winner_is_read_from_history_after_a_crash(h):
    ran = []
    crash = [True]

    def after(step):
        if crash[0]:
            crash[0] = False
            raise KeyboardInterrupt
        return None

    async def slow(c):
        await c.sleep("slow", 30)
        ran.append("slow")
        return "slow"

    async def run(ctx):
        result = await ctx.race(
            "r", [("fast", lambda c: c.step("f", lambda s: ran.append("fast") or "fast")), ("slow", slow)]
        )
        await ctx.step("after", after)
        return result.winner

    h.setup(wf=workflow(run=run))
    aid = h.start()
    with pytest.raises(KeyboardInterrupt):
        h.run(aid)
    h.restart(aid)  # the interrupted "after" attempt counts as failed: it is retried after its backoff
    h.drain()
    assert h.actor(aid).output == "fast"
    assert ran == ["fast"]


def test_message_arriving_after_a_race_stays_for_the_next_wait(h):
    async def run(ctx):
        result = await ctx.race(
            "r",
            [
                ("fast", lambda c: c.step("f", lambda s: "fast")),
                ("msg", lambda c: c.queue.next("m", "inbox")),
            ],
        )
        msg = await ctx.queue.next("later", "inbox")
        return [result.winner, msg.body]

    h.setup(wf=workflow(run=run))
    aid = h.start()
    h.drain()
    h.send(aid, "inbox", "kept")
    h.drain()
    assert h.actor(aid).output == ["fast", "kept"]


def test_recover_after_a_join_failure_reruns_only_the_failed_branch(h):
    calls = {"ok": 0, "flaky": 0}
    broken = [True]

    def ok(step):
        calls["ok"] += 1
        return 1

    def flaky(step):
        calls["flaky"] += 1
        if broken[0]:
            raise CriticalError("service down")
        return 2

    async def run(ctx):
        out = await ctx.join(
            "fan", {"ok": lambda c: c.step("ok", ok), "flaky": lambda c: c.step("flaky", flaky)}
        )
        return out["ok"] + out["flaky"]

    h.setup(wf=workflow(run=run))
    handle = h.runtime.client().wf.get_or_create("k")
    h.drain()
    actor = h.actor(handle.actor_id)
    assert actor.workflow_state == ports.FAILED and actor.error["name"] == "JoinError"
    broken[0] = False
    assert handle.recover() is True
    h.drain()
    actor = h.actor(handle.actor_id)
    assert actor.workflow_state == ports.COMPLETED and actor.output == 3
    assert calls == {"ok": 1, "flaky": 2}
    assert h.history(handle.actor_id)["fan/flaky/flaky"].attempts == 1  # recover reset the attempts


def test_race_timeout_branch_wins_while_the_other_branch_is_still_in_its_step(h):
    """Spec "Timeout and fallback": a durable sleep races a slow step. The run cannot unwind while the step
    body runs, so it waits beside it; the sleep's deadline passes first and the timeout branch wins, even
    when the run was not allowed to hold short waits in memory (``h.run`` unwinds every wait)."""

    def slow(step):
        time.sleep(1.5)
        return "primary"

    async def timeout_branch(c):
        await c.sleep("primary-timeout", 0.2)
        return "timeout"

    async def run(ctx):
        result = await ctx.race(
            "primary-vs-timeout",
            [("primary", lambda c: c.step("call-primary", slow)), ("timeout", timeout_branch)],
        )
        return result.winner

    h.setup(wf=workflow(run=run))
    aid = h.start()
    h.run(aid)
    assert h.actor(aid).workflow_state == ports.COMPLETED
    assert h.actor(aid).output == "timeout"
    assert not any(k.startswith("primary-vs-timeout/primary") for k in h.history(aid))


def test_join_branch_sleeping_past_the_running_step_still_unwinds_after_it(h):
    """The wait beside a running step is bounded by that step: when it ends first, a long sleep unwinds."""

    async def run(ctx):
        return await ctx.join(
            "j",
            {
                "slow": lambda c: c.step("s", lambda s: time.sleep(0.3) or "done"),
                "nap": lambda c: c.sleep("n", 60),
            },
        )

    h.setup(wf=workflow(run=run))
    aid = h.start()
    h.run(aid)
    actor = h.actor(aid)
    assert actor.workflow_state == ports.SLEEPING
    assert actor.wake_at == h.history(aid)["j/nap/n"].data["deadline"]
    assert h.history(aid)["j/slow/s"].data["output"] == "done"
