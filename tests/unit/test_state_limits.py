"""State changes made by actions, scheduled actions and steps pass the same checks as every stored value:
``PayloadTooLargeError`` over ``max_payload_bytes`` and ``SerializationError`` for what cannot be stored;
the change is then not saved (DESIGN.md section 3)."""

from __future__ import annotations

import pytest

from rivet_workflows.engine.model import errors, ports
from rivet_workflows.engine.model.definitions import actor, setup, workflow
from rivet_workflows.testing import drain, make_runtime

LIMIT = 2000


def _grow(c, n):
    c.state["blob"] = "x" * n
    return n


def _replace(c, n):
    c.state = {"blob": "y" * n}


def _runtime():
    counter = actor(state={"blob": ""}, actions={"grow": _grow, "replace": _replace})
    return make_runtime(setup(use={"counter": counter}), max_payload_bytes=LIMIT)


@pytest.mark.parametrize("action", ["grow", "replace"])
def test_an_action_cannot_store_a_state_over_the_limit(action):
    runtime = _runtime()
    handle = runtime.client().counter.get_or_create("k")
    assert handle.call(action, 100) == (100 if action == "grow" else None)
    with pytest.raises(errors.PayloadTooLargeError) as info:
        handle.call(action, LIMIT * 2)
    assert info.value.metadata["where"] == "actor state" and info.value.metadata["limit"] == LIMIT
    assert len(handle.state()["blob"]) == 100  # the oversized change was not saved


def _put_object(c):
    c.state["v"] = object()


@pytest.mark.parametrize("action", ["surrogate", "surrogate-key", "object"])
def test_an_action_cannot_store_an_unstorable_state(action):
    counter = actor(
        state={"blob": ""},
        actions={
            "surrogate": lambda c: c.state.update(v="\ud800"),
            "surrogate-key": lambda c: c.state.update({"\udc00": 1}),
            "object": _put_object,
        },
    )
    runtime = make_runtime(setup(use={"counter": counter}))
    handle = runtime.client().counter.get_or_create("k")
    with pytest.raises(errors.SerializationError) as info:
        handle.call(action)
    assert info.value.metadata["where"] == "actor state"
    assert handle.state() == {"blob": ""}


def test_a_step_state_over_the_limit_fails_the_step_at_once_and_is_not_saved():
    calls = []

    def body(step):
        calls.append(1)
        step.state["blob"] = "z" * (LIMIT * 2)
        return "done"

    async def run(ctx):
        await ctx.step("small", lambda s: s.state.update(small=True))
        return await ctx.step("big", body, max_retries=3)

    runtime = make_runtime(
        setup(use={"wf": actor(state={"blob": ""}, run=workflow(run))}), max_payload_bytes=LIMIT
    )
    handle = runtime.client().wf.get_or_create("k")
    drain(runtime, timeout=5)
    record = runtime.store.get_actor(handle.actor_id)
    assert record.workflow_state == ports.FAILED
    assert len(calls) == 1  # not retried
    assert "over the limit" in record.error["message"]
    assert record.state == {"blob": "", "small": True}
