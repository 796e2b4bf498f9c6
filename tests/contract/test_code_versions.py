"""Rolling deploys (case C65, DESIGN.md section 12): an old-code worker meets runs new-code workers advanced.

Each test plays a deploy on one store: new code (``CODE_VERSION`` "v2") runs an actor to a queue wait, then
the registry is switched back to the old code ("v1": the worker being retired) and the message arrives. The
old worker's replay diverges on entries v2 wrote: it must leave the run unchanged and due (not failed,
nothing written) until a v2 worker takes it, which completes it exactly once.
"""

from __future__ import annotations

import logging

from rivet_workflows.engine.model import errors, ports
from rivet_workflows.engine.model.definitions import workflow
from rivet_workflows.engine.run import worker


def _fast_backoff(monkeypatch):
    """A left run is due again after 0.05 s, 0.1 s, ... (so a test's drain sees the backoff work)."""
    monkeypatch.setattr(worker, "OTHER_VERSION_RETRY_BASE_SECONDS", 0.05)
    monkeypatch.setattr(worker, "OTHER_VERSION_RETRY_MAX_SECONDS", 0.4)


def _deploy(h, *, new, old, effects):
    """Run ``new`` code as v2 to its queue wait; returns the actor id."""
    h.setup(wf=workflow(run=new))
    h.runtime.settings.code_version = "v2"
    aid = h.start()
    h.drain(timeout=1.0)
    assert h.actor(aid).workflow_state == ports.SLEEPING
    return aid


def _use(h, run, version):
    h.runtime.registry.get("wf").run = workflow(run=run).run
    h.runtime.settings.code_version = version


def _snapshot(h, aid):
    return {
        k: (e.kind, e.status, e.attempts, e.data, e.code_version) for k, e in sorted(h.history(aid).items())
    }


def _gate_codes(effects):
    """The gate example of docs/howto/versioning.md: v2 adds ``validate-v3`` behind a version gate."""

    def validate(name):
        def body(step):
            effects.append(name)
            return name

        return body

    async def old(ctx):
        await ctx.step("validate-v2", validate("validate-v2"))
        message = await ctx.queue.next("wait", "approve")
        await ctx.step("ship", validate("ship"))
        return message.body

    async def new(ctx):
        if await ctx.get_version("validate", 2) == 2:
            await ctx.step("validate-v3", validate("validate-v3"))
        else:
            await ctx.step("validate-v2", validate("validate-v2"))
        message = await ctx.queue.next("wait", "approve")
        await ctx.step("ship", validate("ship"))
        return message.body

    return old, new


def _assert_left_for_v2(h, aid, before):
    actor = h.actor(aid)
    assert actor.workflow_state == ports.SLEEPING  # not failed
    assert actor.error is None
    assert actor.wake_at is not None  # still due (after the backoff)
    assert actor.lease_owner is None  # the lease was released
    assert actor.awaiting_code_version == "v2"
    assert _snapshot(h, aid) == before  # nothing written to the history
    assert h.runtime.store.pending_messages(aid, None, 10)  # the message is still there for v2


def test_old_worker_leaves_a_run_past_a_version_gate_to_the_new_code(h, monkeypatch, caplog):
    _fast_backoff(monkeypatch)
    effects: list[str] = []
    old, new = _gate_codes(effects)
    aid = _deploy(h, new=new, old=old, effects=effects)
    before = _snapshot(h, aid)
    assert {e[4] for e in before.values()} == {"v2"}
    assert h.actor(aid).code_version == "v2"

    _use(h, old, "v1")
    h.send(aid, "approve", "ok")
    with caplog.at_level(logging.DEBUG, logger="rivet_workflows"):
        h.drain(timeout=0.6)
    _assert_left_for_v2(h, aid, before)
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING and aid in r.getMessage()]
    assert len(warnings) == 1, [r.getMessage() for r in warnings]  # logged once, not once per wake-up
    assert "'v2'" in warnings[0].getMessage()
    retries = [r for r in caplog.records if "left again" in r.getMessage()]
    assert len(retries) <= 4  # backed off (0.05, 0.1, 0.2, 0.4 s), no spin
    assert effects == ["validate-v3"]

    _use(h, new, "v2")
    h.drain(timeout=2.0)
    actor = h.actor(aid)
    assert actor.workflow_state == ports.COMPLETED
    assert actor.output == "ok"
    assert actor.awaiting_code_version is None
    assert effects == ["validate-v3", "ship"]  # every step exactly once


def test_the_leave_warning_is_logged_once_per_run_across_worker_processes(h, monkeypatch, caplog):
    _fast_backoff(monkeypatch)
    effects: list[str] = []
    old, new = _gate_codes(effects)
    aid = _deploy(h, new=new, old=old, effects=effects)
    _use(h, old, "v1")
    h.send(aid, "approve", "ok")
    with caplog.at_level(logging.DEBUG, logger="rivet_workflows"):
        h.drain(timeout=0.3)
        for _ in range(2):  # two more old-code worker processes, each with a memory of its own, meet the run
            monkeypatch.setattr(worker, "_LEFT", worker._LeftRuns())
            h.drain(timeout=0.3)
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING and aid in r.getMessage()]
    assert len(warnings) == 1, [r.getMessage() for r in warnings]  # the database knows it was said
    assert h.actor(aid).awaiting_code_version == "v2"


def test_old_worker_leaves_a_run_that_retired_a_step_with_removed(h):
    effects: list[str] = []

    async def old(ctx):
        await ctx.step("audit", lambda s: effects.append("audit"))
        await ctx.queue.next("wait", "approve")
        await ctx.step("ship", lambda s: effects.append("ship"))

    async def new(ctx):
        await ctx.removed("audit", "step")
        await ctx.queue.next("wait", "approve")
        await ctx.step("ship", lambda s: effects.append("ship"))

    aid = _deploy(h, new=new, old=old, effects=effects)
    before = _snapshot(h, aid)
    _use(h, old, "v1")
    h.send(aid, "approve", "ok")
    summary = h.run(aid)
    assert summary.left_for_other_version and summary.awaiting_code_version == "v2"
    _assert_left_for_v2(h, aid, before)
    assert effects == []

    _use(h, new, "v2")
    h.run(aid)
    assert h.actor(aid).workflow_state == ports.COMPLETED
    assert effects == ["ship"]


def test_old_worker_leaves_a_run_of_a_renamed_step(h):
    effects: list[str] = []

    async def old(ctx):
        await ctx.step("charge", lambda s: effects.append("charge"))
        await ctx.queue.next("wait", "approve")
        await ctx.step("ship", lambda s: effects.append("ship"))

    async def new(ctx):
        await ctx.step("charge-card", lambda s: effects.append("charge-card"))
        await ctx.queue.next("wait", "approve")
        await ctx.step("ship", lambda s: effects.append("ship"))

    aid = _deploy(h, new=new, old=old, effects=effects)
    before = _snapshot(h, aid)
    _use(h, old, "v1")
    h.send(aid, "approve", "ok")
    h.run(aid)
    _assert_left_for_v2(h, aid, before)
    assert effects == ["charge-card"]  # the old code never charged again

    _use(h, new, "v2")
    h.run(aid)
    assert h.actor(aid).workflow_state == ports.COMPLETED
    assert effects == ["charge-card", "ship"]


def test_a_divergence_on_the_runs_own_code_version_still_fails(h):
    async def before(ctx):
        await ctx.step("charge", lambda s: None)
        await ctx.queue.next("wait", "approve")

    async def after(ctx):
        await ctx.step("charge-card", lambda s: None)
        await ctx.queue.next("wait", "approve")

    aid = _deploy(h, new=before, old=after, effects=[])
    _use(h, after, "v2")  # the code changed without a new CODE_VERSION: a plain divergence
    h.send(aid, "approve", "ok")
    h.drain(timeout=0.5)
    actor = h.actor(aid)
    assert actor.workflow_state == ports.FAILED
    assert actor.error["name"] == "HistoryDivergedError"
    assert actor.awaiting_code_version is None


def test_without_code_version_a_divergence_fails_as_before(h):
    effects: list[str] = []
    old, new = _gate_codes(effects)
    aid = _deploy(h, new=new, old=old, effects=effects)
    h.runtime.settings.code_version = None
    for entry in h.history(aid).values():
        assert entry.code_version == "v2"
    _use(h, old, None)
    h.send(aid, "approve", "ok")
    h.drain(timeout=0.5)
    assert h.actor(aid).workflow_state == ports.FAILED
    assert h.actor(aid).error["name"] == "HistoryDivergedError"


def test_entries_of_an_unversioned_process_belong_to_no_version(h):
    """A run written before CODE_VERSION was set: a versioned worker that diverges on it fails it (the
    protection starts once every process names its version)."""
    effects: list[str] = []
    old, new = _gate_codes(effects)
    h.setup(wf=workflow(run=new))
    aid = h.start()
    h.drain(timeout=1.0)
    assert {e.code_version for e in h.history(aid).values()} == {None}
    _use(h, old, "v1")
    h.send(aid, "approve", "ok")
    h.drain(timeout=0.5)
    assert h.actor(aid).workflow_state == ports.FAILED


def test_new_worker_runs_what_the_old_worker_recorded(h):
    """The other direction of a rolling deploy: a v2 worker with a version gate continues a v1 run, and
    every write records who made it."""
    effects: list[str] = []
    old, new = _gate_codes(effects)
    h.setup(wf=workflow(run=old))
    h.runtime.settings.code_version = "v1"
    aid = h.start()
    h.drain(timeout=1.0)
    _use(h, new, "v2")
    h.send(aid, "approve", "ok")
    h.drain(timeout=1.0)
    actor = h.actor(aid)
    assert actor.workflow_state == ports.COMPLETED and actor.code_version == "v2"
    versions = {k: e.code_version for k, e in h.history(aid).items()}
    assert versions["validate-v2"] == "v1" and versions["ship"] == "v2"
    assert effects == ["validate-v2", "ship"]


def test_other_version_signal_is_not_an_exception():
    """User code's ``except Exception`` cannot swallow it (it would let the old code go on writing)."""
    assert not issubclass(errors.OtherCodeVersionSignal, Exception)
