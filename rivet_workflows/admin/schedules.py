"""Schedules stored as data in the admin (DESIGN.md section 20): a read-only list with the fire log, and
the actions pause, resume and trigger (operation ``schedule`` of ``rivet_workflows.access``, asked per
schedule with its actor type); they go through ``client().schedules``, never the ORM."""

from __future__ import annotations

from typing import Any

from django.contrib import admin, messages
from django.http import HttpRequest

from .. import access, display, models
from ..conf import rivet_settings
from ..engine.model import errors
from .actors import operator
from .trace import runtime as _runtime


class ScheduleFireInline(admin.TabularInline):
    """The newest fires of a schedule, read-only."""

    model = models.ScheduleFire
    fields = ("tick", "how", "status", "actor_id", "fired_at", "missed")
    readonly_fields = fields
    ordering = ("-tick",)
    extra = 0
    max_num = 0
    can_delete = False
    show_change_link = False

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_view_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return access.role_allows(operator(request), access.INSPECT)


@admin.register(models.Schedule)
class ScheduleAdmin(admin.ModelAdmin):
    """Schedules: id, actor type, key, cadence, paused, next and last fire; actions pause/resume/trigger."""

    list_display = (
        "schedule_id",
        "actor",
        "key_display",
        "cadence",
        "paused",
        "next_fire_display",
        "last_fired_display",
    )
    list_filter = ("actor", "paused")
    search_fields = ("schedule_id",)
    ordering = ("schedule_id",)
    readonly_fields = (
        "schedule_id",
        "actor",
        "key",
        "cron",
        "every",
        "timezone",
        "action",
        "args",
        "catchup",
        "paused",
        "next_fire_at",
        "last_fired_at",
        "created_at",
    )
    exclude = ("input",)  # an input is shown to callers that may inspect, over HTTP
    inlines = [ScheduleFireInline]
    actions = ["pause_selected", "resume_selected", "trigger_selected"]

    # --- read-only, as the rest of the inspector ---------------------------------------------------

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_view_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        """Seeing schedules in the admin is ``inspect``, as seeing actors (staff with ``view_actor``)."""
        return access.role_allows(operator(request), access.INSPECT)

    def has_schedule_permission(self, request: HttpRequest) -> bool:
        """The actions need the ``schedule`` operation (staff with ``view_actor`` and ``replay_workflow``
        in the admin)."""
        return access.role_allows(operator(request), access.SCHEDULE)

    def get_queryset(self, request: HttpRequest) -> Any:
        """Without the actor types the ``AUTHORIZE`` hook refuses to ``list`` to this user."""
        rows = super().get_queryset(request)
        if rivet_settings.AUTHORIZE:
            caller = operator(request)
            names = sorted(set(rows.order_by().values_list("actor", flat=True).distinct()))
            rows = rows.filter(actor__in=[n for n in names if access.allows(request, caller, access.LIST, n)])
        return rows

    # --- columns -----------------------------------------------------------------------------------

    @admin.display(description="key")
    def key_display(self, obj: models.Schedule) -> str:
        return display.key_json(obj.key) if obj.key is not None else "(a new actor per tick)"

    @admin.display(description="cadence")
    def cadence(self, obj: models.Schedule) -> str:
        if obj.cron:
            return f"{obj.cron} ({obj.timezone})"
        return f"every {obj.every:g} s"

    @admin.display(description="next fire", ordering="next_fire_at")
    def next_fire_display(self, obj: models.Schedule) -> str:
        return display.format_time(obj.next_fire_at) if obj.next_fire_at else "—"

    @admin.display(description="last fired", ordering="last_fired_at")
    def last_fired_display(self, obj: models.Schedule) -> str:
        return display.format_time(obj.last_fired_at) if obj.last_fired_at else "—"

    # --- actions -----------------------------------------------------------------------------------

    @admin.action(description="Pause selected schedules", permissions=["schedule"])
    def pause_selected(self, request: HttpRequest, queryset: Any) -> None:
        self._act(request, queryset, "pause", "Paused")

    @admin.action(description="Resume selected schedules", permissions=["schedule"])
    def resume_selected(self, request: HttpRequest, queryset: Any) -> None:
        self._act(request, queryset, "resume", "Resumed")

    @admin.action(description="Fire selected schedules now", permissions=["schedule"])
    def trigger_selected(self, request: HttpRequest, queryset: Any) -> None:
        self._act(request, queryset, "trigger", "Fired")

    def _act(self, request: HttpRequest, queryset: Any, action: str, done: str) -> None:
        """Run ``client().schedules.<action>`` on each selected schedule the caller may ``schedule`` (the
        ``AUTHORIZE`` hook asked per schedule); report what was done and what was refused."""
        schedules = _runtime().client().schedules
        caller = operator(request)
        changed, refused, failed = [], [], []
        for schedule_id, actor in queryset.values_list("schedule_id", "actor"):
            try:
                access.check(request, caller, access.SCHEDULE, actor)
            except (access.ForbiddenError, access.NotAuthenticatedError):
                refused.append(schedule_id)
                continue
            try:
                result = getattr(schedules, action)(schedule_id)
            except errors.RivetWorkflowsError as exc:
                failed.append(f"{schedule_id} ({exc})")
                continue
            if action == "trigger" and result.status != "ok":
                failed.append(f"{schedule_id} (the fire failed: {(result.error or {}).get('message', '')})")
                continue
            changed.append(schedule_id)
        if changed:
            self.message_user(request, f"{done}: {', '.join(changed)}", messages.SUCCESS)
        if refused:
            self.message_user(request, f"Not allowed: {', '.join(refused)}", messages.ERROR)
        if failed:
            self.message_user(request, f"Failed: {', '.join(failed)}", messages.ERROR)
