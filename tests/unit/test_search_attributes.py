"""Search attributes set by workflow code and step bodies: merged, recorded in the history, replay-safe,
JSON scalars only, read back by ``handle.attributes()`` (DESIGN.md section 19), on MemoryStore and the
Django store of the test database."""

from __future__ import annotations

import pytest

from rivet_workflows import InvalidAttributesError
from rivet_workflows.engine.model import ports
from rivet_workflows.engine.model.definitions import setup, workflow
from rivet_workflows.testing import MemoryStore, drain, make_runtime

CALLS = {"tag": 0}


async def _order(ctx):
    await ctx.set_attributes({"customer": ctx.input["customer"], "total": 120})
    await ctx.step("tag", _tag)
    await ctx.set_attributes({"total": 99.5})
    return "done"


def _tag(step):
    CALLS["tag"] += 1
    step.set_attributes({"stage": "charged", "vip": True})
    return None


@pytest.fixture(params=["memory", pytest.param("django", marks=pytest.mark.django_db(transaction=True))])
def make(request):
    """``make(registry)`` -> a runtime on MemoryStore or on the Django store of the test database."""
    if request.param == "memory":
        return make_runtime
    return request.getfixturevalue("make_django_runtime")


def test_workflow_and_step_attributes_merge_and_are_read_back(make):
    CALLS["tag"] = 0
    runtime = make(setup(use={"order": workflow(run=_order)}))
    handle = runtime.client().order.create("o1", input={"customer": "c-42"})
    assert handle.attributes() == {}
    drain(runtime)
    assert handle.workflow_state() == ports.COMPLETED
    assert handle.attributes() == {"customer": "c-42", "total": 99.5, "stage": "charged", "vip": True}
    kinds = [(e.key, e.kind) for e in runtime.store.load_history(handle.actor_id)]
    assert kinds == [("~attributes1", "attributes"), ("tag", "step"), ("~attributes2", "attributes")]


def test_a_replay_records_nothing_twice_and_keeps_the_attributes(make):
    CALLS["tag"] = 0
    runtime = make(setup(use={"order": workflow(run=_order)}))
    handle = runtime.client().order.create("o1", input={"customer": "c-42"})
    drain(runtime)
    handle.replay("tag")  # replay from the step: the first attributes entry is kept and replayed
    drain(runtime)
    assert CALLS["tag"] == 2 and handle.workflow_state() == ports.COMPLETED
    history = runtime.store.load_history(handle.actor_id)
    assert [e.kind for e in history].count("attributes") == 2
    assert handle.attributes()["customer"] == "c-42"


async def _waits(ctx):
    await ctx.set_attributes({"customer": "c-1"})
    await ctx.sleep("nap", 0)
    message = await ctx.queue.next("go")
    return message.body


async def _waits_without_attributes(ctx):
    await ctx.sleep("nap", 0)
    message = await ctx.queue.next("go")
    return message.body


def test_removing_a_set_attributes_call_does_not_make_a_run_diverge(make):
    registry = setup(use={"order": workflow(run=_waits)})
    runtime = make(registry)
    handle = runtime.client().order.create("o1")
    drain(runtime)
    assert handle.workflow_state() == ports.SLEEPING
    same_store = {"store": runtime.store} if isinstance(runtime.store, MemoryStore) else {}
    newer = make(setup(use={"order": workflow(run=_waits_without_attributes)}), **same_store)
    newer.client().order.get_for_id(handle.actor_id).send("go", "ok")
    drain(newer)
    assert handle.workflow_state() == ports.COMPLETED and handle.record().output == "ok"
    assert handle.attributes() == {"customer": "c-1"}


async def _bad_workflow(ctx):
    await ctx.set_attributes({"items": [1, 2]})


def _bad_step(step):
    CALLS["tag"] += 1
    step.set_attributes({"when": object()})


async def _bad_in_step(ctx):
    await ctx.step("tag", _bad_step, max_retries=3)


@pytest.mark.parametrize(
    "value",
    [{"items": [1, 2]}, {"nested": {"a": 1}}, {"": 1}, {"a.b": 1}, {"nan": float("nan")}, ["not", "a dict"]],
)
def test_only_a_dict_of_json_scalars_is_taken(value):
    from rivet_workflows.engine.model.attributes import check_attributes

    with pytest.raises(InvalidAttributesError) as caught:
        check_attributes(value)
    assert isinstance(caught.value, ValueError) and caught.value.code == "invalid_attributes"


def test_a_bad_value_in_a_step_fails_the_step_without_retrying(make):
    CALLS["tag"] = 0
    runtime = make(setup(use={"order": workflow(run=_bad_in_step)}))
    handle = runtime.client().order.create("o1")
    drain(runtime)
    assert handle.workflow_state() == ports.FAILED
    assert CALLS["tag"] == 1  # a CriticalError: not retried
    assert "JSON scalar" in handle.record().error["message"]
    assert handle.attributes() == {}


def test_a_bad_value_in_workflow_code_writes_no_attribute(make):
    runtime = make(setup(use={"order": workflow(run=_bad_workflow)}))
    handle = runtime.client().order.create("o1")
    drain(runtime)
    assert handle.workflow_state() in (ports.FAILED, ports.SUSPENDED)
    assert handle.attributes() == {}


def _atomic_tag(step):
    step.set_attributes({"booked": True})
    return "ok"


async def _atomic(ctx):
    await ctx.step("book", _atomic_tag, atomic=True)


def test_an_atomic_step_writes_its_attributes_with_its_commit(make):
    runtime = make(setup(use={"order": workflow(run=_atomic)}))
    handle = runtime.client().order.create("o1")
    drain(runtime)
    assert handle.workflow_state() == ports.COMPLETED
    assert handle.attributes() == {"booked": True}
