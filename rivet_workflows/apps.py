"""Django AppConfig of rivet_workflows."""

from __future__ import annotations

from django.apps import AppConfig


class RivetWorkflowsConfig(AppConfig):
    """The ``rivet_workflows`` app: registers system checks and the settings reload hook on ready()."""

    name = "rivet_workflows"
    label = "rivet_workflows"
    verbose_name = "Rivet workflows"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        """Register system checks (checks.py), reset cached settings/runtime on ``setting_changed`` and keep
        Celery's per-run lines about the sweep at DEBUG (``tasks.install_quiet_sweep_logs``)."""
        from . import checks, conf  # noqa: F401 - imported for their registration side effects
        from .driver import tasks  # registers the Celery tasks (a worker needs no autodiscovery of them)

        tasks.install_quiet_sweep_logs()
