"""Golden cases for the ENGINE-SCENARIOS.md groups (the contract tests in tests/contract port them all):
a finished or in-flight history of the interesting primitives of each group.

Each case's ``definitions()`` builds the workflow fresh (what the golden replays on) and ``record(d)``
drives it on a ``Driver`` and returns the actor to export. Crashes are simulated as in the contract
tests: a body or handler raises ``KeyboardInterrupt`` once, which kills the run without another write.
"""

from __future__ import annotations

import asyncio
import uuid
from datetime import date, timedelta
from decimal import Decimal
from typing import Any

import pytest

from rivet_workflows import CriticalError, Loop, RollbackError, WorkflowFinishedError, actor, workflow

from .driver import EPOCH, Case, Driver


def _raise(exc: BaseException) -> Any:
    def body(step: Any) -> Any:
        raise exc

    return body


def _fail_first(times: int, message: str = "Transient failure", result: Any = "success") -> Any:
    """A step body failing its first ``times`` attempts (by ``step.attempt``: deterministic on replay)."""

    def body(step: Any) -> Any:
        if step.attempt <= times:
            raise RuntimeError(message)
        return result

    return body


def _crash_once() -> Any:
    """A callable that raises KeyboardInterrupt (the worker dies) the first time it is called."""
    crashed: list[int] = []

    def crash() -> None:
        if not crashed:
            crashed.append(1)
            raise KeyboardInterrupt

    return crash


def _record_events(c: Any, event: dict) -> None:
    """An on_error hook that keeps every event in the actor's state (so the golden shows them)."""
    c.state.setdefault("events", []).append(event)


def _start_settle(d: Driver, **kwargs: Any) -> Any:
    handle = d.start("wf", **kwargs)
    d.settle()
    return handle


def _until_finished(d: Driver, handle: Any) -> Any:
    d.until(lambda: d.record(handle).workflow_state in ("completed", "failed", "cancelled"))
    return handle


def _survive_crash(d: Driver) -> None:
    """``settle``, swallowing the one simulated crash (the run dies with its lease)."""
    try:
        d.settle()
    except KeyboardInterrupt:
        pass


# --- Steps ---------------------------------------------------------------------------------------------


def steps_sequential() -> dict:
    async def run(ctx: Any) -> int:
        a = await ctx.step("a", lambda s: 1)
        b = await ctx.step("b", lambda s: 2)
        c = await ctx.step("c", lambda s: 3)
        return a + b + c

    return {"wf": workflow(run=run)}


def steps_retry_success() -> dict:
    async def run(ctx: Any) -> Any:
        return await ctx.step("flaky-step", _fail_first(2), max_retries=3, retry_backoff_base=0.25)

    return {"wf": workflow(run=run, state={"events": []}, on_error=_record_events)}


def steps_backoff_sleeping() -> dict:
    async def run(ctx: Any) -> Any:
        return await ctx.step("flaky", _fail_first(100), retry_backoff_base=0.05, retry_backoff_max=0.1)

    return {"wf": workflow(run=run)}


def steps_exhausted() -> dict:
    async def run(ctx: Any) -> Any:
        await ctx.step("ok", lambda s: "fine")
        return await ctx.step("always", _raise(RuntimeError("boom")), max_retries=2, retry_backoff_base=0.01)

    return {"wf": workflow(run=run, state={"events": []}, on_error=_record_events)}


def steps_critical() -> dict:
    async def run(ctx: Any) -> Any:
        return await ctx.step("charge", _raise(CriticalError("card declined")), max_retries=5)

    return {"wf": workflow(run=run)}


def steps_rollback_error() -> dict:
    async def run(ctx: Any) -> Any:
        return await ctx.step("undoable", _raise(RollbackError("cannot go on")), max_retries=5)

    return {"wf": workflow(run=run)}


def steps_workflow_error() -> dict:
    async def run(ctx: Any) -> Any:
        await ctx.step("before", lambda s: 1)
        raise RuntimeError("workflow failed")

    return {"wf": workflow(run=run, state={"events": []}, on_error=_record_events)}


def steps_ephemeral() -> dict:
    async def run(ctx: Any) -> list:
        a = await ctx.step(name="e1", run=lambda s: "one", ephemeral=True)
        b = await ctx.step(name="e2", run=lambda s: "two", ephemeral=True)
        c = await ctx.step("durable", lambda s: "three")
        return [a, b, c]

    return {"wf": workflow(run=run)}


def steps_values() -> dict:
    def rich(step: Any) -> dict:
        step.state["seen"] = {"when": EPOCH, "amount": Decimal("12.50")}
        return {
            "when": EPOCH,
            "day": date(2026, 1, 2),
            "gap": timedelta(seconds=90),
            "amount": Decimal("12.50"),
            "uuid": uuid.UUID("12345678-1234-5678-1234-567812345678"),
            "raw": b"\x00\xffbytes",
            "pair": (1, "two"),
            "tags": {"b", "a"},
            "nested": [{"ok": True, "none": None}],
        }

    async def run(ctx: Any) -> Any:
        value = await ctx.step("rich", rich)
        return await ctx.step("echo", lambda s: value)

    return {"wf": workflow(run=run, state={"seen": None})}


def steps_running_after_crash() -> dict:
    crash = _crash_once()

    def slow(step: Any) -> str:
        crash()  # the worker dies in the middle of the body
        return "done"

    async def run(ctx: Any) -> Any:
        await ctx.step("prepare", lambda s: "ready")
        return await ctx.step("slow", slow)

    return {"wf": workflow(run=run)}


def steps_state_changes() -> dict:
    def count(step: Any) -> int:
        step.state["attempts_seen"].append(step.attempt)
        if step.attempt < 2:
            raise RuntimeError("not yet")
        return len(step.state["attempts_seen"])

    async def run(ctx: Any) -> Any:
        await ctx.step("init", lambda s: s.state.update(ready=True))
        return await ctx.step("count", count, retry_backoff_base=0.01)

    return {"wf": workflow(run=run, state={"ready": False, "attempts_seen": []})}


# --- Loops ---------------------------------------------------------------------------------------------


def loops_count() -> dict:
    async def body(ctx: Any, count: int) -> Any:
        await ctx.step(f"step-{count}", lambda s: count)
        if count + 1 >= 3:
            return Loop.break_(count + 1)
        return Loop.continue_(count + 1)

    async def run(ctx: Any) -> Any:
        return await ctx.loop(name="loop", state=0, run=body)

    return {"wf": workflow(run=run)}


def loops_pruned() -> dict:
    async def body(ctx: Any, count: int) -> Any:
        await ctx.step("tick", lambda s: count)
        if count >= 8:
            return Loop.break_(count)
        return Loop.continue_(count + 1)

    async def run(ctx: Any) -> Any:
        return await ctx.loop(name="loop", state=0, run=body, history_prune_interval=3)

    return {"wf": workflow(run=run)}


def loops_stateless() -> dict:
    async def body(ctx: Any) -> Any:
        n = await ctx.step("n", lambda s: s.state.update(n=s.state["n"] + 1) or s.state["n"])
        if n == 1:
            return Loop.continue_()
        if n == 2:
            return None
        return Loop.break_("done")

    async def run(ctx: Any) -> Any:
        return await ctx.loop("loop", body)

    return {"wf": workflow(run=run, state={"n": 0})}


def loops_command() -> dict:
    async def process_item(ctx: Any, state: list) -> Any:
        items, i, out = state
        if i >= len(items):
            return Loop.break_(out)
        item = items[i]
        joined = await ctx.join(
            "per-item",
            {
                "upper": lambda c: c.step("u", lambda s: item.upper()),
                "len": lambda c: c.step("l", lambda s: len(item)),
            },
        )

        async def slow(c: Any) -> None:
            await c.sleep("slow", 30)

        raced = await ctx.race(
            "pick", [("fast", lambda c: c.step("f", lambda s: joined["upper"])), ("slow", slow)]
        )
        return Loop.continue_([items, i + 1, out + [raced.value]])

    async def command(ctx: Any, processed: list) -> Any:
        msg = await ctx.queue.next("cmd", completable=True)
        out = await ctx.loop(name="items", state=[msg.body, 0, []], run=process_item)
        msg.complete(out)
        return Loop.continue_(processed + out)

    async def run(ctx: Any) -> Any:
        return await ctx.loop(name="commands", state=[], run=command)

    return {"wf": workflow(run=run)}


def loops_failure() -> dict:
    async def body(ctx: Any, i: int) -> Any:
        await ctx.step("tick", lambda s: i)
        if i == 2:
            raise RuntimeError("loop failure")
        return Loop.continue_(i + 1)

    async def run(ctx: Any) -> Any:
        return await ctx.loop(name="loop", state=0, run=body)

    return {"wf": workflow(run=run)}


def loops_resumed_after_crash() -> dict:
    crash = _crash_once()

    async def body(ctx: Any, count: int) -> Any:
        await ctx.step("tick", lambda s: count)
        if count == 3:
            crash()
        if count >= 5:
            return Loop.break_(count)
        return Loop.continue_(count + 1)

    async def run(ctx: Any) -> Any:
        return await ctx.loop(name="loop", state=0, run=body, history_prune_interval=2)

    return {"wf": workflow(run=run)}


def _record_resumed_loop(d: Driver) -> Any:
    handle = d.start("wf")
    _survive_crash(d)
    d.advance(d.runtime.settings.lease_seconds)  # the dead run's lease expires; the actor is due again
    return _until_finished(d, handle)


# --- Queue ---------------------------------------------------------------------------------------------


def queue_waiting() -> dict:
    async def run(ctx: Any) -> Any:
        await ctx.step("before", lambda s: "ready")
        msg = await ctx.queue.next("wait", "my-message")
        return msg.body

    return {"wf": workflow(run=run)}


def queue_names() -> dict:
    async def run(ctx: Any) -> Any:
        msg = await ctx.queue.next("wait", names=["first", "second"])
        return {"name": msg.name, "body": msg.body}

    return {"wf": workflow(run=run)}


def _record_queue_names(d: Driver) -> Any:
    handle = _start_settle(d)
    handle.send("second", "payload")
    d.settle()
    return handle


def queue_completable() -> dict:
    async def run(ctx: Any) -> Any:
        first = await ctx.queue.next("first", "job", completable=True)
        first.complete({"ok": True})
        second = await ctx.queue.next("second", "job", completable=True)
        await ctx.step("handle", lambda s: second.complete({"handled": second.body}))
        return [first.body, second.body]

    return {"wf": workflow(run=run)}


def _record_queue_completable(d: Driver) -> Any:
    handle = d.start("wf")
    d.store.send(handle.actor_id, "job", "one", True)
    d.store.send(handle.actor_id, "job", "two", True)
    d.settle()
    return handle


def queue_batch_waiting() -> dict:
    async def run(ctx: Any) -> Any:
        first = await ctx.queue.next("first", "first")
        second = await ctx.queue.next_batch("second", "second", count=2, timeout=5)
        return {"first": first.body, "second": [m.body for m in second]}

    return {"wf": workflow(run=run)}


def _record_queue_batch_waiting(d: Driver) -> Any:
    handle = d.start("wf")
    handle.send("first", "first")
    d.settle()  # first taken; waits on "second" with a 5 s deadline
    return handle


def queue_drain_loop() -> dict:
    async def body(ctx: Any, seen: list) -> Any:
        batch = await ctx.queue.next_batch("drain", count=2, timeout=0.05)
        if not batch:
            return Loop.break_(seen)
        return Loop.continue_(seen + [m.body for m in batch])

    async def run(ctx: Any) -> Any:
        return await ctx.loop(name="loop", state=[], run=body)

    return {"wf": workflow(run=run)}


def _record_queue_drain_loop(d: Driver) -> Any:
    handle = d.start("wf")
    for body in ("first", "second", "third"):
        handle.send("q", body)
    return _until_finished(d, handle)


def queue_step_send() -> dict:
    async def run(ctx: Any) -> Any:
        await ctx.step("send", lambda s: s.queue.send("self", {"n": 1}))
        msg = await ctx.queue.next("wait", "self")
        return msg.body

    return {"wf": workflow(run=run)}


# --- Sleep ---------------------------------------------------------------------------------------------


def sleep_long() -> dict:
    async def run(ctx: Any) -> Any:
        await ctx.step("before", lambda s: 1)
        await ctx.sleep("nap", 10)
        return "done"

    return {"wf": workflow(run=run)}


def sleep_finished() -> dict:
    async def run(ctx: Any) -> Any:
        await ctx.sleep("short", 0.15)
        await ctx.sleep_until("past", EPOCH - timedelta(days=1))
        return "done"

    return {"wf": workflow(run=run)}


def sleep_in_loop() -> dict:
    async def body(ctx: Any, n: int) -> Any:
        if n == 0:
            await ctx.step("record", lambda s: "first")
            return Loop.continue_(1)
        await ctx.sleep("nap", 0.05)
        return Loop.break_(["first"])

    async def run(ctx: Any) -> Any:
        return await ctx.loop(name="loop", state=0, run=body)

    return {"wf": workflow(run=run)}


# --- Join ----------------------------------------------------------------------------------------------


def join_nested() -> dict:
    async def leaf(ctx: Any) -> Any:
        return await ctx.step("leaf", lambda s: 1)

    async def nested(ctx: Any) -> Any:
        out = await ctx.join("inner", {"x": leaf, "y": leaf})
        return out["x"] + out["y"]

    async def racer(ctx: Any) -> Any:
        async def slow(c: Any) -> str:
            await c.sleep("slow", 5)
            return "slow"

        result = await ctx.race(
            "r", [("plain", lambda c: c.step("plain", lambda s: "plain")), ("slow", slow)]
        )
        return f"winner:{result.value}"

    async def run(ctx: Any) -> Any:
        return await ctx.join("outer", {"a": leaf, "b": nested, "c": leaf, "d": racer})

    return {"wf": workflow(run=run)}


def join_failure() -> dict:
    async def bad(ctx: Any) -> Any:
        await ctx.step("explode", _raise(CriticalError("nope")))

    async def run(ctx: Any) -> Any:
        return await ctx.join("j", {"bad": bad, "ok": lambda c: c.step("fine", lambda s: 1)})

    return {"wf": workflow(run=run)}


def join_retry_sleeping() -> dict:
    async def run(ctx: Any) -> Any:
        out = await ctx.join(
            "j",
            {
                "a": lambda c: c.step(
                    "flaky", _fail_first(1, "once", "a"), max_retries=1, retry_backoff_base=0.75
                ),
                "b": lambda c: c.step("b", lambda s: "b"),
            },
        )
        return out["a"] + out["b"]

    return {"wf": workflow(run=run)}


# --- Race ----------------------------------------------------------------------------------------------


def race_fast_wins() -> dict:
    async def slow(c: Any) -> str:
        await c.sleep("z", 30)
        return "slow"

    async def with_join(c: Any) -> Any:
        out = await c.join(
            "j", {"x": lambda b: b.step("x", lambda s: 1), "y": lambda b: b.step("y", lambda s: 2)}
        )
        return out["x"] + out["y"]

    async def run(ctx: Any) -> Any:
        a = await ctx.race("r1", [("fast", lambda c: c.step("fast", lambda s: "fast")), ("slow", slow)])
        b = await ctx.race("r2", [("fast", with_join), ("slow", slow)])
        return [a.winner, a.value, b.winner, b.value]

    return {"wf": workflow(run=run)}


def race_all_fail() -> dict:
    boom = _raise(CriticalError("boom"))

    async def run(ctx: Any) -> Any:
        return await ctx.race("r", [("a", lambda c: c.step("a", boom)), ("b", lambda c: c.step("b", boom))])

    return {"wf": workflow(run=run)}


def race_flaky_vs_sleep() -> dict:
    async def sleeper(c: Any) -> str:
        await c.sleep("nap", 8.0)
        return "sleep"

    async def run(ctx: Any) -> Any:
        result = await ctx.race(
            "r",
            [
                ("flaky", lambda c: c.step("s", _fail_first(1, "flaky", "flaky"), retry_backoff_base=0.5)),
                ("sleep", sleeper),
            ],
        )
        return [result.winner, result.value]

    return {"wf": workflow(run=run)}


def race_async_loser() -> dict:
    async def slow_body(step: Any) -> str:
        await asyncio.sleep(30)  # cancelled when the fast branch wins
        return "slow"

    async def run(ctx: Any) -> Any:
        result = await ctx.race(
            "r",
            [
                {"name": "slow", "run": lambda c: c.step("slow", slow_body)},
                ("fast", lambda c: c.step("fast", lambda s: "fast")),
            ],
        )
        return [result.winner, result.value]

    return {"wf": workflow(run=run)}


# --- Try -----------------------------------------------------------------------------------------------


def try_steps() -> dict:
    async def run(ctx: Any) -> Any:
        critical = await ctx.try_step("charge", _raise(CriticalError("stop")))
        exhausted = await ctx.try_step(
            name="flaky", run=_raise(RuntimeError("always")), max_retries=1, retry_backoff_base=0.01
        )
        rollback = await ctx.try_step(name="undo", run=_raise(RollbackError("no")), catch=("rollback",))
        fine = await ctx.try_step("fine", lambda s: "value")
        return [critical.ok, critical.failure, exhausted.failure, rollback.failure, fine.ok, fine.value]

    return {"wf": workflow(run=run)}


def try_blocks() -> dict:
    async def payment(b: Any) -> Any:
        await b.step("charge", _raise(CriticalError("card declined")))

    async def bad_join(b: Any) -> Any:
        await b.join("j", {"x": lambda c: c.step("x", _raise(CriticalError("x")))})

    async def bad_race(b: Any) -> Any:
        await b.race("r", [("x", lambda c: c.step("x", _raise(CriticalError("x"))))])

    async def rolled(b: Any) -> Any:
        raise RollbackError("undo it")

    async def run(ctx: Any) -> Any:
        p = await ctx.try_("payment", payment)
        j = await ctx.try_("tj", bad_join)
        r = await ctx.try_("tr", bad_race)
        blk = await ctx.try_("block", rolled, catch=("rollback",))
        ok = await ctx.try_("fine", lambda b: b.step("s", lambda s: 1))
        return [p.failure, j.failure, r.failure, blk.failure, ok.ok, ok.value]

    return {"wf": workflow(run=run)}


# --- Rollback ------------------------------------------------------------------------------------------


def _undo(label: str) -> Any:
    def undo(step: Any, output: Any) -> None:
        step.state["undone"].append(f"{label}:{output}")

    return undo


def rollback_reverse() -> dict:
    async def run(ctx: Any) -> Any:
        await ctx.rollback_checkpoint("cp")
        await ctx.step(name="first", run=lambda s: "one", rollback=_undo("first"))
        await ctx.step(name="second", run=lambda s: "two", rollback=_undo("second"))
        await ctx.step("third", _raise(CriticalError("boom")))

    return {"wf": workflow(run=run, state={"undone": []})}


def rollback_interrupted() -> dict:
    crash = _crash_once()

    def undo_first(step: Any, output: Any) -> None:
        crash()  # the worker dies in the middle of the rollback
        step.state["undone"].append("first")

    async def run(ctx: Any) -> Any:
        await ctx.rollback_checkpoint("cp")
        await ctx.step(name="first", run=lambda s: 1, rollback=undo_first)
        await ctx.step(name="second", run=lambda s: 2, rollback=_undo("second"))
        await ctx.step("third", _raise(CriticalError("boom")))

    return {"wf": workflow(run=run, state={"undone": []})}


def rollback_loop() -> dict:
    async def body(ctx: Any, i: int) -> Any:
        if i == 1:
            raise RuntimeError("loop failure")
        await ctx.step("tick", lambda s: i)
        return Loop.continue_(i + 1)

    async def run(ctx: Any) -> Any:
        await ctx.rollback_checkpoint("cp")
        await ctx.step(name="setup", run=lambda s: "made", rollback=_undo("setup"))
        await ctx.loop(name="loop", state=0, run=body)

    return {"wf": workflow(run=run, state={"undone": []})}


def rollback_without_checkpoint() -> dict:
    async def run(ctx: Any) -> Any:
        await ctx.step(name="s", run=lambda s: 1, rollback=_undo("s"))

    return {"wf": workflow(run=run, state={"undone": []})}


# --- Versions and removals -----------------------------------------------------------------------------


def versions_fresh() -> dict:
    async def run(ctx: Any) -> Any:
        version = await ctx.get_version("gate", 2)
        await ctx.step("work", lambda s: f"v{version}")
        late = await ctx.get_version("late-gate", 3)
        await ctx.sleep("wait", 60)
        return [version, late]

    return {"wf": workflow(run=run)}


async def _old_instance_v1(ctx: Any) -> Any:
    await ctx.step("work", lambda s: "did-work")
    await ctx.queue.next("wait", "go")


async def _old_instance_v2(ctx: Any) -> Any:
    if await ctx.get_version("gate", 2) == 1:
        out = await ctx.step("work", lambda s: "did-work")
        await ctx.queue.next("wait", "go")
        return f"old:{out}"
    await ctx.step("work-v2", lambda s: "new")
    return "new"


def versions_old_instance() -> dict:
    return {"wf": workflow(run=_old_instance_v2)}


def _record_old_instance(d: Driver) -> dict:
    d.deploy({"wf": workflow(run=_old_instance_v1)})
    handle = _start_settle(d)
    before = d.export(handle)
    d.deploy(versions_old_instance())
    handle.send("go", None)
    d.settle()
    return {"before-deploy": before, "after-deploy": handle}


async def _every_kind_v1(ctx: Any) -> Any:
    await ctx.get_version("gate", 1)
    await ctx.step("s", lambda s: 1)
    await ctx.loop("l", lambda c: Loop.break_(1))
    await ctx.sleep("nap", 0)
    await ctx.rollback_checkpoint("cp")
    await ctx.join("j", {"a": lambda c: c.step("x", lambda s: 1)})
    await ctx.race("r", [("a", lambda c: c.step("x", lambda s: 1))])
    await ctx.queue.next_batch("q", timeout=0)
    await ctx.queue.next("wait", "go")


async def _every_kind_v2(ctx: Any) -> Any:
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


def versions_removed() -> dict:
    return {"wf": workflow(run=_every_kind_v2)}


def _record_removed(d: Driver) -> dict:
    d.deploy({"wf": workflow(run=_every_kind_v1)})
    handle = _start_settle(d)
    before = d.export(handle)
    d.deploy(versions_removed())
    handle.send("go", None)
    d.settle()
    return {"before-deploy": before, "after-deploy": handle}


def _cutover(version_aware: bool) -> Any:
    async def body(ctx: Any, i: int) -> Any:
        version = await ctx.get_version("gate", 2) if version_aware else 1
        await ctx.step("work", lambda s: [i, version])
        if i == 0:
            await ctx.queue.next("go", "go")
        if i >= 1:
            return Loop.break_(i)
        return Loop.continue_(i + 1)

    async def run(ctx: Any) -> Any:
        return await ctx.loop(name="loop", state=0, run=body)

    return run


def versions_loop_cutover() -> dict:
    return {"wf": workflow(run=_cutover(True))}


def _record_cutover(d: Driver) -> Any:
    d.deploy({"wf": workflow(run=_cutover(False))})
    handle = _start_settle(d)  # iteration 0 ran its step under v1 and waits
    d.deploy(versions_loop_cutover())
    handle.send("go", None)
    d.settle()
    return handle


# --- Lifecycle -----------------------------------------------------------------------------------------


def lifecycle_cancelled() -> dict:
    async def run(ctx: Any) -> Any:
        await ctx.step("before", lambda s: 1)
        await ctx.queue.next("wait", "go")
        await ctx.step("after", lambda s: 2)

    return {"wf": workflow(run=run, actions={"ping": lambda c: "pong"})}


def _record_cancelled(d: Driver) -> Any:
    handle = _start_settle(d)
    handle.cancel()
    with pytest.raises(WorkflowFinishedError):  # a cancelled workflow refuses it: nothing would receive it
        handle.send("go", None)
    d.settle()
    return handle


def lifecycle_hooks() -> dict:
    def on_create(c: Any, input: Any) -> None:
        c.state["order_id"] = input["order_id"]

    def on_wake(c: Any) -> None:
        c.state["wakes"] += 1
        c.vars["woken"] = True

    async def run(ctx: Any) -> Any:
        seen = await ctx.step("read", lambda s: [s.vars["woken"], s.state["order_id"]])
        msg = await ctx.queue.next("wait-approval", "approval")
        await ctx.step("apply", lambda s: s.state.update(approved=msg.body["ok"]))
        return [seen, msg.body]

    return {
        "wf": actor(
            state={"order_id": None, "wakes": 0, "approved": None},
            vars={"woken": False},
            on_create=on_create,
            on_wake=on_wake,
            actions={"get_state": lambda c: c.state},
            run=workflow(run),
        )
    }


def _record_hooks(d: Driver) -> Any:
    handle = d.start("wf", key="order-1", input={"order_id": "order-1"})
    d.settle()
    handle.send("approval", {"ok": True})
    d.settle()
    return handle


def lifecycle_errors_persist() -> dict:
    async def run(ctx: Any) -> Any:
        await ctx.step("inc", lambda s: s.state.update(n=s.state["n"] + 1))
        raise RuntimeError("boom")

    return {"wf": workflow(run=run, state={"n": 1})}


# --- the table -----------------------------------------------------------------------------------------


#: the spec's rule, where any exception of workflow code fails the workflow (``WORKFLOW_FAILURE_TYPES =
#: ("builtins.Exception",)``): the scenarios that record such a failure run with it, since by default a
#: plain exception of workflow code suspends the run instead (DESIGN.md section 16,
#: tests/contract/test_suspension.py)
SPEC_RULE = (("workflow_failure_types", (Exception,)),)


def _finish(d: Driver) -> Any:
    return _until_finished(d, d.start("wf"))


def _once(d: Driver) -> Any:
    return _start_settle(d)


def _crashed(d: Driver) -> Any:
    handle = d.start("wf")
    _survive_crash(d)
    return handle


CASES = [
    Case("steps-sequential", "Steps", "three steps 1, 2, 3 -> 6 (completed)", steps_sequential, _finish),
    Case(
        "steps-retry-success",
        "Steps",
        "a step failing twice, completed on attempt 3; on_error step events kept in state",
        steps_retry_success,
        _finish,
    ),
    Case(
        "steps-backoff-sleeping",
        "Steps",
        "in flight: a failed attempt sleeping on its retry backoff",
        steps_backoff_sleeping,
        _once,
    ),
    Case(
        "steps-exhausted",
        "Steps",
        "max_retries 2 always failing: StepExhaustedError after 3 attempts (failed), events in state",
        steps_exhausted,
        _finish,
    ),
    Case(
        "steps-critical", "Steps", "CriticalError: not retried, attempts 1 (failed)", steps_critical, _finish
    ),
    Case(
        "steps-rollback-error",
        "Steps",
        "RollbackError: not retried, attempts 1 (failed)",
        steps_rollback_error,
        _finish,
    ),
    Case(
        "steps-workflow-error",
        "Steps",
        "an error raised in the run function after a step (failed), the workflow event in state",
        steps_workflow_error,
        _finish,
        settings=SPEC_RULE,
    ),
    Case(
        "steps-ephemeral",
        "Steps",
        "two ephemeral steps and a durable one (completed)",
        steps_ephemeral,
        _finish,
    ),
    Case(
        "steps-values",
        "Steps",
        "datetime, date, timedelta, Decimal, UUID, bytes, tuple, set in outputs and state (completed)",
        steps_values,
        _finish,
    ),
    Case(
        "steps-running-after-crash",
        "Steps",
        "in flight: the worker died inside a step body (entry running, attempt 1, lease held)",
        steps_running_after_crash,
        _crashed,
    ),
    Case(
        "steps-state-changes",
        "Steps",
        "state changes of a failed attempt are kept (roll-forward); completed on attempt 2",
        steps_state_changes,
        _finish,
    ),
    Case(
        "loops-count", "Loops", "stateful loop of steps step-0..step-2 -> 3 (completed)", loops_count, _finish
    ),
    Case(
        "loops-pruned",
        "Loops",
        "history_prune_interval 3 over iterations 0-8: old iterations pruned (completed)",
        loops_pruned,
        _finish,
    ),
    Case(
        "loops-stateless",
        "Loops",
        "stateless loop: continue_(), None, break_('done') (completed)",
        loops_stateless,
        _finish,
    ),
    Case(
        "loops-command",
        "Loops",
        "in flight: command loop on a completable queue, nested loop, join and race per item; "
        "message [a, b] processed, waiting for the next",
        loops_command,
        lambda d: _send_then_settle(d, "cmd", ["a", "b"], completable=True),
    ),
    Case(
        "loops-failure",
        "Loops",
        "an iteration raising 'loop failure' (failed)",
        loops_failure,
        _finish,
        settings=SPEC_RULE,
    ),
    Case(
        "loops-resumed-after-crash",
        "Loops",
        "prune interval 2, the worker died at count 3, resumed by another run -> 5 (completed)",
        loops_resumed_after_crash,
        _record_resumed_loop,
    ),
    Case(
        "queue-waiting",
        "Queue",
        "in flight: waiting on queue 'my-message' after a step",
        queue_waiting,
        _once,
    ),
    Case(
        "queue-names",
        "Queue",
        "a wait on names first/second, a message to 'second' (completed)",
        queue_names,
        _record_queue_names,
    ),
    Case(
        "queue-completable",
        "Queue",
        "completable messages completed in workflow code and inside a step (completed)",
        queue_completable,
        _record_queue_completable,
    ),
    Case(
        "queue-batch-waiting",
        "Queue",
        "in flight: next_batch with a 5 s timeout after a next(): waiting on a queue with a deadline",
        queue_batch_waiting,
        _record_queue_batch_waiting,
    ),
    Case(
        "queue-drain-loop",
        "Queue",
        "a drain loop of next_batch(count 2, timeout 0.05) over three messages, [] ends it (completed)",
        queue_drain_loop,
        _record_queue_drain_loop,
    ),
    Case(
        "queue-step-send",
        "Queue",
        "a step sends to the actor's own queue (delivered with the step), the wait takes it (completed)",
        queue_step_send,
        _finish,
    ),
    Case("sleep-long", "Sleep", "in flight: a 10 s durable sleep after a step", sleep_long, _once),
    Case(
        "sleep-finished",
        "Sleep",
        "a 0.15 s sleep that fired and a sleep_until in the past (completed)",
        sleep_finished,
        _finish,
    ),
    Case(
        "sleep-in-loop",
        "Sleep",
        "a loop that records 'first' then sleeps in the next iteration -> ['first'] (completed)",
        sleep_in_loop,
        _finish,
    ),
    Case(
        "join-nested",
        "Join",
        "a join of steps, a nested join and a race -> branch outputs (completed)",
        join_nested,
        _finish,
    ),
    Case(
        "join-failure",
        "Join",
        "JoinError: one branch critical, the other completed (failed)",
        join_failure,
        _finish,
    ),
    Case(
        "join-retry-sleeping",
        "Join",
        "in flight: a join whose branch step failed once and sleeps on its backoff",
        join_retry_sleeping,
        _once,
    ),
    Case(
        "race-fast-wins",
        "Race",
        "a fast step and a join beat 30 s sleep branches (completed)",
        race_fast_wins,
        _finish,
    ),
    Case("race-all-fail", "Race", "RaceError: every branch critical (failed)", race_all_fail, _finish),
    Case(
        "race-flaky-vs-sleep",
        "Race",
        "in flight: a flaky branch on its backoff against an 8 s sleep branch",
        race_flaky_vs_sleep,
        _once,
    ),
    Case(
        "race-async-loser",
        "Race",
        "an async step body cancelled when the other branch wins (completed)",
        race_async_loser,
        _finish,
    ),
    Case(
        "try-steps",
        "Try",
        "try_step failures of kind critical, exhausted and rollback, and a success (completed)",
        try_steps,
        _finish,
    ),
    Case(
        "try-blocks",
        "Try",
        "try_ blocks failing in a step, a join, a race and a RollbackError with catch (completed)",
        try_blocks,
        _finish,
    ),
    Case(
        "rollback-reverse",
        "Rollback",
        "rollback handlers ran in reverse after 'boom' (failed; rollback times recorded)",
        rollback_reverse,
        _finish,
    ),
    Case(
        "rollback-interrupted",
        "Rollback",
        "in flight: the worker died in a rollback handler (workflow rolling_back, lease held)",
        rollback_interrupted,
        _crashed,
    ),
    Case(
        "rollback-loop",
        "Rollback",
        "a loop failing at iteration 1 rolls back the step before it (failed)",
        rollback_loop,
        _finish,
        settings=SPEC_RULE,
    ),
    Case(
        "rollback-without-checkpoint",
        "Rollback",
        "a rollback handler without a checkpoint: RollbackCheckpointError (failed)",
        rollback_without_checkpoint,
        _finish,
        settings=SPEC_RULE,
    ),
    Case(
        "versions-fresh",
        "Versions",
        "in flight: gates resolved to latest (2, then 3) on a fresh run, sleeping",
        versions_fresh,
        _once,
    ),
    Case(
        "versions-old-instance",
        "Versions",
        "recorded by v1 (step 'work', waiting on 'go'), replayed by v2 whose gate resolves 1; "
        "after the deploy it completes 'old:did-work'",
        versions_old_instance,
        _record_old_instance,
        labels=("before-deploy", "after-deploy"),
    ),
    Case(
        "versions-removed",
        "Versions",
        "recorded by v1 with an entry of every kind, replayed by v2 made of ctx.removed() calls; "
        "after the deploy it completes 'cleaned'",
        versions_removed,
        _record_removed,
        labels=("before-deploy", "after-deploy"),
    ),
    Case(
        "versions-loop-cutover",
        "Versions",
        "iteration 0 under v1, iteration 1 after the deploy resolves the gate to 2 (completed)",
        versions_loop_cutover,
        _record_cutover,
    ),
    Case(
        "lifecycle-cancelled",
        "Lifecycle",
        "a workflow waiting on a queue cancelled through its handle; a later message is refused",
        lifecycle_cancelled,
        _record_cancelled,
    ),
    Case(
        "lifecycle-hooks",
        "Lifecycle",
        "on_create with input, on_wake and vars, a message delivered through the handle (completed)",
        lifecycle_hooks,
        _record_hooks,
    ),
    Case(
        "lifecycle-errors-persist",
        "Lifecycle",
        "state changed by a step, then the run raises 'boom' (failed with state and error kept)",
        lifecycle_errors_persist,
        _finish,
        settings=SPEC_RULE,
    ),
]


def _send_then_settle(d: Driver, queue: str, body: Any, *, completable: bool = False) -> Any:
    handle = d.start("wf")
    d.settle()
    d.store.send(handle.actor_id, queue, body, completable)
    d.settle()
    return handle
