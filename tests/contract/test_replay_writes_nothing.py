"""Case C49: replaying a finished entry writes nothing; its row stays as recorded, whatever the primitive."""

from __future__ import annotations

import dataclasses

from rivet_workflows.engine.model import ports
from rivet_workflows.engine.model.definitions import Loop, workflow
from rivet_workflows.engine.model.errors import CriticalError, JoinError, RaceError

TICKS = 3


def _fail(message):
    def body(step):
        raise CriticalError(message)

    return body


async def _every_primitive(ctx):
    """One finished entry of every primitive, then ``TICKS`` queue waits that each wake the run again."""
    await ctx.step("step", lambda s: "one")

    async def loop_body(c, i):
        await c.step("inner", lambda s: i)
        return Loop.break_(i) if i >= 1 else Loop.continue_(i + 1)

    await ctx.loop("loop", state=0, run=loop_body)
    await ctx.sleep("nap", 0.01)
    await ctx.queue.next("wait", "inbox")
    await ctx.queue.next("timed", "inbox", timeout=3600)
    message = await ctx.queue.next("ask", "inbox", completable=True)
    await message.complete("answer")
    await ctx.join(
        "join", {"a": lambda c: c.step("a", lambda s: "a"), "b": lambda c: c.step("b", lambda s: 2)}
    )

    async def slow(c):
        await c.sleep("slow", 3600)
        return "slow"

    await ctx.race("race", [("fast", lambda c: c.step("fast", lambda s: "fast")), ("slow", slow)])
    await ctx.try_("try", lambda c: c.step("bad", _fail("caught")))

    async def failed_join(c):
        await c.join(
            "fj", {"ok": lambda b: b.step("ok", lambda s: 1), "no": lambda b: b.step("no", _fail("j"))}
        )

    assert not (await ctx.try_("tj", failed_join)).ok

    async def failed_race(c):
        await c.race(
            "fr", [("x", lambda b: b.step("x", _fail("x"))), ("y", lambda b: b.step("y", _fail("y")))]
        )

    assert not (await ctx.try_("tr", failed_race)).ok
    assert not (await ctx.try_step("ts", _fail("try_step"))).ok
    await ctx.rollback_checkpoint("checkpoint")
    await ctx.step("charge", lambda s: 10, rollback=lambda s, out: None)
    assert await ctx.get_version("gate", 2) == 2
    await ctx.removed("gone", "step")
    for i in range(TICKS):
        await ctx.queue.next(f"tick{i}", "tick")
    return "done"


def _rows(h, aid):
    return {key: dataclasses.asdict(entry) for key, entry in h.history(aid).items()}


def test_replaying_finished_entries_of_every_primitive_writes_nothing(h):
    h.setup(wf=workflow(run=_every_primitive, queues={"inbox": None, "tick": None}))
    aid = h.start()
    for n in range(3):
        h.send(aid, "inbox", n, completable=n == 2)
    h.drain()
    assert h.actor(aid).waiting_for == ["tick"]
    store = h.runtime.store
    written: list[str] = []
    commit = store.commit

    def recording_commit(actor_id, token, c):
        written.extend(e.key for e in c.upserts)
        return commit(actor_id, token, c)

    store.commit = recording_commit
    before = _rows(h, aid)
    kinds = {row["kind"] for row in before.values()}
    assert kinds == {"step", "loop", "sleep", "message", "join", "race", "rollback_checkpoint"} | {
        "version_check",
        "removed",
    }
    for i in range(TICKS):
        h.send(aid, "tick", i)
        h.drain()
        now = _rows(h, aid)
        changed = sorted(k for k, row in before.items() if now.get(k) != row)
        assert changed == [], f"replay {i + 1} rewrote {changed}"
        rewritten = sorted(set(written) & set(before))
        assert rewritten == [], f"replay {i + 1} wrote finished entries {rewritten}"
    assert h.actor(aid).workflow_state == ports.COMPLETED and h.actor(aid).output == "done"
    h.drain()  # a finished run woken again
    assert {k: v for k, v in _rows(h, aid).items() if k in before} == before


def test_a_finished_failed_join_and_race_replay_their_recorded_errors(h):
    raised = []

    async def run(ctx):
        for name, call in (
            ("j", lambda: ctx.join("j", {"no": lambda b: b.step("no", _fail("j"))})),
            ("r", lambda: ctx.race("r", [("x", lambda b: b.step("x", _fail("x")))])),
        ):
            try:
                await call()
            except (JoinError, RaceError) as exc:
                raised.append((name, type(exc).__name__, exc.metadata["errors"]))
        await ctx.queue.next("tick", "tick")
        await ctx.queue.next("tock", "tick")

    h.setup(wf=workflow(run=run, queues={"tick": None}))
    aid = h.start()
    h.drain()
    h.send(aid, "tick", 1)
    h.drain()
    assert [r[:2] for r in raised] == [("j", "JoinError"), ("r", "RaceError")] * 2
    assert raised[0][2] == raised[2][2] and raised[1][2] == raised[3][2]


def test_a_replay_from_a_step_inside_a_finished_join_runs_that_branch_again(h):
    from rivet_workflows.engine.operate import repairs

    calls = []

    async def run(ctx):
        out = await ctx.join(
            "j",
            {
                "a": lambda b: b.step("a", lambda s: calls.append("a") or "a"),
                "b": lambda b: b.step("b", lambda s: calls.append("b") or len(calls)),
            },
        )
        await ctx.queue.next("tick", "tick")
        return out

    h.setup(wf=workflow(run=run, queues={"tick": None}))
    aid = h.start()
    h.drain()
    assert sorted(calls) == ["a", "b"] and h.history(aid)["j"].status == ports.ENTRY_COMPLETED
    repairs.replay(h.runtime, aid, "j/b/b")
    h.send(aid, "tick", 1)
    h.drain()
    assert sorted(calls) == ["a", "b", "b"]  # only the replayed branch ran again
    assert h.actor(aid).output == {"a": "a", "b": 3}
    assert h.history(aid)["j"].status == ports.ENTRY_COMPLETED
