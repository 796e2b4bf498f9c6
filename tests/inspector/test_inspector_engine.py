"""Inspector engine on the MemoryStore: history view, replay from a step / all, recover (ENGINE-SEMANTICS 9)."""

from __future__ import annotations

import pytest

from rivet_workflows.engine.model import definitions as d
from rivet_workflows.engine.model import errors, ports
from rivet_workflows.engine.operate import inspector, repairs
from rivet_workflows.testing import drain, make_runtime


def build(**definitions):
    registry = d.setup(use=definitions)
    runtime = make_runtime(registry, poll_interval=0.005, lease_seconds=5)
    return runtime, runtime.client()


def flaky_workflow(flags: dict, calls: list):
    async def run(ctx):
        a = await ctx.step("fetch", lambda s: calls.append("fetch") or 1)

        def charge(s):
            calls.append("charge")
            if flags.get("broken"):
                raise RuntimeError("card declined")
            return a + 1

        b = await ctx.step(name="charge", run=charge, max_retries=0)
        c = await ctx.step("ship", lambda s: calls.append("ship") or b + 1)
        return c

    return d.actor(run=d.workflow(run))


def test_history_view_lists_entries_in_creation_order_with_metadata():
    calls: list = []
    runtime, client = build(flow=flaky_workflow({}, calls))
    handle = client.flow.get_or_create("a")
    drain(runtime, timeout=5)
    view = inspector.workflow_history(runtime, handle.actor_id)
    assert view["workflowState"] == "completed"
    assert view["isWorkflowEnabled"] is True
    ids = [e["id"] for e in view["history"]["entries"]]
    assert ids == ["fetch", "charge", "ship"]
    assert view["history"]["entries"][1]["kind"] == {"type": "step", "data": {"output": 2}}
    meta = view["history"]["entryMetadata"]["ship"]
    assert meta["status"] == "completed" and meta["attempts"] == 1 and meta["completedAt"]
    assert view["history"]["nameRegistry"] == ["fetch", "charge", "ship"]


def test_history_of_an_actor_without_workflow_is_null():
    runtime, client = build(plain=d.actor(state={"n": 0}))
    handle = client.plain.get_or_create("a")
    view = inspector.workflow_history(runtime, handle.actor_id)
    assert view == {"history": None, "workflowState": "no_workflow", "isWorkflowEnabled": False}


def test_replay_from_failed_step_keeps_earlier_entries_and_completes_after_fix():
    flags, calls = {"broken": True}, []
    runtime, client = build(flow=flaky_workflow(flags, calls))
    handle = client.flow.get_or_create("a")
    drain(runtime, timeout=5)
    assert handle.workflow_state() == "failed"
    before = {e.key: e for e in runtime.store.load_history(handle.actor_id)}
    flags["broken"] = False
    result = repairs.replay(runtime, handle.actor_id, "charge")
    assert result.deleted == ["charge"]
    record = handle.record()
    assert record.workflow_state == "sleeping" and record.error is None and record.wake_at is not None
    drain(runtime, timeout=5)
    assert handle.workflow_state() == "completed"
    assert handle.record().output == 3
    assert calls == ["fetch", "charge", "charge", "ship"]  # fetch not re-run
    after = {e.key: e for e in runtime.store.load_history(handle.actor_id)}
    assert after["fetch"] == before["fetch"]  # kept byte for byte


def test_replay_all_restarts_from_scratch():
    calls: list = []
    runtime, client = build(flow=flaky_workflow({}, calls))
    handle = client.flow.get_or_create("a")
    drain(runtime, timeout=5)
    result = repairs.replay(runtime, handle.actor_id, None)
    assert sorted(result.deleted) == ["charge", "fetch", "ship"]
    assert runtime.store.load_history(handle.actor_id) == []
    assert handle.record().output is None
    drain(runtime, timeout=5)
    assert calls == ["fetch", "charge", "ship"] * 2
    assert handle.workflow_state() == "completed"


def test_replay_inside_a_loop_uses_the_innermost_loop_as_boundary():
    calls: list = []

    async def run(ctx):
        await ctx.step("before", lambda s: calls.append("before"))

        async def body(lctx, state):
            await lctx.step("work", lambda s: calls.append(("work", state)))
            if state >= 2:
                return d.Loop.break_(state)
            return d.Loop.continue_(state + 1)

        out = await ctx.loop(name="items", state=0, run=body)
        await ctx.step("after", lambda s: calls.append("after"))
        return out

    runtime, client = build(flow=d.actor(run=d.workflow(run)))
    handle = client.flow.get_or_create("a")
    drain(runtime, timeout=5)
    entries = runtime.store.load_history(handle.actor_id)
    keys = [e.key for e in entries]
    assert "items/~1/work" in keys
    deleted = repairs.plan_replay(entries, "items/~1/work")
    assert "before" not in deleted and "items" in deleted and "after" in deleted
    calls.clear()
    repairs.replay(runtime, handle.actor_id, "items/~1/work")
    drain(runtime, timeout=5)
    assert calls == [("work", 0), ("work", 1), ("work", 2), "after"]
    assert handle.workflow_state() == "completed"


def test_replay_target_must_exist_and_be_a_step():
    async def run(ctx):
        await ctx.sleep("nap", 0)
        return 1

    runtime, client = build(flow=d.actor(run=d.workflow(run)))
    handle = client.flow.get_or_create("a")
    drain(runtime, timeout=5)
    with pytest.raises(errors.InvalidReplayTargetError):
        repairs.replay(runtime, handle.actor_id, "nap")
    with pytest.raises(errors.EntryNotFoundError):
        repairs.replay(runtime, handle.actor_id, "nope")
    assert handle.workflow_state() == "completed"  # nothing written
    assert handle.record().lease_owner is None  # the lease was handed back


def test_replay_and_recover_are_refused_while_an_executor_holds_the_lease():
    calls: list = []
    runtime, client = build(flow=flaky_workflow({"broken": True}, calls))
    handle = client.flow.get_or_create("a")
    drain(runtime, timeout=5)
    token = runtime.store.claim(handle.actor_id, "other-worker", 30)
    assert token is not None
    assert inspector.in_flight(handle.record(), runtime.store.now())
    with pytest.raises(errors.WorkflowInFlightError) as info:
        repairs.replay(runtime, handle.actor_id, "charge")
    assert info.value.code == "workflow_in_flight" and info.value.http_status == 409
    with pytest.raises(errors.WorkflowInFlightError):
        repairs.recover(runtime, handle.actor_id)
    assert [e.key for e in runtime.store.load_history(handle.actor_id)] == ["fetch", "charge"]


def test_recover_resets_the_exhausted_step_and_reruns_it():
    flags, calls = {"broken": True}, []
    runtime, client = build(flow=flaky_workflow(flags, calls))
    handle = client.flow.get_or_create("a")
    drain(runtime, timeout=5)
    assert handle.record().error is not None
    flags["broken"] = False
    result = repairs.recover(runtime, handle.actor_id)
    assert result.reset == ["charge"]
    charge = {e.key: e for e in runtime.store.load_history(handle.actor_id)}["charge"]
    assert (charge.status, charge.attempts, charge.error) == ("pending", 0, None)
    assert handle.record().error is None and handle.workflow_state() == "sleeping"
    drain(runtime, timeout=5)
    assert handle.workflow_state() == "completed" and handle.record().output == 3


def test_recover_of_a_workflow_that_is_not_failed_is_refused():
    runtime, client = build(flow=flaky_workflow({}, []))
    handle = client.flow.get_or_create("a")
    drain(runtime, timeout=5)
    with pytest.raises(errors.WorkflowNotFailedError):
        repairs.recover(runtime, handle.actor_id)


def test_handle_recover_uses_the_inspector():
    flags, calls = {"broken": True}, []
    runtime, client = build(flow=flaky_workflow(flags, calls))
    handle = client.flow.get_or_create("a")
    drain(runtime, timeout=5)
    flags["broken"] = False
    assert handle.recover() is True
    drain(runtime, timeout=5)
    assert handle.workflow_state() == "completed"
    assert handle.recover() is False  # not failed: nothing to do
    assert ports.COMPLETED == handle.workflow_state()


def _join_workflow(flags):
    def flaky(s):
        if flags.get("broken"):
            raise RuntimeError("sms gateway down")
        return "sms"

    async def run(ctx):
        await ctx.step("start", lambda s: 1)
        out = await ctx.join(
            "notify",
            {
                "email": lambda b: b.step("send-email", lambda s: "mail"),
                "sms": lambda b: b.step(name="send-sms", run=flaky, max_retries=0),
            },
        )
        await ctx.step("done", lambda s: 2)
        return out

    return d.actor(run=d.workflow(run))


@pytest.mark.parametrize("target", ["notify/sms/send-sms", None])
def test_replay_of_a_failed_join_branch_step_completes_after_fix(target):
    flags = {"broken": True}
    runtime, client = build(flow=_join_workflow(flags))
    handle = client.flow.get_or_create("a")
    drain(runtime, timeout=5)
    assert handle.workflow_state() == "failed"
    flags["broken"] = False
    repairs.replay(runtime, handle.actor_id, target)
    drain(runtime, timeout=5)
    assert handle.workflow_state() == "completed", handle.record().error
    assert handle.record().output == {"email": "mail", "sms": "sms"}


def test_recover_of_a_failed_join_branch_completes_after_fix():
    flags = {"broken": True}
    runtime, client = build(flow=_join_workflow(flags))
    handle = client.flow.get_or_create("a")
    drain(runtime, timeout=5)
    flags["broken"] = False
    repairs.recover(runtime, handle.actor_id)
    drain(runtime, timeout=5)
    assert handle.workflow_state() == "completed", handle.record().error


async def _inbox_run(ctx):
    await ctx.queue.next_batch("settle", names=["in"], timeout=3600)  # the message comes first
    await ctx.step("after", lambda s: 1)
    second = await ctx.queue.next("more", names=["in"])
    return second.body


def _inbox(runtime, client):
    handle = client.inbox.get_or_create("a")
    drain(runtime, timeout=5)
    handle.send("in", "first")
    drain(runtime, timeout=5)
    return handle


def test_a_queue_wait_stores_received_messages_and_an_interrupted_deadline():
    runtime, client = build(inbox=d.actor(queues={"in": d.queue()}, run=d.workflow(_inbox_run)))
    handle = _inbox(runtime, client)
    stored = {e.key: e for e in runtime.store.load_history(handle.actor_id)}
    deadline, count, message = stored["settle:deadline"], stored["settle:count"], stored["settle:0"]
    assert (deadline.data["state"], deadline.completed_at is not None) == ("interrupted", True)
    assert (count.status, count.completed_at is not None) == ("completed", True)
    assert message.status == "received"


def test_a_history_written_before_the_message_statuses_shows_them_and_still_replays():
    runtime, client = build(inbox=d.actor(queues={"in": d.queue()}, run=d.workflow(_inbox_run)))
    handle = _inbox(runtime, client)
    # what older versions stored: messages and count records pending with no completed_at, a deadline
    # that lost to the message marked completed, with no completed_at
    for entry in runtime.store._history[handle.actor_id].values():
        if entry.kind == "message":
            entry.status, entry.completed_at = "pending", None
        if entry.key == "settle:deadline":
            entry.data = {**entry.data, "state": "completed"}
            entry.completed_at = None
    meta = inspector.workflow_history(runtime, handle.actor_id)["history"]["entryMetadata"]
    assert meta["settle:deadline"]["status"] == "interrupted"
    assert meta["settle:deadline"]["completedAt"] == meta["settle:count"]["createdAt"]
    assert (meta["settle:count"]["status"], meta["settle:0"]["status"]) == ("completed", "received")
    assert meta["settle:count"]["completedAt"] is not None
    handle.send("in", "second")
    drain(runtime, timeout=5)
    assert handle.workflow_state() == "completed", handle.record().error
    assert handle.record().output == "second"


def test_the_demo_trace_speaks_the_inspector_vocabulary():
    from project.examples.demo import format_trace

    runtime, client = build(inbox=d.actor(queues={"in": d.queue()}, run=d.workflow(_inbox_run)))
    handle = _inbox(runtime, client)
    lines = {
        line.split()[0]: line.split()[2]
        for line in format_trace(runtime.store.load_history(handle.actor_id))[1:]
    }
    assert lines == {
        "settle:deadline": "interrupted",
        "settle:count": "completed",
        "settle:0": "received",
        "after": "completed",
    }
