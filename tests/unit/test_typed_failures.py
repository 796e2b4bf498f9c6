"""Typed failures (DESIGN.md section 13): ``StepResult.failure`` is a ``StepFailure`` and ``TryResult.failure``
a ``TryFailure``, with attribute access as the spec writes it, mapping access, equality with the old dicts,
and a round trip through state."""

from __future__ import annotations

import copy
import pickle

import rivet_workflows
from rivet_workflows import ErrorInfo, StepFailure, TryFailure
from rivet_workflows.engine.model import serde
from rivet_workflows.engine.model.definitions import setup, workflow
from rivet_workflows.testing import drain, make_runtime

# --- the spec's "Handling terminal failures as data" example, ported literally ----------------------------


async def charge_card(order_id: str) -> str:
    raise RuntimeError(f"card declined for {order_id}")


async def run(ctx):
    async def charge_body(_ctx):
        return await charge_card("order-123")

    charge = await ctx.try_step(name="charge-card", max_retries=3, retry_backoff_base=0, run=charge_body)

    def store_charge_result(step):
        if not charge.ok:
            step.state["status"] = "manual-review"
            step.state["reason"] = charge.failure.error.message
            return
        step.state["status"] = "paid"
        step.state["reason"] = None

    await ctx.step("store-charge-result", store_charge_result)


payment_actor = workflow(
    state={"status": "pending", "reason": None},
    run=run,
    actions={"get_state": lambda c: c.state},
)


def test_the_spec_payment_example_reads_charge_failure_error_message():
    runtime = make_runtime(setup(use={"payment_actor": payment_actor}))
    handle = runtime.client().payment_actor.get_or_create(["order-123"])
    drain(runtime)
    assert handle.call("get_state") == {"status": "manual-review", "reason": "card declined for order-123"}


# --- the types ------------------------------------------------------------------------------------------


def _step_failure() -> StepFailure:
    return StepFailure("exhausted", "charge-card", 4, {"name": "RuntimeError", "message": "declined"})


def test_a_step_failure_reads_as_attributes_and_keys_and_equals_the_old_dict():
    failure = _step_failure()
    assert failure.kind == "exhausted" and failure.step_name == "charge-card" and failure.attempts == 4
    assert failure.error.message == "declined" and failure["error"]["message"] == "declined"
    assert isinstance(failure.error, ErrorInfo)
    assert failure.error.stack is None and failure.error.metadata is None  # absent fields read as None
    assert failure == {
        "kind": "exhausted",
        "step_name": "charge-card",
        "attempts": 4,
        "error": {"name": "RuntimeError", "message": "declined"},
    }
    assert dict(failure.error) == {"name": "RuntimeError", "message": "declined"}


def test_a_try_failure_carries_its_step_failure():
    failure = TryFailure("step", "charge-card", {"name": "RuntimeError", "message": "x"}, _step_failure())
    assert failure.source == "step" and failure.step.attempts == 4 and failure.error.name == "RuntimeError"
    assert TryFailure("block", "b", {"name": "ValueError", "message": "y"}).step is None
    assert "step" not in TryFailure("block", "b", {"name": "ValueError", "message": "y"})


def test_failures_survive_state_pickle_and_copy_as_their_type():
    failure = TryFailure("step", "charge-card", {"name": "RuntimeError", "message": "x"}, _step_failure())
    state = {"failure": failure, "errors": [failure.error]}
    back = serde.loads(serde.dumps(state))
    assert back == state
    assert type(back["failure"]) is TryFailure and back["failure"].step.error.message == "declined"
    assert type(back["errors"][0]) is ErrorInfo
    assert pickle.loads(pickle.dumps(failure)) == failure
    assert type(copy.deepcopy(failure).step) is StepFailure
    # people and HTTP clients see the plain dict, with no type annotation
    plain, types = serde.to_plain(state)
    assert plain["failure"]["step"]["error"] == {"name": "RuntimeError", "message": "declined"}
    assert types == {}


def test_an_unknown_field_is_an_attribute_error_and_fields_are_read_only():
    failure = _step_failure()
    try:
        failure.nope  # noqa: B018
    except AttributeError as exc:
        assert "kind" in str(exc)
    else:  # pragma: no cover
        raise AssertionError("expected AttributeError")
    try:
        failure.kind = "x"  # type: ignore[misc]
    except AttributeError:
        pass
    else:  # pragma: no cover
        raise AssertionError("expected AttributeError")


async def _try_block(ctx):
    def boom(step):
        raise ValueError("nope")

    async def block(b):
        await b.step("inner", boom, max_retries=0)

    result = await ctx.try_("flow", block)

    def keep(step):
        step.state["failure"] = result.failure
        step.state["kind"] = result.failure.step.kind
        step.state["message"] = result.failure.error.message

    await ctx.step("keep", keep)


def test_try_result_failure_is_typed_and_storable_in_state():
    runtime = make_runtime(setup(use={"t": workflow(run=_try_block, state={})}))
    handle = runtime.client().t.get_or_create(["x"])
    drain(runtime)
    state = runtime.store.get_actor(handle.actor_id).state
    assert state["kind"] == "exhausted" and state["message"] == "nope"
    assert isinstance(state["failure"], TryFailure) and state["failure"].name == "inner"
    assert state["failure"]["step"]["step_name"] == "inner"


def test_the_names_are_exported():
    for name in ("StepFailure", "TryFailure", "ErrorInfo"):
        assert name in rivet_workflows.__all__
