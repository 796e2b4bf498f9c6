"""Metrics and traces with real Celery worker processes (DESIGN.md section 14).

* Two workers count their steps in prometheus-client's multiprocess mode; one scrape of the view adds them
  up (parsed with prometheus-client's parser).
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from rivet_workflows.engine import ports

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
