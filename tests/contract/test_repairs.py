"""Replay and recover check the history they would leave before changing anything (ENGINE-SEMANTICS.md 9):
a replay or recover that would diverge on the current code, or carry on past work a rollback undid, is
refused and writes nothing."""

from __future__ import annotations

import pytest

from rivet_workflows.engine.model import errors, ports
from rivet_workflows.engine.model.definitions import queue, workflow
from rivet_workflows.engine.model.errors import CriticalError
from rivet_workflows.engine.operate import repairs


def _snapshot(h, aid):
    """What a user sees of a run: workflow state, output, error and every entry with its metadata."""
    actor = h.actor(aid)
    entries = [
        (e.key, e.kind, e.status, e.attempts, e.data, e.error, e.rollback_completed_at)
        for e in sorted(h.runtime.store.load_history(aid), key=lambda e: e.seq)
    ]
    return actor.workflow_state, actor.output, actor.error, entries


def _swap(h, run):
    h.runtime.registry.get("wf").run = workflow(run)


# --- divergence --------------------------------------------------------------------------------------


def test_replay_from_a_step_that_would_diverge_is_refused_and_changes_nothing(h):
    async def v1(ctx):
        await ctx.step("validate-v2", lambda s: "valid")
        [msg] = await ctx.queue.next_batch("wait-approval")
        return await ctx.step("finalize", lambda s: f"done:{msg.body}")

    async def v2(ctx):  # the manual's rename recipe (howto/versioning), but this run is past it
        await ctx.removed("validate-v2", "step")
        await ctx.step("validate-v3", lambda s: "valid")
        [msg] = await ctx.queue.next_batch("wait-approval")
        return await ctx.step("finalize", lambda s: f"done:{msg.body}")

    h.setup(wf=workflow(run=v1, queues={"approval": queue()}))
    aid = h.start()
    h.drain()
    h.send(aid, "approval", "yes")
    h.drain()
    assert h.actor(aid).workflow_state == ports.COMPLETED
    _swap(h, v2)
    before = _snapshot(h, aid)

    with pytest.raises(errors.HistoryDivergedError) as caught:
        repairs.replay(h.runtime, aid, "finalize")
    exc = caught.value
    assert exc.code == "history_diverged" and exc.http_status == 409
    assert exc.metadata["location"] == "wait-approval:count"
    assert exc.metadata["reached"] == "validate-v3"
    assert "validate-v3" in exc.message and "get_version" in exc.message
    assert "replay all" in exc.metadata["hint"]
    assert _snapshot(h, aid) == before  # output kept, nothing deleted
    assert h.actor(aid).output == "done:yes" and h.actor(aid).lease_owner is None

    # replaying everything keeps no history, so it runs on the new code
    result = repairs.replay(h.runtime, aid)
    assert sorted(result.deleted) == sorted(k for k, *_ in before[3])
    h.send(aid, "approval", "again")
    h.drain()
    assert h.actor(aid).workflow_state == ports.COMPLETED and h.actor(aid).output == "done:again"
    assert "validate-v3" in h.history(aid)


def test_recover_that_would_diverge_is_refused_until_the_code_replays_the_run(h):
    flags = {"broken": True}

    def charge(step):
        if flags["broken"]:
            raise RuntimeError("card declined")
        return "charged"

    async def v1(ctx):
        await ctx.step("validate", lambda s: "valid")
        return await ctx.step("charge", charge, max_retries=0)

    async def renamed(ctx):  # validate renamed, no removed marker, no gate
        await ctx.step("validate-v2", lambda s: "valid")
        return await ctx.step("charge", charge, max_retries=0)

    async def gated(ctx):  # runs past the rename keep the old step
        if await ctx.get_version("validate-gate", 2) == 2:
            await ctx.step("validate-v2", lambda s: "valid")
        else:
            await ctx.step("validate", lambda s: "valid")
        return await ctx.step("charge", charge, max_retries=0)

    h.setup(wf=workflow(run=v1))
    aid = h.start()
    h.drain()
    assert h.actor(aid).workflow_state == ports.FAILED
    flags["broken"] = False
    _swap(h, renamed)
    before = _snapshot(h, aid)

    with pytest.raises(errors.HistoryDivergedError) as caught:
        repairs.recover(h.runtime, aid)
    assert caught.value.metadata["location"] == "validate"
    assert "'validate-v2'" in caught.value.message
    assert _snapshot(h, aid) == before  # still failed, charge still exhausted

    _swap(h, gated)
    result = repairs.recover(h.runtime, aid)
    assert result.reset == ["charge"]
    h.drain()
    assert h.actor(aid).workflow_state == ports.COMPLETED and h.actor(aid).output == "charged"


# --- rollback ----------------------------------------------------------------------------------------


def _booking(h, calls: list, flags: dict):
    def notify(step):
        calls.append("notify")
        if flags["broken"]:
            raise CriticalError("mail server rejected us")
        return "sent"

    async def run(ctx):
        await ctx.rollback_checkpoint("start")
        await ctx.step(
            "reserve",
            lambda s: calls.append("reserve") or "r-1",
            rollback=lambda s, out: calls.append("release"),
        )
        await ctx.step(
            "charge",
            lambda s: calls.append("charge") or "c-1",
            rollback=lambda s, out: calls.append("refund"),
        )
        await ctx.step("notify", notify)
        return await ctx.step("finalize", lambda s: calls.append("finalize") or "booked")

    h.setup(wf=workflow(run=run))
    aid = h.start()
    h.drain()
    assert calls == ["reserve", "charge", "notify", "refund", "release"]
    assert h.actor(aid).workflow_state == ports.FAILED
    return aid


@pytest.mark.parametrize("target", ["charge", "notify"])
def test_replay_after_a_step_whose_compensation_ran_is_refused(h, target):
    calls: list = []
    flags = {"broken": True}
    aid = _booking(h, calls, flags)
    flags["broken"] = False
    before = _snapshot(h, aid)

    with pytest.raises(errors.WorkflowRolledBackError) as caught:
        repairs.replay(h.runtime, aid, target)
    exc = caught.value
    assert exc.code == "rolled_back" and exc.http_status == 409
    assert exc.metadata["replay_from"] == "reserve"
    assert "'reserve'" in exc.message and "replay all" in exc.message
    assert _snapshot(h, aid) == before
    h.drain()
    assert calls == ["reserve", "charge", "notify", "refund", "release"]  # nothing re-ran


def test_recover_of_a_rolled_back_run_is_refused(h):
    calls: list = []
    flags = {"broken": True}
    aid = _booking(h, calls, flags)
    before = _snapshot(h, aid)
    with pytest.raises(errors.WorkflowRolledBackError, match="'reserve'"):
        repairs.recover(h.runtime, aid)
    assert _snapshot(h, aid) == before


def test_replay_from_the_earliest_compensated_step_redoes_the_undone_work(h):
    calls: list = []
    flags = {"broken": True}
    aid = _booking(h, calls, flags)
    flags["broken"] = False
    result = repairs.replay(h.runtime, aid, "reserve")
    assert result.deleted == ["reserve", "charge", "notify"]
    h.drain()
    assert h.actor(aid).workflow_state == ports.COMPLETED and h.actor(aid).output == "booked"
    assert calls[5:] == ["reserve", "charge", "notify", "finalize"]


def test_the_restartable_predicate_answers_exactly_what_the_repairs_do(h):
    """``repairs.refusal`` is what the admin buttons, the commands and the API ask: for every step and
    operation it must refuse exactly the repairs that ``replay``/``recover`` refuse, with the same code."""
    calls: list = []
    aid = _booking(h, calls, {"broken": True})
    record, entries = h.actor(aid), h.runtime.store.load_history(aid)
    steps = [e.key for e in entries if e.kind == "step"]
    predicted = {
        key: repairs.refusal(h.runtime, record, entries, repairs.REPLAY, key, now=h.runtime.store.now())
        for key in steps
    }
    assert {k: (v.code if v else None) for k, v in predicted.items()} == {
        "reserve": None,  # the earliest compensated step: a replay from it redoes the undone work
        "charge": "rolled_back",
        "notify": "rolled_back",
    }
    assert "replay from 'reserve'" in repairs.reason(predicted["charge"])
    recover = repairs.refusal(h.runtime, record, entries, repairs.RECOVER)
    assert recover is not None and recover.code == "rolled_back"
    assert not repairs.restartable(h.runtime, record, entries, repairs.RECOVER)
    assert repairs.restartable(h.runtime, record, entries, repairs.REPLAY, None)  # replay all
    for key in ("charge", "notify"):
        with pytest.raises(errors.WorkflowRolledBackError):
            repairs.replay(h.runtime, aid, key)
    with pytest.raises(errors.WorkflowRolledBackError):
        repairs.recover(h.runtime, aid)
    h.runtime.store.claim(aid, "another-worker", 30)
    busy = repairs.refusal(
        h.runtime, h.actor(aid), entries, repairs.REPLAY, "reserve", now=h.runtime.store.now()
    )
    assert busy is not None and busy.code == "workflow_in_flight"
    with pytest.raises(errors.WorkflowInFlightError):
        repairs.replay(h.runtime, aid, "reserve")


def test_steps_redone_by_a_replay_get_new_idempotency_keys_stable_across_their_retries(h):
    """An idempotent external API keyed on ``step.idempotency_key`` must see a replayed step as a new call
    (the original charge was refunded by the rollback), while retries of one entry keep one key."""
    keys: dict[str, list] = {"reserve": [], "charge": [], "refund": []}
    flags = {"broken": True, "flaky": 1}

    def charge(step):
        keys["charge"].append(step.idempotency_key)
        if flags["flaky"]:
            flags["flaky"] -= 1
            raise RuntimeError("gateway timeout")  # retried: same entry, same key
        return "c-1"

    def notify(step):
        if flags["broken"]:
            raise CriticalError("mail server rejected us")
        return "sent"

    async def run(ctx):
        await ctx.rollback_checkpoint("start")
        await ctx.step("reserve", lambda s: keys["reserve"].append(s.idempotency_key) or "r-1")
        await ctx.step(
            "charge", charge, max_retries=2, retry_backoff_base=0,
            rollback=lambda s, out: keys["refund"].append(s.idempotency_key),
        )  # fmt: skip
        return await ctx.step("notify", notify)

    h.setup(wf=workflow(run=run))
    aid = h.start()
    h.drain()
    assert h.actor(aid).workflow_state == ports.FAILED
    assert keys == {
        "reserve": [f"{aid}:reserve"],
        "charge": [f"{aid}:charge"] * 2,
        "refund": [f"{aid}:charge"],
    }

    flags["broken"], flags["flaky"] = False, 1
    repairs.replay(h.runtime, aid, "reserve")
    h.drain()
    assert h.actor(aid).workflow_state == ports.COMPLETED
    assert keys["reserve"] == [f"{aid}:reserve", f"{aid}:reserve#1"]
    assert keys["charge"][2:] == [f"{aid}:charge#1"] * 2  # stable across the retry after the replay
    assert h.actor(aid).replay_generation == 1

    repairs.replay(h.runtime, aid)  # a second replay: a second generation
    h.drain()
    assert keys["reserve"][-1] == f"{aid}:reserve#2"
