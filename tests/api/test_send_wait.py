"""Case C55: an HTTP send with ``wait`` says why it ended, with the Python client's ``SendResult.detail``."""

from __future__ import annotations

import threading
import time

import pytest

from tests.api.test_api import api, assert_error, post  # noqa: F401 - fixture


def http_send(client, handle, queue, timeout):
    response = post(
        client, f"/actors/{handle.actor_id}/queues/{queue}", {"body": 1, "wait": True, "timeout": timeout}
    )
    assert response.status_code == 200, response.content
    return response.json()


def python_send(handle, queue, timeout):
    return handle.send(queue, 1, wait=True, timeout=timeout)


def in_background(fn):
    """Run ``fn`` in a thread (closing its database connection); returns the thread's join."""
    from django.db import connections

    def target():
        try:
            fn()
        finally:
            connections.close_all()

    thread = threading.Thread(target=target)
    thread.start()
    return lambda: thread.join(timeout=30)


def drain_until(rivet, predicate, limit=15.0):
    end = time.monotonic() + limit
    while not predicate() and time.monotonic() < end:
        rivet.drain(timeout=0.1)
        time.sleep(0.02)


def test_http_and_python_give_the_same_detail_in_every_ending(api, rivet):  # noqa: F811
    """Not received yet, received but never completed, workflow ended, actor destroyed: one sentence each,
    the same over HTTP as from ``handle.send`` (the view passes ``SendResult.detail`` through)."""
    answers = {}
    for via in ("http", "python"):
        seen = {}
        client = rivet.client

        def send(handle, queue, timeout, _via=via):
            if _via == "http":
                return http_send(api, handle, queue, timeout)["detail"]
            return python_send(handle, queue, timeout).detail

        # never run, so nothing reads the queue
        seen["not received"] = send(client.waiter.get_or_create(f"idle-{via}"), "approval", 0.3)
        # the reader takes the message as "first" without completing it, then waits for a second one
        reader = client.reader.get_or_create(f"r-{via}")
        join = in_background(lambda r=reader: drain_until(rivet, lambda: "inbox" in _waiting_for(r)))
        seen["received"] = send(reader, "inbox", 3)
        join()
        # a failed workflow accepts the message (a recover may consume it) but ends the wait at once
        seen["ended"] = send(rivet.failed_order(f"failed-{via}"), "approval", 30)
        doomed = client.waiter.get_or_create(f"doomed-{via}")
        join = in_background(lambda h=doomed: _destroy_once_sent(h))
        seen["destroyed"] = send(doomed, "approval", 30)
        join()
        answers[via] = seen
    assert answers["http"] == answers["python"]
    assert answers["http"] == {
        "not received": "timed out: the workflow has not received the message yet (is it waiting on this queue?)",
        "received": "timed out: the workflow received the message but has not completed it (was it received "
        "with completable=True, and does the workflow call message.complete()?)",
        "ended": "the workflow failed without completing the message",
        "destroyed": "the actor was destroyed before completing the message",
    }


def _waiting_for(handle) -> list:
    """The queues the actor waits on once it has received a message (else [])."""
    from rivet_workflows import models

    row = models.Actor.objects.filter(pk=handle.actor_id).first()
    received = models.QueueMessage.objects.filter(actor_id=handle.actor_id, status="received").exists()
    return list(row.waiting_for or []) if row is not None and received else []


def _destroy_once_sent(handle):
    from rivet_workflows import models

    end = time.monotonic() + 15
    while not models.QueueMessage.objects.filter(actor_id=handle.actor_id).exists():
        if time.monotonic() > end:
            raise AssertionError("the message never arrived")
        time.sleep(0.01)
    handle.destroy()


def test_the_answer_schema_has_the_detail_and_the_timeout_bound():
    from rivet_workflows.api import api as ninja_api

    components = ninja_api.get_openapi_schema()["components"]["schemas"]
    assert "detail" in components["SendOut"]["properties"]
    assert components["SendIn"]["properties"]["timeout"]["anyOf"][0]["maximum"] == 300.0


@pytest.mark.parametrize("wait", [False, True])
def test_sending_to_an_actor_without_a_workflow_is_409_no_workflow_and_stores_nothing(api, rivet, wait):  # noqa: F811
    """``counter`` has no run function: nothing would ever receive the message (it used to be a 202)."""
    from rivet_workflows.engine.model import errors

    handle = rivet.client.counter.get_or_create("no-wf")
    body = {"body": 1, "wait": True, "timeout": 1} if wait else {"body": 1}
    answer = assert_error(post(api, f"/actors/{handle.actor_id}/queues/whatever", body), 409, "no_workflow")
    assert answer["group"] == "queue" and "no workflow" in answer["message"]
    assert rivet.runtime.store.pending_messages(handle.actor_id, None, 10) == []
    with pytest.raises(errors.NoWorkflowError):
        handle.send("whatever", 1, wait=wait)


@pytest.mark.parametrize("wait", [False, True])
@pytest.mark.parametrize("finish", ["completed", "cancelled"])
def test_sending_to_a_completed_or_cancelled_workflow_is_409_workflow_finished_and_stores_nothing(
    api,  # noqa: F811
    rivet,
    finish,
    wait,
):
    """Nothing would consume it (it used to be a 202 and a message pending forever); Python raises the same."""
    from rivet_workflows import WorkflowFinishedError

    handle = rivet.client.order.get_or_create(f"{finish}-{wait}")
    if finish == "cancelled":
        handle.cancel()
    rivet.drain()
    assert handle.workflow_state() == finish
    body = {"body": 1, "wait": True, "timeout": 5} if wait else {"body": 1}
    answer = assert_error(
        post(api, f"/actors/{handle.actor_id}/queues/approval", body), 409, "workflow_finished"
    )
    assert answer["group"] == "queue" and f"is {finish}" in answer["message"]
    assert answer["metadata"] == {"actor_id": handle.actor_id, "workflow_state": finish, "queue": "approval"}
    assert rivet.runtime.store.pending_messages(handle.actor_id, None, 10) == []
    with pytest.raises(WorkflowFinishedError):
        handle.send("approval", 1, wait=wait)
