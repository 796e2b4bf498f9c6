"""The Celery app of the example project.

Run a worker with the sweep embedded: ``celery -A project worker -B -l info`` (``-B`` runs Celery beat
inside the worker; beat sends ``rivet_workflows.sweep`` every SWEEP_INTERVAL seconds, which wakes due
actors and recovers expired leases, so the broker never holds long ETAs). Run exactly one worker with
``-B`` per deployment, or a separate ``celery -A project beat``; extra workers need no ``-B``.
"""

from __future__ import annotations

import os

from celery import Celery

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "project.settings")

app = Celery("project")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks(["rivet_workflows"])


def _sweep_interval() -> float:
    from django.conf import settings

    return float(getattr(settings, "RIVET_WORKFLOWS", {}).get("SWEEP_INTERVAL", 1.0))


@app.on_after_finalize.connect
def _setup_periodic_tasks(sender: Celery, **kwargs: object) -> None:
    sender.add_periodic_task(_sweep_interval(), sender.signature("rivet_workflows.sweep"), name="rivet sweep")
