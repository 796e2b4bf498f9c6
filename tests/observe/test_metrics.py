"""Prometheus metrics: the observer's counters and histograms, the scrape-time gauges and the view."""

from __future__ import annotations

from datetime import timedelta

import pytest
from prometheus_client import REGISTRY
from prometheus_client.parser import text_string_to_metric_families

from rivet_workflows import django_runtime, metrics, models
from rivet_workflows.engine.model import ports
from rivet_workflows.engine.runtime.runtime import Runtime
from rivet_workflows.testing import InlineDispatcher, MemoryStore, drain


def value(name: str, **labels: str) -> float:
    return REGISTRY.get_sample_value(name, labels) or 0.0


def scrape(body: bytes) -> dict[tuple[str, tuple], float]:
    """The samples of an exposition by (name, sorted labels)."""
    samples = {}
    for family in text_string_to_metric_families(body.decode()):
        for sample in family.samples:
            samples[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return samples


def test_steps_failures_and_finished_workflows_are_counted_per_type():
    from tests.ops import inspect_registry

    runtime = Runtime(
        MemoryStore(), InlineDispatcher(), inspect_registry.registry, observer=metrics.observer()
    )
    before = {
        "completed": value("rivet_steps_total", actor="order", status="completed"),
        "failed": value("rivet_steps_total", actor="order", status="failed"),
        "durations": value("rivet_step_duration_seconds_count", actor="order"),
        "finished": value("rivet_workflows_finished_total", actor="order", state="completed"),
        "late": value("rivet_wake_lateness_seconds_count"),
    }
    handle = runtime.client().order.create("m-1")
    drain(runtime)
    handle.send("approve", "ann")
    drain(runtime)
    assert handle.workflow_state() == ports.COMPLETED
    assert value("rivet_steps_total", actor="order", status="completed") - before["completed"] == 2
    assert (
        value("rivet_steps_total", actor="order", status="failed") - before["failed"] == 1
    )  # charge, retried
    assert value("rivet_step_duration_seconds_count", actor="order") - before["durations"] == 3
    assert value("rivet_workflows_finished_total", actor="order", state="completed") - before["finished"] == 1
    assert value("rivet_wake_lateness_seconds_count") - before["late"] >= 2  # created, then woken by the send


@pytest.mark.django_db(transaction=True)
def test_the_view_serves_counters_and_the_gauges_read_at_scrape_time(client, settings):
    settings.RIVET_WORKFLOWS = {
        "REGISTRY": "tests.ops.inspect_registry.registry",
        "DISPATCHER": "rivet_workflows.driver.dispatch.LocalDispatcher",
        "LIVE_WAIT_THRESHOLD": 0.0,
    }
    django_runtime.reset_runtime()
    try:
        orders = django_runtime.client().order
        done = orders.create("v-1")
        orders.create("v-2")
        django_runtime.drain(timeout=2)
        done.send("approve", "ann")
        django_runtime.drain(timeout=2)
        orders.create("v-3")  # due, not run yet
        stuck = orders.create("v-4")
        past = django_runtime.get_runtime().store.now() - timedelta(seconds=5)
        models.Actor.objects.filter(pk=stuck.actor_id).update(lease_owner="dead", lease_expires_at=past)
        response = client.get("/metrics")
    finally:
        django_runtime.reset_runtime()
    assert response.status_code == 200 and response["Content-Type"].startswith("text/plain")
    samples = scrape(response.content)
    assert samples[("rivet_actors", (("actor", "order"), ("state", "completed")))] == 1
    assert samples[("rivet_actors", (("actor", "order"), ("state", "sleeping")))] == 1
    assert samples[("rivet_actors", (("actor", "order"), ("state", "pending")))] == 2
    assert samples[("rivet_actors_due", ())] == 2  # v-3, and v-4 whose executor died
    assert samples[("rivet_leases_expired", ())] == 1
    assert samples[("rivet_steps_total", (("actor", "order"), ("status", "completed")))] >= 2
    assert ("rivet_step_duration_seconds_bucket", (("actor", "order"), ("le", "+Inf"))) in samples
    assert client.post("/metrics").status_code == 405


def test_a_suspension_is_counted_and_the_gauge_shows_suspended_actors():
    from rivet_workflows.engine.model.definitions import setup, workflow

    async def run(ctx):
        await ctx.step("one", lambda s: 1)
        return ctx.input.get("typo")  # no input: AttributeError, a code error -> suspended

    registry = setup(use={"typo_flow": workflow(run=run)})
    store = MemoryStore()
    runtime = Runtime(store, InlineDispatcher(), registry, observer=metrics.observer())
    before = value("rivet_workflows_finished_total", actor="typo_flow", state="suspended")
    runtime.client().typo_flow.create("t-1")
    drain(runtime)
    assert value("rivet_workflows_finished_total", actor="typo_flow", state="suspended") - before == 1
    assert store.actor_counts().by_state == {("typo_flow", ports.SUSPENDED): 1}
    gauges = metrics.ActorGauges(store)
    samples = {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in gauges.collect()
        for s in family.samples
    }
    assert samples[("rivet_actors", (("actor", "typo_flow"), ("state", "suspended")))] == 1
