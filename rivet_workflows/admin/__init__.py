"""The inspector in the Django admin (DESIGN.md section 8): actor list, run trace, replay and recover.

Read-only everywhere: no add, change or delete. The replay/recover buttons POST (with CSRF) to extra views
registered through ``get_urls`` and call the engine (``engine.repairs``), never the ORM; they need the
``rivet_workflows.replay_workflow`` permission and report through ``message_user``.
"""

from __future__ import annotations

from .actors import ActorAdmin

__all__ = ["ActorAdmin"]
