"""The inspector in the Django admin (DESIGN.md section 8): actor list, run trace, replay and recover.

Read-only everywhere: no add, change or delete. The replay/recover buttons POST (with CSRF) to extra views
registered through ``get_urls`` and call the engine (``engine.repairs``), never the ORM; they need the
``rivet_workflows.replay_workflow`` permission and report through ``message_user``. The dashboard
(``/admin/rivet_workflows/dashboard/``) shows counts, the last hour's completions and failures, expired
leases, the oldest due actor and the steps failing most; the actor list has bulk actions with a
confirmation page.
"""

from __future__ import annotations

from .actors import ActorAdmin
from .dashboard import DashboardAdmin
from .schedules import ScheduleAdmin

__all__ = ["ActorAdmin", "DashboardAdmin", "ScheduleAdmin"]
