"""Prometheus metrics of rivet_workflows (DESIGN.md section 14): the observer that counts, the gauges read at
scrape time and the exposition; the Django view serving it is ``rivet_workflows.metrics.view``.

Needs prometheus-client (the ``[metrics]`` extra); without it ``observer()`` is None and ``view`` answers 501.
Counted by the engine's observer hooks (``engine.observe``), in the process that does the work:

* ``rivet_steps_total{actor,status}``: step attempts by how they ended (completed, failed: retried later,
  exhausted: no retry left, abandoned: the run unwound during it);
* ``rivet_step_duration_seconds{actor}``: histogram of step attempt durations;
* ``rivet_workflows_finished_total{actor,state}``: workflows completed, failed or cancelled;
* ``rivet_wake_lateness_seconds``: histogram of a run's start minus the wake-up it was due at;
* ``rivet_lease_takeovers_total``: runs that resumed a step attempt whose executor was lost.

Read with one store query (``Store.actor_counts``) at each scrape: ``rivet_actors{actor,state}``,
``rivet_actors_due``, ``rivet_leases_expired``.

Celery workers are separate processes: with ``PROMETHEUS_MULTIPROC_DIR`` set (to one empty directory
shared by the web and worker processes, before they start) prometheus-client writes each process's values
there and ``view`` adds them up (its multiprocess mode).
"""

from __future__ import annotations

import logging
import os
import threading
import time
from typing import Any

from ..engine.model import observe

try:
    import prometheus_client
    from prometheus_client import multiprocess
    from prometheus_client.core import GaugeMetricFamily
except ImportError:  # pragma: no cover - the [metrics] extra is not installed
    prometheus_client = None

logger = logging.getLogger("rivet_workflows")

#: bucket bounds (seconds) of rivet_step_duration_seconds
STEP_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0)
#: bucket bounds (seconds) of rivet_wake_lateness_seconds
LATENESS_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)


def available() -> bool:
    """True when prometheus-client is installed."""
    return prometheus_client is not None


class _Metrics:
    """The counters and histograms, created once per process in prometheus-client's default registry."""

    def __init__(self) -> None:
        self.steps = prometheus_client.Counter(
            "rivet_steps", "Step attempts by actor type and how they ended.", ["actor", "status"]
        )
        self.step_duration = prometheus_client.Histogram(
            "rivet_step_duration_seconds", "Step attempt durations.", ["actor"], buckets=STEP_BUCKETS
        )
        self.finished = prometheus_client.Counter(
            "rivet_workflows_finished",
            "Workflows finished, by actor type and final state.",
            ["actor", "state"],
        )
        self.lateness = prometheus_client.Histogram(
            "rivet_wake_lateness_seconds",
            "How late runs start: the run's start minus the wake-up it was due at.",
            buckets=LATENESS_BUCKETS,
        )
        self.takeovers = prometheus_client.Counter(
            "rivet_lease_takeovers", "Runs that resumed a step attempt whose executor was lost."
        )
        # labelled children, looked up once (``labels`` takes a lock and builds a tuple every call)
        self._children: dict[tuple, Any] = {}

    def child(self, metric: Any, *labels: str) -> Any:
        key = (id(metric), *labels)
        found = self._children.get(key)
        if found is None:
            found = self._children[key] = metric.labels(*labels)
        return found


_lock = threading.Lock()
_metrics: _Metrics | None = None


def _get() -> _Metrics:
    global _metrics
    with _lock:
        if _metrics is None:
            _metrics = _Metrics()
        return _metrics


class _StepTimer(observe.Observation):
    __slots__ = ("metrics", "actor", "started")

    def __init__(self, metrics: _Metrics, actor: str) -> None:
        self.metrics = metrics
        self.actor = actor
        self.started = time.perf_counter()

    def end(self, status: str | None = None, error: BaseException | None = None) -> None:
        m = self.metrics
        m.child(m.step_duration, self.actor).observe(time.perf_counter() - self.started)
        m.child(m.steps, self.actor, status or "unknown").inc()


class PrometheusObserver(observe.Observer):
    """The engine observer that updates the counters and histograms (see the module docstring)."""

    def __init__(self) -> None:
        self.metrics = _get()

    def run(self, actor: Any, now: Any) -> observe.Observation:
        if now is not None and actor.wake_at is not None:
            self.metrics.lateness.observe(max((now - actor.wake_at).total_seconds(), 0.0))
        return observe.NOTHING

    def step(self, actor: Any, step: str, attempt: int) -> observe.Observation:
        return _StepTimer(self.metrics, actor.name)

    def workflow_finished(self, name: str, state: str) -> None:
        m = self.metrics
        m.child(m.finished, name, state).inc()

    def lease_taken_over(self, name: str) -> None:
        self.metrics.takeovers.inc()


def observer() -> PrometheusObserver | None:
    """The metrics observer of this process, or None when prometheus-client is not installed."""
    return PrometheusObserver() if available() else None


class ActorGauges:
    """A prometheus-client collector of the scrape-time gauges: one ``store.actor_counts()`` per scrape."""

    def __init__(self, store: Any) -> None:
        self.store = store

    def collect(self) -> Any:
        """``rivet_actors{actor,state}``, ``rivet_actors_due`` and ``rivet_leases_expired``."""
        counts = self.store.actor_counts()
        actors = GaugeMetricFamily(
            "rivet_actors", "Live actors by type and workflow state.", labels=["actor", "state"]
        )
        for (name, state), n in sorted(counts.by_state.items()):
            actors.add_metric([name, state], n)
        yield actors
        yield GaugeMetricFamily(
            "rivet_actors_due", "Actors due to run now (waiting for an executor).", value=counts.due
        )
        yield GaugeMetricFamily(
            "rivet_leases_expired",
            "Unfinished actors whose executor's lease expired (it died or stalled).",
            value=counts.leases_expired,
        )


class _ThisProcess:
    """A collector of prometheus-client's default registry (this process's values, single-process mode)."""

    def collect(self) -> Any:
        return prometheus_client.REGISTRY.collect()


def exposition(store: Any) -> tuple[bytes, str]:
    """``(body, content type)`` of one scrape: the counters and histograms (of every process that wrote
    to ``PROMETHEUS_MULTIPROC_DIR`` when it is set, else of this process, with its default-registry
    metrics) plus the gauges of ``store``."""
    registry = prometheus_client.CollectorRegistry(auto_describe=False)
    if os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        multiprocess.MultiProcessCollector(registry)
    else:
        registry.register(_ThisProcess())
    registry.register(ActorGauges(store))
    return prometheus_client.generate_latest(registry), prometheus_client.CONTENT_TYPE_LATEST
