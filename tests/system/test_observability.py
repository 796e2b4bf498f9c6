"""Metrics and traces with real Celery worker processes (DESIGN.md section 14).

* Two workers count their steps in prometheus-client's multiprocess mode; one scrape of the view adds them
  up (parsed with prometheus-client's parser).
* A worker's spans join the trace of the request that created the actor and link to the one that sent it
  a message (the worker exports its spans to a file: tests/system/span_file.py).
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from rivet_workflows.engine.model import ports

from . import span_file

pytestmark = pytest.mark.system


def _all_done(ids) -> bool:
    from rivet_workflows import models

    return models.Actor.objects.filter(pk__in=ids, workflow_state=ports.COMPLETED).count() == len(ids)


def test_a_scrape_adds_up_the_steps_counted_by_two_worker_processes(cluster, rt, tmp_path, monkeypatch):
    from rivet_workflows import metrics

    multiproc = tmp_path / "prometheus"
    multiproc.mkdir()
    for _ in range(2):
        cluster.start_worker(2, PROMETHEUS_MULTIPROC_DIR=str(multiproc), RIVET_LEASE_SECONDS="15")
    # a step that takes a little while, so that both workers get some of the work
    ids = [rt.client().steps.create(f"m{i}", {"sleep": 0.1}).actor_id for i in range(16)]
    cluster.wait_for(lambda: _all_done(ids), 120, what="16 actors")

    monkeypatch.setenv("PROMETHEUS_MULTIPROC_DIR", str(multiproc))
    body, content_type = metrics.exposition(rt.store)
    assert content_type.startswith("text/plain")
    samples = {}
    for family in text_string_to_metric_families(body.decode()):
        for sample in family.samples:
            samples[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    steps = ("actor", "steps"), ("status", "completed")
    assert samples[("rivet_steps_total", steps)] == 16 * 3
    assert samples[("rivet_step_duration_seconds_count", (("actor", "steps"),))] == 16 * 3
    assert samples[("rivet_workflows_finished_total", (("actor", "steps"), ("state", "completed")))] == 16
    assert samples[("rivet_actors", (("actor", "steps"), ("state", "completed")))] == 16
    assert samples[("rivet_actors_due", ())] == 0
    # the values came from two processes: prometheus-client keeps one file per process and metric type
    writers = {Path(p).stem.rsplit("_", 1)[-1] for p in os.listdir(multiproc) if p.startswith("counter_")}
    assert len(writers) >= 2, (sorted(os.listdir(multiproc)), cluster.logs())


@pytest.fixture
def request_tracer():
    """A tracer provider of the SDK with an in-memory exporter, as the web process would have (handed to
    the test runtime's observer; the global provider is left alone)."""
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    yield provider, exporter
    provider.shutdown()


def test_worker_spans_join_the_trace_of_the_request_that_created_and_messaged_the_actor(
    cluster, rt, tmp_path, request_tracer
):
    from rivet_workflows import tracing

    provider, exporter = request_tracer
    rt.observer = tracing.TracingObserver(provider.get_tracer("web"))
    spans_file = tmp_path / "worker-spans.jsonl"
    cluster.start_worker(RIVET_SPANS_FILE=str(spans_file))
    web = provider.get_tracer("web")

    with web.start_as_current_span("POST /orders") as request:
        waiter = rt.client().waiter.create("w-1", {"timeout": 30}).actor_id
    with web.start_as_current_span("POST /sagas"):
        saga = rt.client().saga.create("s-1").actor_id
    cluster.wait_for(lambda: _waiting(waiter), 60, what="the waiter waits")
    with web.start_as_current_span("POST /approve"):
        rt.client().waiter.get_for_id(waiter).send("approval", {"ok": True})
    cluster.wait_for(lambda: _all_done([waiter]), 60, what="the waiter done")
    cluster.wait_for(lambda: _finished(saga), 60, what="the saga failed")

    local = {s.name: s for s in exporter.get_finished_spans()}
    trace_id = format(request.get_span_context().trace_id, "032x")
    create = next(
        s
        for s in exporter.get_finished_spans()
        if s.name == "rivet.create" and s.attributes["rivet.actor.id"] == waiter
    )
    create_id = format(create.context.span_id, "016x")
    send_id = format(local["rivet.send"].context.span_id, "016x")

    def worker_spans():
        return span_file.read(spans_file)

    cluster.wait_for(
        lambda: (
            len(
                [
                    s
                    for s in worker_spans()
                    if s["attributes"].get("rivet.actor.id") == waiter and s["name"] == "rivet.run"
                ]
            )
            >= 2
        ),
        30,
        what="the worker's run spans",
    )
    spans = worker_spans()
    runs = [s for s in spans if s["name"] == "rivet.run" and s["attributes"]["rivet.actor.id"] == waiter]
    assert runs and all(r["trace_id"] == trace_id and r["parent_id"] == create_id for r in runs), runs
    assert any(send_id in r["links"] for r in runs)  # the run that received the approval
    assert runs[-1]["attributes"]["rivet.workflow.state"] == "completed"
    steps = [s for s in spans if s["name"] == "rivet.step" and s["attributes"]["rivet.actor.id"] == waiter]
    assert {s["attributes"]["rivet.step.name"] for s in steps} == {"read-timeout", "record"}
    assert all(s["trace_id"] == trace_id for s in steps)
    assert {s["parent_id"] for s in steps} <= {r["span_id"] for r in runs}

    ship = [
        s for s in spans if s["name"] == "rivet.step" and s["attributes"].get("rivet.step.name") == "ship"
    ]
    assert ship and ship[0]["status"] == "ERROR" and ship[0]["attributes"]["rivet.step.status"] == "exhausted"
    assert ship[0]["events"][0]["attributes"]["exception.message"] == "card declined"


def _waiting(actor_id) -> bool:
    from rivet_workflows import models

    row = models.Actor.objects.filter(pk=actor_id).values("workflow_state", "waiting_for").first()
    return bool(row and row["workflow_state"] == ports.SLEEPING and "approval" in row["waiting_for"])


def _finished(actor_id) -> bool:
    from rivet_workflows import models

    return models.Actor.objects.filter(pk=actor_id, workflow_state=ports.FAILED).exists()
