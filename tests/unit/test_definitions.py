"""Actor and workflow definitions, setup/Registry, Loop results, Settings (DESIGN.md section 2)."""

from __future__ import annotations

from datetime import timedelta

import pytest

from rivet_workflows.engine.model import definitions as d
from rivet_workflows.engine.model import errors
from rivet_workflows.engine.model.settings import to_seconds
from rivet_workflows.engine.runtime.runtime import Runtime, Settings


async def run_fn(ctx):
    return None


def test_workflow_with_function_returns_handler_for_actor_run():
    def hook(c, event):
        return None

    handler = d.workflow(run_fn, on_error=hook)
    assert isinstance(handler, d.WorkflowHandler)
    assert handler.fn is run_fn and handler.on_error is hook
    definition = d.actor(state={"n": 0}, run=handler)
    assert definition.run is handler
    assert definition.has_workflow


def test_workflow_with_run_keyword_returns_actor_definition():
    definition = d.workflow(run=run_fn, state={"n": 0}, actions={"get": lambda c: c.state})
    assert isinstance(definition, d.ActorDefinition)
    assert definition.run.fn is run_fn
    assert definition.initial_state() == {"n": 0}
    assert set(definition.actions) == {"get"}


def test_workflow_as_decorator_with_and_without_options():
    @d.workflow
    async def plain(ctx):
        return None

    def hook(c, event):
        return None

    @d.workflow(on_error=hook)
    async def hooked(ctx):
        return None

    assert isinstance(plain, d.WorkflowHandler) and plain.on_error is None
    assert hooked.on_error is hook


def test_workflow_rejects_fn_with_actor_options():
    with pytest.raises(TypeError):
        d.workflow(run_fn, state={})
    with pytest.raises(TypeError):
        d.workflow(state={})


def test_bare_async_function_as_run_is_wrapped():
    definition = d.actor(run=run_fn)
    assert isinstance(definition.run, d.WorkflowHandler)
    assert definition.run.fn is run_fn
    assert d.actor().run is None and not d.actor().has_workflow


def test_initial_state_and_vars_are_deep_copies_per_actor():
    definition = d.actor(state={"items": []}, vars={"cache": {}})
    first = definition.initial_state()
    first["items"].append(1)
    assert definition.initial_state() == {"items": []}
    v = definition.initial_vars()
    v["cache"]["x"] = 1
    assert definition.initial_vars() == {"cache": {}}


def test_create_state_receives_input_and_create_vars_receives_context():
    one = d.actor(create_state=lambda input: {"amount": input["amount"]})
    assert one.initial_state({"amount": 5}) == {"amount": 5}
    two = d.actor(create_state=lambda info, input: {"key": info.key, "input": input})
    assert two.initial_state(3, key=["k"]) == {"key": ["k"], "input": 3}
    with_ctx = d.actor(create_vars=lambda c: {"c": c})
    assert with_ctx.initial_vars("ctx") == {"c": "ctx"}
    no_args = d.actor(create_vars=lambda: {"fresh": True})
    assert no_args.initial_vars("ctx") == {"fresh": True}


def test_state_and_create_state_together_is_an_error():
    with pytest.raises(ValueError):
        d.actor(state={}, create_state=lambda input: {})
    with pytest.raises(TypeError):
        d.actor(actions={"x": 1})
    with pytest.raises(TypeError):
        d.actor(on_wake="not callable")


def test_queues_and_events_accept_dicts_or_name_lists():
    definition = d.actor(queues={"jobs": d.queue()}, events=["done"], run=d.workflow(lambda ctx: None))
    assert isinstance(definition.queues["jobs"], d.QueueDefinition)
    assert isinstance(definition.events["done"], d.EventDefinition)
    definition.check_queue("jobs")
    with pytest.raises(errors.QueueNotFoundError):
        definition.check_queue("other")
    d.actor(run=d.workflow(lambda ctx: None)).check_queue("anything")  # no declared queues: any name goes
    with pytest.raises(errors.NoWorkflowError):  # but only where a workflow would receive it
        d.actor().check_queue("anything")


def test_unknown_action_raises_action_not_found():
    definition = d.actor(actions={"get": lambda c: 1})
    assert definition.get_action("get")(None) == 1
    with pytest.raises(errors.ActionNotFoundError):
        definition.get_action("nope")


def test_setup_names_definitions_and_registry_get():
    payment = d.workflow(run=run_fn)
    shard = d.actor()
    registry = d.setup(use={"payment_actor": payment, "shard_actor": shard})
    assert registry.get("payment_actor") is payment and payment.name == "payment_actor"
    assert registry.names() == ["payment_actor", "shard_actor"]
    assert "shard_actor" in registry and len(registry) == 2
    with pytest.raises(errors.ActorNotFoundError):
        registry.get("missing")


def test_same_definition_under_two_names_keeps_both_names():
    shared = d.actor()
    registry = d.setup(use={"a": shared, "b": shared})
    assert registry.get("a").name == "a"
    assert registry.get("b").name == "b"


def test_setup_rejects_non_identifier_names_and_non_definitions():
    with pytest.raises(ValueError):
        d.setup(use={"not-valid": d.actor()})
    with pytest.raises(TypeError):
        d.setup(use={"x": run_fn})


def test_loop_results():
    assert d.Loop.continue_({"i": 1}) == d.LoopContinue({"i": 1})
    assert d.Loop.continue_().state is None
    assert d.Loop.break_(5) == d.LoopBreak(5)
    assert d.Loop.break_().value is None


def test_unbound_registry_explains_how_to_bind():
    registry = d.setup(use={"x": d.actor()})
    assert not registry.is_bound
    with pytest.raises(RuntimeError, match="make_runtime"):
        registry.client()


def test_runtime_binds_registry_and_swallows_broadcaster_errors():
    registry = d.setup(use={"x": d.actor()})
    seen = []

    def broken(actor_id, name, args):
        seen.append((actor_id, name, args))
        raise RuntimeError("channel layer down")

    runtime = Runtime(store=object(), dispatcher=object(), registry=registry, broadcaster=broken)
    assert registry.runtime is runtime
    runtime.broadcast("a1", "evt", (1, 2))
    assert seen == [("a1", "evt", [1, 2])]
    Runtime(store=object(), dispatcher=object(), registry=registry).broadcast("a1", "evt", ())


def test_settings_defaults():
    s = Settings()
    assert s.lease_seconds == 30.0 and s.max_payload_bytes == 1_048_576
    assert s.live_wait_threshold == 1.0 and s.poll_interval == 0.02


def test_to_seconds_accepts_numbers_and_timedeltas():
    assert to_seconds(timedelta(minutes=1)) == 60.0
    assert to_seconds(2) == 2.0
    assert to_seconds(None) is None
    with pytest.raises(ValueError):
        to_seconds(-1)
    with pytest.raises(TypeError):
        to_seconds("5")
