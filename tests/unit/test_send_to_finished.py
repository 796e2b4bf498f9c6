"""A send to a completed or cancelled workflow is refused (``WorkflowFinishedError``, nothing stored): from
``handle.send`` (with or without ``wait``) and from ``c.queue.send`` in an action. A failed workflow accepts
the message, and a recover consumes it."""

from __future__ import annotations

import pytest

import rivet_workflows
from rivet_workflows.engine.model import errors, ports
from rivet_workflows.engine.model.definitions import actor, queue, setup, workflow
from rivet_workflows.testing import drain, make_runtime

FLAGS = {"broken": False}


def _check(step):
    if FLAGS["broken"]:
        raise RuntimeError("broken")
    return "ok"


async def run(ctx):
    await ctx.step("check", _check, max_retries=0)
    message = await ctx.queue.next("wait", names=["inbox"])
    return message.body


def _forward(c, body):
    c.queue.send("inbox", body)


wf = actor(state={}, queues={"inbox": queue()}, actions={"forward": _forward}, run=workflow(run))


@pytest.fixture
def runtime():
    FLAGS["broken"] = False
    yield make_runtime(setup(use={"wf": wf}))
    FLAGS["broken"] = False


def _pending(runtime, handle) -> list:
    return runtime.store.pending_messages(handle.actor_id, None, 10)


def test_a_send_to_a_completed_workflow_is_refused_and_nothing_is_stored(runtime):
    handle = runtime.client().wf.get_or_create("done")
    drain(runtime, timeout=1)
    handle.send("inbox", 1)
    drain(runtime, timeout=1)
    assert handle.workflow_state() == ports.COMPLETED
    for send in (lambda: handle.send("inbox", 2), lambda: handle.send("inbox", 2, wait=True, timeout=5)):
        with pytest.raises(rivet_workflows.WorkflowFinishedError) as caught:
            send()
        assert caught.value.code == "workflow_finished" and caught.value.http_status == 409
        assert caught.value.metadata == {
            "actor_id": handle.actor_id,
            "workflow_state": "completed",
            "queue": "inbox",
        }
    with pytest.raises(errors.WorkflowFinishedError):  # an action's c.queue.send: the same refusal
        handle.call("forward", 3)
    assert _pending(runtime, handle) == []


def test_a_send_to_a_cancelled_workflow_is_refused(runtime):
    handle = runtime.client().wf.get_or_create("cancelled")
    drain(runtime, timeout=1)
    assert handle.cancel(reason="test")
    with pytest.raises(errors.WorkflowFinishedError, match="is cancelled"):
        handle.send("inbox", 1)
    assert _pending(runtime, handle) == []


def test_a_failed_workflow_keeps_the_message_and_a_recover_consumes_it(runtime):
    FLAGS["broken"] = True
    handle = runtime.client().wf.get_or_create("failed")
    drain(runtime, timeout=1)
    assert handle.workflow_state() == ports.FAILED
    handle.send("inbox", "kept")
    handle.call("forward", "also kept")
    assert [m.body for m in _pending(runtime, handle)] == ["kept", "also kept"]
    FLAGS["broken"] = False
    assert handle.recover(reason="fixed")
    drain(runtime, timeout=2)
    assert handle.workflow_state() == ports.COMPLETED and handle.record().output == "kept"
