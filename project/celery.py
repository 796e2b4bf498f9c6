"""The Celery app of the example project; the manual's install page (docs/tutorial/install.md) shows this
file as ``mysite/celery.py``.

Run a worker with the sweep embedded: ``celery -A project worker -B -l info`` (``-B`` runs Celery beat
inside the worker; beat sends ``rivet_workflows.sweep`` every SWEEP_INTERVAL seconds, which wakes due
actors and recovers expired leases, so the broker never holds long ETAs). Run exactly one worker with
``-B`` per deployment, or a separate ``celery -A project beat``; extra workers need no ``-B``.
"""

from __future__ import annotations

# --- the manual's mysite/celery.py (with "mysite" for "project"): keep the two the same -------------------
import os

from celery import Celery

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "project.settings")

app = Celery("project")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()  # the tasks.py of your apps (rivet_workflows registers its own in ready())


@app.on_after_finalize.connect
def schedule_sweep(sender: Celery, **kwargs: object) -> None:
    """Send ``rivet_workflows.sweep`` every SWEEP_INTERVAL seconds (through Celery beat: -B or celery beat)."""
    from rivet_workflows.conf import rivet_settings

    sweep = sender.signature("rivet_workflows.sweep")
    sender.add_periodic_task(rivet_settings.SWEEP_INTERVAL, sweep, name="rivet sweep")
