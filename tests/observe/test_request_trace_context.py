"""The W3C ``traceparent`` of the HTTP request that creates, sends or calls becomes the parent of the
``rivet.create``/``rivet.send`` spans, with no Django instrumentation (DESIGN.md section 16;
docs/howto/monitoring.md)."""

from __future__ import annotations

import json

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from rivet_workflows import tracing
from tests.api.support import api_user
from tests.api.support import rivet as rivet  # noqa: F401 - the fixture

TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736"
CALLER_SPAN = "00f067aa0ba902b7"
TRACEPARENT = f"00-{TRACE_ID}-{CALLER_SPAN}-01"


@pytest.fixture
def exporter(rivet, monkeypatch):
    """The Django runtime's spans go to an in-memory exporter (the tracing observer's tracer is built from
    ``tracing._tracer`` when the runtime is)."""
    spans = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(spans))
    monkeypatch.setattr(tracing, "_tracer", provider.get_tracer("test"))
    rivet.configure(REGISTRY="tests.ops.inspect_registry.registry")  # a new runtime, with that tracer
    yield spans
    provider.shutdown()


@pytest.fixture
def api(client, django_user_model):
    client.force_login(api_user(django_user_model))
    return client


def _post(api, path, body, traceparent=TRACEPARENT):
    headers = {"traceparent": traceparent} if traceparent else {}
    return api.post(f"/api/rivet{path}", json.dumps(body), content_type="application/json", headers=headers)


@pytest.mark.django_db(transaction=True)
def test_the_request_traceparent_parents_rivet_create_and_rivet_send(api, rivet, exporter):
    created = _post(api, "/actors", {"name": "order", "key": "t-1"})
    assert created.status_code == 200, created.content
    actor_id = created.json()["actor_id"]
    rivet.drain()
    sent = _post(api, f"/actors/{actor_id}/queues/approve", {"body": "ann"}, f"00-{TRACE_ID}-{'1' * 16}-01")
    assert sent.status_code == 202, sent.content

    spans = exporter.get_finished_spans()
    create = next(s for s in spans if s.name == "rivet.create")
    assert create.context.trace_id == int(TRACE_ID, 16)
    assert create.parent is not None and create.parent.span_id == int(CALLER_SPAN, 16)
    assert create.parent.is_remote
    send = next(s for s in spans if s.name == "rivet.send")
    assert send.context.trace_id == int(TRACE_ID, 16) and send.parent.span_id == int("1" * 16, 16)
    # the runs join the caller's trace too (they are children of rivet.create)
    rivet.drain()
    runs = [s for s in exporter.get_finished_spans() if s.name == "rivet.run"]
    assert runs and all(r.context.trace_id == int(TRACE_ID, 16) for r in runs)


@pytest.mark.django_db(transaction=True)
def test_a_request_without_trace_context_starts_a_new_trace(api, rivet, exporter):
    _post(api, "/actors", {"name": "order", "key": "t-2"}, traceparent=None)
    _post(api, "/actors", {"name": "order", "key": "t-3"}, traceparent="not-a-traceparent")
    creates = [s for s in exporter.get_finished_spans() if s.name == "rivet.create"]
    assert len(creates) == 2 and all(s.parent is None for s in creates)


def test_a_current_span_is_left_as_the_parent():
    provider = TracerProvider()
    with provider.get_tracer("web").start_as_current_span("GET /") as current:
        with tracing.request_context({"traceparent": TRACEPARENT}):
            from opentelemetry import trace

            assert trace.get_current_span() is current
