"""ENGINE-SCENARIOS.md "Try" (try_ blocks), "Rollback" and "Versions and removals"."""

from __future__ import annotations

import pytest

from rivet_workflows.engine.model import ports
from rivet_workflows.engine.model.definitions import Loop, workflow
from rivet_workflows.engine.model.errors import CriticalError, RollbackError


def _raise(exc):
    def body(step):
        raise exc

    return body


# --- try_ ------------------------------------------------------------------------------------------


def test_try_block_catches_a_step_failure(h):
    async def block(b):
        await b.step("charge", _raise(CriticalError("card declined")))

    async def run(ctx):
        result = await ctx.try_("payment", block)
        return [result.ok, result.failure]

    h.setup(wf=workflow(run=run))
    aid = h.start()
    h.drain()
    ok, failure = h.actor(aid).output
    assert ok is False
    assert failure["source"] == "step" and failure["name"] == "charge"
    assert failure["step"]["kind"] == "critical" and failure["step"]["attempts"] == 1
    assert failure["error"]["message"] == "card declined"
    assert "payment/charge" in h.history(aid)


def test_try_block_catches_join_and_race_failures(h):
    async def bad_join(b):
        await b.join("j", {"x": lambda c: c.step("x", _raise(CriticalError("x")))})

    async def bad_race(b):
        await b.race("r", [("x", lambda c: c.step("x", _raise(CriticalError("x"))))])

    async def run(ctx):
        j = await ctx.try_("tj", bad_join)
        r = await ctx.try_("tr", bad_race)
        ok = await ctx.try_("fine", lambda b: b.step("s", lambda s: 1))
        return [
            j.failure["source"],
            j.failure["error"]["name"],
            r.failure["source"],
            r.failure["error"]["name"],
            ok.value,
        ]

    h.setup(wf=workflow(run=run))
    aid = h.start()
    h.drain()
    assert h.actor(aid).output == ["join", "JoinError", "race", "RaceError", 1]


def test_rollback_error_in_a_block_needs_catch(h):
    async def block(b):
        raise RollbackError("undo it")

    async def run(ctx):
        caught = await ctx.try_("with", block, catch=("rollback",))
        assert caught.failure["source"] == "block"
        await ctx.try_("without", block)

    h.setup(wf=workflow(run=run))
    aid = h.start()
    h.drain()
    actor = h.actor(aid)
    assert actor.workflow_state == ports.FAILED and actor.error["name"] == "RollbackError"


def test_removed_try_block_diverges(h):
    async def v1(ctx):
        await ctx.try_("old-block", lambda b: b.step("s", lambda s: 1))
        await ctx.sleep("wait", 60)

    async def v2(ctx):
        await ctx.step("other", lambda s: 1)

    h.setup(wf=workflow(run=v1))
    aid = h.start()
    h.run(aid)
    h.runtime.registry.get("wf").run = workflow(v2)
    h.run(aid)
    actor = h.actor(aid)
    assert actor.error["name"] == "HistoryDivergedError" and "old-block" in actor.error["message"]


# --- rollback --------------------------------------------------------------------------------------


def test_rollback_handlers_run_in_reverse_and_the_workflow_fails(h):
    undone = []

    async def run(ctx):
        await ctx.rollback_checkpoint("start")
        await ctx.step("first", lambda s: "one", rollback=lambda s, out: undone.append(f"first:{out}"))
        await ctx.step("second", lambda s: "two", rollback=lambda s, out: undone.append(f"second:{out}"))
        await ctx.step("third", _raise(CriticalError("boom")))

    h.setup(wf=workflow(run=run))
    aid = h.start()
    h.drain()
    actor = h.actor(aid)
    assert undone == ["second:two", "first:one"]
    assert actor.workflow_state == ports.FAILED and actor.error["message"] == "boom"
    history = h.history(aid)
    assert history["first"].rollback_completed_at is not None
    assert history["second"].rollback_completed_at is not None


def test_rollback_handler_without_checkpoint_fails_without_rollback(h):
    calls = []

    async def run(ctx):
        await ctx.step("s", lambda s: 1, rollback=lambda s, out: calls.append(out))

    h.setup(wf=workflow(run=run))
    aid = h.start()
    h.drain()
    actor = h.actor(aid)
    assert actor.error["name"] == "RollbackCheckpointError"
    assert calls == []
    assert "s" not in h.history(aid)


def test_loop_failure_rolls_back_without_writing_loop_progress(h):
    undone = []

    async def body(ctx, i):
        if i == 1:
            raise RuntimeError("loop failure")
        await ctx.step("tick", lambda s: i)
        return Loop.continue_(i + 1)

    async def run(ctx):
        await ctx.rollback_checkpoint("cp")
        await ctx.step("setup", lambda s: "made", rollback=lambda s, out: undone.append(out))
        await ctx.loop(name="loop", state=0, run=body)

    h.setup(wf=workflow(run=run))
    aid = h.start()
    h.drain()
    assert undone == ["made"]
    assert h.history(aid)["loop"].data["iteration"] == 1
    assert h.actor(aid).error["message"] == "loop failure"


def test_interrupted_rollback_resumes_and_skips_finished_handlers(h):
    undone = []
    crash = [True]

    def undo_second(step, out):
        undone.append("second")

    def undo_first(step, out):
        if crash[0]:
            crash[0] = False
            raise KeyboardInterrupt  # the worker dies mid-rollback
        undone.append("first")

    async def run(ctx):
        await ctx.rollback_checkpoint("cp")
        await ctx.step("first", lambda s: 1, rollback=undo_first)
        await ctx.step("second", lambda s: 2, rollback=undo_second)
        await ctx.step("third", _raise(CriticalError("boom")))

    h.setup(wf=workflow(run=run))
    aid = h.start()
    with pytest.raises(KeyboardInterrupt):
        h.run(aid)
    assert h.actor(aid).workflow_state == ports.ROLLING_BACK
    h.restart(aid)
    assert undone == ["second", "first"]
    actor = h.actor(aid)
    assert actor.workflow_state == ports.FAILED and actor.error["message"] == "boom"


def test_failing_compensation_is_retried_and_reported(h):
    order = []
    events = []
    failures = {"c2": 2}

    def comp(name):
        def undo(step, out):
            order.append(name)
            if failures.get(name):
                failures[name] -= 1
                raise RuntimeError(f"{name} failed")

        return undo

    async def run(ctx):
        await ctx.rollback_checkpoint("cp")
        for i in (1, 2, 3):
            await ctx.step(f"s{i}", lambda s: None, rollback=comp(f"c{i}"), retry_backoff_base=0.001)
        raise RuntimeError("saga failed")

    h.setup(wf=workflow(run=run, on_error=lambda c, e: events.append(e)))
    aid = h.start()
    h.drain()
    assert order == ["c3", "c2", "c2", "c2", "c1"]
    assert [list(e) for e in events] == [["workflow"], ["rollback"], ["rollback"]]
    assert h.actor(aid).error["message"] == "saga failed"


# --- versions and removals -------------------------------------------------------------------------


def test_fresh_instance_gets_latest_version_and_stays_pinned(h):
    seen = []

    async def run(ctx):
        version = await ctx.get_version("gate", 2)
        seen.append(version)
        await ctx.sleep("wait", 60)

    h.setup(wf=workflow(run=run))
    aid = h.start()
    h.run(aid)
    h.run(aid)
    assert seen == [2, 2]


def test_old_instance_resolves_version_one(h):
    async def v1(ctx):
        await ctx.step("work", lambda s: "did-work")
        await ctx.queue.next("wait", "go")

    async def v2(ctx):
        version = await ctx.get_version("gate", 2)
        if version == 1:
            out = await ctx.step("work", lambda s: "did-work")
            await ctx.queue.next("wait", "go")
            return f"old:{out}"
        return "new"

    h.setup(wf=workflow(run=v1))
    aid = h.start()
    h.run(aid)
    h.runtime.registry.get("wf").run = workflow(v2)
    h.send(aid, "go", None)
    h.drain()
    assert h.actor(aid).output == "old:did-work"


def test_gate_after_a_step_in_a_fresh_run_resolves_latest(h):
    async def run(ctx):
        await ctx.step("a", lambda s: 1)
        return await ctx.get_version("gate", 3)

    h.setup(wf=workflow(run=run))
    aid = h.start()
    h.drain()
    assert h.actor(aid).output == 3


def test_removed_entries_of_every_kind_replay(h):
    async def v1(ctx):
        await ctx.get_version("gate", 1)
        await ctx.step("s", lambda s: 1)
        await ctx.loop("l", lambda c: Loop.break_(1))
        await ctx.sleep("nap", 0)
        await ctx.rollback_checkpoint("cp")
        await ctx.join("j", {"a": lambda c: c.step("x", lambda s: 1)})
        await ctx.race("r", [("a", lambda c: c.step("x", lambda s: 1))])
        await ctx.queue.next_batch("q", timeout=0)
        await ctx.queue.next("wait", "go")

    async def v2(ctx):
        for name, kind in [
            ("gate", "version_check"),
            ("s", "step"),
            ("l", "loop"),
            ("nap", "sleep"),
            ("cp", "rollback_checkpoint"),
            ("j", "join"),
            ("r", "race"),
            ("q", "message"),
        ]:
            await ctx.removed(name, kind)
        await ctx.queue.next("wait", "go")
        return "cleaned"

    h.setup(wf=workflow(run=v1))
    aid = h.start()
    h.run(aid)
    h.runtime.registry.get("wf").run = workflow(v2)
    h.send(aid, "go", None)
    h.drain()
    assert h.actor(aid).output == "cleaned"


def test_get_version_on_a_step_diverges(h):
    async def v1(ctx):
        await ctx.step("x", lambda s: 1)
        await ctx.sleep("wait", 60)

    async def v2(ctx):
        await ctx.get_version("x", 2)

    h.setup(wf=workflow(run=v1))
    aid = h.start()
    h.run(aid)
    h.runtime.registry.get("wf").run = workflow(v2)
    h.run(aid)
    assert h.actor(aid).error["name"] == "HistoryDivergedError"


def test_version_cutover_per_loop_iteration(h):
    versions = []

    def make(version_aware):
        async def body(ctx, i):
            if version_aware:
                versions.append((i, await ctx.get_version("gate", 2)))
            await ctx.step("work", lambda s: i)
            if i == 0:
                await ctx.queue.next("go", "go")
            if i >= 1:
                return Loop.break_(i)
            return Loop.continue_(i + 1)

        async def run(ctx):
            return await ctx.loop(name="loop", state=0, run=body)

        return run

    h.setup(wf=workflow(run=make(False)))
    aid = h.start()
    h.run(aid)  # iteration 0 ran its step under v1 and waits
    h.runtime.registry.get("wf").run = workflow(make(True))
    h.send(aid, "go", None)
    h.drain()
    assert h.actor(aid).output == 1
    assert versions == [(0, 1), (1, 2)]


def test_saga_compensation_failing_twice_resumes_after_a_crash_without_rerunning_finished_ones(h):
    order = []
    events = []
    failures = {"c2": 2}
    crash = [True]

    def comp(name):
        def undo(step, out):
            if name == "c1" and crash[0]:
                crash[0] = False
                raise KeyboardInterrupt  # the worker dies when c1 starts
            order.append(name)
            if failures.get(name):
                failures[name] -= 1
                raise RuntimeError(f"{name} failed")

        return undo

    async def run(ctx):
        await ctx.rollback_checkpoint("cp")
        for i in (1, 2, 3):
            await ctx.step(f"s{i}", lambda s: None, rollback=comp(f"c{i}"), retry_backoff_base=0.001)
        raise RuntimeError("saga failed")

    h.setup(wf=workflow(run=run, on_error=lambda c, e: events.append(e)))
    aid = h.start()
    with pytest.raises(KeyboardInterrupt):
        h.run(aid)
    assert h.actor(aid).workflow_state == ports.ROLLING_BACK
    h.restart(aid)
    h.drain()
    assert order == ["c3", "c2", "c2", "c2", "c1"]  # c3 and c2 finished before the crash: not run again
    assert [next(iter(e)) for e in events] == ["workflow", "rollback", "rollback"]
    actor = h.actor(aid)
    assert actor.workflow_state == ports.FAILED and actor.error["message"] == "saga failed"
    assert all(h.history(aid)[f"s{i}"].rollback_completed_at is not None for i in (1, 2, 3))


def test_handlers_of_join_branches_and_race_winners_finished_in_earlier_runs_roll_back(h):
    undone = []

    def branch(label):
        async def run_branch(c):
            await c.rollback_checkpoint("cp")
            return await c.step("book", lambda s: label, rollback=lambda s, out: undone.append(out))

        return run_branch

    async def run(ctx):
        await ctx.rollback_checkpoint("cp")
        await ctx.step("first", lambda s: "first", rollback=lambda s, out: undone.append(out))
        await ctx.join("j", {"hotel": branch("hotel"), "car": branch("car")})
        await ctx.race("r", [("flight", branch("flight"))])
        await ctx.queue.next("wait", "go")  # a later run fails: the branches are not re-run then
        await ctx.step("pay", _raise(CriticalError("declined")))

    h.setup(wf=workflow(run=run))
    aid = h.start()
    h.drain()
    assert h.actor(aid).workflow_state == ports.SLEEPING
    h.send(aid, "go", None)
    h.drain()
    actor = h.actor(aid)
    assert actor.workflow_state == ports.FAILED and actor.error["message"] == "declined"
    assert undone[0] == "flight" and sorted(undone[1:3]) == ["car", "hotel"] and undone[3] == "first"
    assert len(undone) == 4


def test_async_rollback_handler_gets_a_context_and_the_output(h):
    async def release(rb, out):
        rb.state["released"] = [*rb.state.get("released", []), out]

    async def run(ctx):
        await ctx.rollback_checkpoint("cp")
        await ctx.step("reserve", lambda s: {"seat": "12A"}, rollback=release)
        await ctx.step("pay", _raise(RollbackError("refused")))

    h.setup(wf=workflow(run=run, state={}))
    aid = h.start()
    h.drain()
    actor = h.actor(aid)
    assert actor.workflow_state == ports.FAILED and actor.error["name"] == "RollbackError"
    assert actor.state == {"released": [{"seat": "12A"}]}


def test_resumed_rollback_starts_no_forward_step(h):
    runs = []
    ran = []
    crash = [True]

    def undo(step, out):
        if crash[0]:
            crash[0] = False
            raise KeyboardInterrupt
        ran.append("undo")

    async def run(ctx):
        runs.append(1)
        await ctx.rollback_checkpoint("cp")
        await ctx.step("a", lambda s: 1, rollback=undo)
        if len(runs) == 1:
            raise RuntimeError("first run fails")
        await ctx.step("later", lambda s: ran.append("later"))  # reached only by the rollback replay
        return "done"

    h.setup(wf=workflow(run=run))
    aid = h.start()
    with pytest.raises(KeyboardInterrupt):
        h.run(aid)
    h.restart(aid)
    actor = h.actor(aid)
    assert ran == ["undo"]
    assert "later" not in h.history(aid)
    assert actor.workflow_state == ports.FAILED and actor.error["message"] == "first run fails"


def test_removed_with_the_wrong_kind_diverges(h):
    async def v1(ctx):
        await ctx.step("s", lambda s: 1)
        await ctx.queue.next("wait", "go")

    async def v2(ctx):
        await ctx.removed("s", "loop")
        await ctx.queue.next("wait", "go")

    h.setup(wf=workflow(run=v1))
    aid = h.start()
    h.run(aid)
    h.runtime.registry.get("wf").run = workflow(v2)
    h.send(aid, "go", None)
    h.drain()
    actor = h.actor(aid)
    assert actor.error["name"] == "HistoryDivergedError" and "found step" in actor.error["message"]


def test_removed_message_wait_covers_its_received_messages(h):
    async def v1(ctx):
        msg = await ctx.queue.next("first", "in")
        await ctx.queue.next("wait", "go")
        return msg.body

    async def v2(ctx):
        await ctx.removed("first", "message")
        await ctx.queue.next("wait", "go")
        return "migrated"

    h.setup(wf=workflow(run=v1))
    aid = h.start()
    h.send(aid, "in", "hello")
    h.drain()
    assert {"first:count", "first:0"} <= set(h.history(aid))
    h.runtime.registry.get("wf").run = workflow(v2)
    h.send(aid, "go", None)
    h.drain()
    assert h.actor(aid).output == "migrated"


@pytest.mark.parametrize("latest", [0, -1, True, "2", 1.5])
def test_get_version_needs_an_int_at_least_one(h, latest):
    async def run(ctx):
        await ctx.get_version("gate", latest)

    h.setup(wf=workflow(run=run))
    aid = h.start()
    h.drain()
    actor = h.actor(aid)
    assert actor.workflow_state == ports.FAILED and actor.error["name"] == "ValueError"


def test_try_step_timeout_kind_and_what_try_never_catches(h):
    import asyncio

    seen = []

    async def slow(step):
        await asyncio.sleep(0.5)

    async def sleeping_block(b):
        await b.sleep("nap", 60)  # a durable wait inside a try block is not a failure

    async def run(ctx):
        timed_out = await ctx.try_step("slow", slow, timeout=0.01)
        seen.append(timed_out.failure)
        unchecked = await ctx.try_(
            "unchecked", lambda b: b.step("s", lambda s: 1, rollback=lambda s, o: None)
        )
        return [timed_out.failure, unchecked.ok]

    async def waits(ctx):
        await ctx.try_("block", sleeping_block)

    h.setup(wf=workflow(run=run), sleeper=workflow(run=waits))
    aid = h.start()
    h.drain()
    actor = h.actor(aid)
    assert actor.workflow_state == ports.FAILED
    assert actor.error["name"] == "RollbackCheckpointError"  # checkpoint errors are never caught
    assert seen[0]["kind"] == "timeout" and seen[0]["step_name"] == "slow" and seen[0]["attempts"] == 1
    assert seen[0]["error"]["name"] == "TimeoutError"

    sleeper = h.start("sleeper")
    h.run(sleeper)
    assert h.actor(sleeper).workflow_state == ports.SLEEPING
    assert "block/nap" in h.history(sleeper)


def test_try_block_does_not_catch_a_queue_timeout_or_plain_errors_by_default(h):
    async def run(ctx):
        plain = await ctx.try_("plain", lambda b: b.queue.next("wait", "never", timeout=0))
        return plain.ok

    h.setup(wf=workflow(run=run))
    aid = h.start()
    h.drain()
    actor = h.actor(aid)
    assert actor.workflow_state == ports.FAILED and actor.error["name"] == "QueueWaitTimeoutError"
