"""OpenTelemetry spans of runs, step attempts, sends and creations, with the SDK's in-memory exporter."""

from __future__ import annotations

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode

from rivet_workflows import tracing
from rivet_workflows.engine.model import ports
from rivet_workflows.engine.runtime.runtime import Runtime
from rivet_workflows.testing import InlineDispatcher, MemoryStore, drain


@pytest.fixture
def spans():
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    yield provider, exporter
    provider.shutdown()


def _runtime(provider):
    from tests.ops import inspect_registry

    observer = tracing.TracingObserver(provider.get_tracer("test"))
    return Runtime(MemoryStore(), InlineDispatcher(), inspect_registry.registry, observer=observer)


def test_runs_and_step_attempts_join_the_trace_of_the_request_that_created_the_actor(spans):
    provider, exporter = spans
    runtime = _runtime(provider)
    tracer = provider.get_tracer("web")
    with tracer.start_as_current_span("POST /orders") as request:
        handle = runtime.client().order.create("t-1")
    assert runtime.store.get_actor(handle.actor_id).trace_context["traceparent"]
    drain(runtime)
    with tracer.start_as_current_span("POST /approve") as approval:
        handle.send("approve", "ann")
    drain(runtime)
    assert handle.workflow_state() == ports.COMPLETED

    finished = exporter.get_finished_spans()
    trace_id = request.get_span_context().trace_id
    create = next(s for s in finished if s.name == "rivet.create")
    assert create.parent.span_id == request.get_span_context().span_id
    assert create.attributes["rivet.actor.id"] == handle.actor_id
    runs = [s for s in finished if s.name == "rivet.run"]
    assert len(runs) == 2
    for run in runs:  # every run of the actor is a child of its creation, in the request's trace
        assert run.context.trace_id == trace_id and run.parent.span_id == create.context.span_id
        assert run.attributes["rivet.actor.name"] == "order"
    assert [r.attributes["rivet.workflow.state"] for r in runs] == ["sleeping", "completed"]

    send = next(s for s in finished if s.name == "rivet.send")
    assert send.parent.span_id == approval.get_span_context().span_id
    assert send.attributes["rivet.queue.name"] == "approve"
    # the run that received the approval links to the send
    assert [link.context.span_id for link in runs[1].links] == [send.context.span_id]

    steps = [s for s in finished if s.name == "rivet.step"]
    seen = [
        (
            s.attributes["rivet.step.name"],
            s.attributes["rivet.step.attempt"],
            s.attributes["rivet.step.status"],
        )
        for s in steps
    ]
    assert seen == [("reserve", 1, "completed"), ("charge", 1, "failed"), ("charge", 2, "completed")]
    assert {s.parent.span_id for s in steps} <= {r.context.span_id for r in runs}
    failed = steps[1]
    assert failed.status.status_code == StatusCode.ERROR
    assert failed.events[0].name == "exception"
    assert failed.events[0].attributes["exception.message"] == "card network down"


def test_without_a_recording_tracer_nothing_is_stored():
    from opentelemetry.trace import NoOpTracer

    from tests.ops import inspect_registry

    observer = tracing.TracingObserver(NoOpTracer())
    runtime = Runtime(MemoryStore(), InlineDispatcher(), inspect_registry.registry, observer=observer)
    handle = runtime.client().order.create("t-2")
    assert runtime.store.get_actor(handle.actor_id).trace_context is None
    drain(runtime)
    assert handle.workflow_state() == ports.SLEEPING


def test_trace_link_fills_the_template_with_the_trace_id():
    from rivet_workflows import display

    carrier = {"traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"}
    assert display.trace_link(carrier, None) == ("4bf92f3577b34da6a3ce929d0e0e4736", None)
    assert display.trace_link(carrier, "http://jaeger:16686/trace/{trace_id}") == (
        "4bf92f3577b34da6a3ce929d0e0e4736",
        "http://jaeger:16686/trace/4bf92f3577b34da6a3ce929d0e0e4736",
    )
    assert display.trace_link(None, "http://x/{trace_id}") == (None, None)
    assert display.trace_link({"traceparent": "garbage"}, None) == (None, None)


def test_without_an_sdk_the_default_observer_attaches_no_span_yet_passes_a_remote_parent_on():
    """With the API alone (no SDK configured in this process) the default observer starts nothing under an
    invalid parent (no context attached per step), but a remote parent (an HTTP request's ``traceparent``)
    still reaches the actor's stored trace context, as the no-op tracer passes it on."""
    from opentelemetry import trace

    from rivet_workflows.engine.model import observe
    from tests.ops import inspect_registry

    if not isinstance(trace.get_tracer_provider(), (trace.ProxyTracerProvider, trace.NoOpTracerProvider)):
        pytest.skip("an SDK tracer provider was set globally in this process")
    observer = tracing.TracingObserver()
    assert observer.step(object(), "charge", 1) is observe.NOTHING
    assert observer.create("order", ["t-3"]) is observe.NOTHING
    runtime = Runtime(MemoryStore(), InlineDispatcher(), inspect_registry.registry, observer=observer)
    parent = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
    with tracing.request_context({"traceparent": parent}):
        assert observer.create("order", ["t-4"]) is not observe.NOTHING
        handle = runtime.client().order.create("t-4")
    stored = runtime.store.get_actor(handle.actor_id).trace_context
    assert stored is not None and stored["traceparent"].startswith("00-0af7651916cd43dd8448eb211c80319c-")
    quiet = runtime.client().order.create("t-5")
    assert runtime.store.get_actor(quiet.actor_id).trace_context is None
    drain(runtime)
    assert handle.workflow_state() == quiet.workflow_state() == ports.SLEEPING
