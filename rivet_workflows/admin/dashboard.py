"""The admin dashboard (DESIGN.md section 12): counts per type and state, the last hour's completions and
failures per minute as an inline SVG chart (no CDN, no script), expired leases, the oldest due actor and
the steps failing most. Reads only; every number is one aggregate query on the actor or history table."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from django.contrib import admin
from django.core.exceptions import PermissionDenied
from django.db.models import Case, Count, F, IntegerField, Q, Sum, When
from django.db.models.functions import TruncMinute
from django.http import HttpRequest, HttpResponse
from django.template.response import TemplateResponse
from django.urls import path, reverse
from django.utils.html import format_html, format_html_join

from .. import access, display, models, sharding
from .. import states as shown_states
from ..engine.model import ports
from ..engine.operate import inspector
from .trace import STATE_COLORS as _STATE_COLORS
from .trace import runtime as _runtime
from .trace import state_badge

#: the chart's window and its buckets
MINUTES = 60
#: how many rows the lists (expired leases, failing steps) show
TOP = 10

_ITERATION = re.compile(r"/~\d+(?=/|$)")
#: what the readers call for a shard that cannot be reached (``sharding.each``'s ``on_down``), or None
OnDown = Callable[[str, BaseException], None] | None


@dataclass
class Minute:
    """One bucket of the chart: its start and the workflows that completed and failed in it."""

    at: datetime
    completed: int = 0
    failed: int = 0


@dataclass
class Dashboard:
    """What the page shows (``build``)."""

    now: datetime
    states: list[str]
    counts: list[tuple[str, list[int], int]]  # (type, count per state, total)
    totals: list[int]
    minutes: list[Minute]
    expired: list[models.Actor] = field(default_factory=list)
    expired_count: int = 0
    oldest_due: models.Actor | None = None
    failing: list[dict] = field(default_factory=list)


def _live(alias: str) -> Any:
    """The live actors of the shard ``alias`` (every reader below runs once per shard and merges)."""
    return models.Actor.objects.using(alias).filter(destroyed=False)


def _counts(
    registry: Any, on_down: OnDown = None
) -> tuple[list[str], list[tuple[str, list[int], int]], list[int]]:
    """Actors per type and the state they show (``states.shown``: ``paused`` for paused unfinished actors,
    ``no_workflow`` for types without a run function), the states in ``states.SHOWN_STATES`` order."""
    grid: dict[str, dict[str, int]] = {}
    run_less = inspector.run_less_types(registry)
    for per_shard in sharding.each(
        lambda alias: [shown_states.count(_live(alias), run_less)], on_down=on_down
    ):
        for (name, state), n in per_shard.items():
            grid.setdefault(name, {})[state] = grid.get(name, {}).get(state, 0) + n
    states = [s for s in shown_states.SHOWN_STATES if any(s in cells for cells in grid.values())]
    counts = [
        (name, [grid[name].get(s, 0) for s in states], sum(grid[name].values())) for name in sorted(grid)
    ]
    totals = [sum(row[1][i] for row in counts) for i in range(len(states))]
    return states, counts, totals


def _minutes(now: datetime, on_down: OnDown = None) -> list[Minute]:
    """Completions and failures per minute over the last hour: workflows now ``completed`` or ``failed``
    whose last change (``updated_at``, which moves on changes only) falls in the minute."""
    start = now.replace(second=0, microsecond=0) - timedelta(minutes=MINUTES - 1)
    buckets = [Minute(start + timedelta(minutes=i)) for i in range(MINUTES)]
    rows = sharding.each(
        lambda alias: (
            _live(alias)
            .filter(workflow_state__in=[ports.COMPLETED, ports.FAILED], updated_at__gte=start)
            .annotate(minute=TruncMinute("updated_at"))
            .values("minute", "workflow_state")
            .annotate(n=Count("pk"))
            .order_by()
        ),
        on_down=on_down,
    )
    for row in rows:
        index = int((row["minute"] - start).total_seconds() // 60)
        if 0 <= index < MINUTES:
            bucket = buckets[index]
            if row["workflow_state"] == ports.COMPLETED:
                bucket.completed += row["n"]
            else:
                bucket.failed += row["n"]
    return buckets


#: the failed attempts of a step entry: all but the last of a completed (or still running) one, every one of
#: a failed (retrying) or exhausted one
_FAILED_ATTEMPTS = Case(
    When(status__in=[ports.ENTRY_FAILED, ports.ENTRY_EXHAUSTED], then=F("attempts")),
    default=F("attempts") - 1,
    output_field=IntegerField(),
)


def _failing(on_down: OnDown = None) -> list[dict]:
    """The steps failing most: the failed attempts of step entries by actor type and step (loop iterations
    merged), most first, and how the entries with a failed attempt ended: ``completed`` after failing (a
    flaky step: what an operator hunting a flaky dependency looks for), still ``retrying``, ``exhausted``."""
    rows = sharding.each(
        lambda alias: (
            models.HistoryEntry.objects.using(alias)
            .filter(kind="step", actor__destroyed=False)
            .filter(Q(attempts__gt=1) | Q(status__in=[ports.ENTRY_FAILED, ports.ENTRY_EXHAUSTED]))
            .values("actor__name", "key")
            .annotate(
                failed=Sum(_FAILED_ATTEMPTS),
                completed=Count("pk", filter=Q(status=ports.ENTRY_COMPLETED)),
                exhausted=Count("pk", filter=Q(status=ports.ENTRY_EXHAUSTED)),
                n=Count("pk"),
            )
            .order_by()
        ),
        on_down=on_down,
    )
    merged: dict[tuple[str, str], dict] = {}
    for row in rows:
        step = _ITERATION.sub("/~n", row["key"])
        item = merged.setdefault(
            (row["actor__name"], step),
            {
                "type": row["actor__name"],
                "step": step,
                "failed": 0,
                "completed": 0,
                "retrying": 0,
                "exhausted": 0,
            },
        )
        item["failed"] += row["failed"] or 0
        item["completed"] += row["completed"]
        item["exhausted"] += row["exhausted"]
        item["retrying"] += row["n"] - row["completed"] - row["exhausted"]
    failing = [item for item in merged.values() if item["failed"] > 0]
    return sorted(failing, key=lambda i: (-i["failed"], -i["exhausted"], i["type"], i["step"]))[:TOP]


def build(on_down: OnDown = None) -> Dashboard:
    """Read everything the dashboard shows, at the store's clock. ``on_down(alias, error)``: called for a
    shard that cannot be reached, left out of the page (``sharding.each``); None: its error is raised."""
    runtime = _runtime()
    now = runtime.store.now()
    states, counts, totals = _counts(runtime.registry, on_down)
    expired: list[models.Actor] = []
    expired_count, due = 0, []

    def leases(alias: str) -> list[tuple[list[models.Actor], int, list[models.Actor]]]:
        unfinished = _live(alias).exclude(workflow_state__in=list(ports.FINISHED_STATES))
        expired_here = unfinished.filter(lease_owner__isnull=False, lease_expires_at__lt=now)
        # a paused actor is never claimed: it is not waiting for a worker, so it is not "due"
        due_here = (
            unfinished.filter(wake_at__lte=now, paused_at__isnull=True)
            .filter(Q(lease_owner__isnull=True) | Q(lease_expires_at__lt=now))
            .order_by("wake_at", "created_at")[:1]
        )
        return [(list(expired_here.order_by("lease_expires_at")[:TOP]), expired_here.count(), list(due_here))]

    for expired_here, count_here, due_here in sharding.each(leases, on_down=on_down):
        expired += expired_here
        expired_count += count_here
        due += due_here
    return Dashboard(
        now=now,
        states=states,
        counts=counts,
        totals=totals,
        minutes=_minutes(now, on_down),
        expired=sorted(expired, key=lambda a: a.lease_expires_at)[:TOP],
        expired_count=expired_count,
        oldest_due=min(due, key=lambda a: (a.wake_at, a.created_at), default=None),
        failing=_failing(on_down),
    )


# --- the chart ---------------------------------------------------------------------------------------

_W, _H, _LEFT, _BOTTOM, _TOP_PAD = 720, 180, 36, 22, 10


def chart_svg(minutes: list[Minute]) -> str:
    """Completions (green) and failures (red) per minute as side-by-side bars in an inline SVG, with the
    y axis' maximum, the minutes-ago ticks and each bar's count as its tooltip (``<title>``)."""
    peak = max([1] + [max(m.completed, m.failed) for m in minutes])
    plot_w, plot_h = _W - _LEFT - 8, _H - _BOTTOM - _TOP_PAD
    slot = plot_w / max(len(minutes), 1)
    bar = max(slot / 2 - 1, 1)
    base = _TOP_PAD + plot_h
    bars = []
    for i, minute in enumerate(minutes):
        x = _LEFT + i * slot
        label = display.format_time(minute.at, date=False)
        for offset, value, color, what in (
            (0, minute.completed, _STATE_COLORS[ports.COMPLETED], "completed"),
            (bar, minute.failed, _STATE_COLORS[ports.FAILED], "failed"),
        ):
            if value:
                h = value / peak * plot_h
                bars.append(
                    (
                        f"{x + offset:.1f}",
                        f"{base - h:.1f}",
                        f"{bar:.1f}",
                        f"{h:.1f}",
                        color,
                        what,
                        f"{value} {what} at {label}",
                    )
                )
    rects = format_html_join(
        "",
        '<rect x="{}" y="{}" width="{}" height="{}" fill="{}" class="rivet-bar-{}"><title>{}</title></rect>',
        bars,
    )
    last = len(minutes) - 1
    marks = [(0, "-1 h")] + [(last - ago, f"-{ago} min") for ago in (45, 30, 15) if last - ago > 0]
    ticks = format_html_join(
        "",
        '<text x="{}" y="{}" text-anchor="middle">{}</text>',
        [(f"{_LEFT + i * slot + slot / 2:.1f}", _H - 6, text) for i, text in [*marks, (last, "now")]],
    )
    return format_html(
        '<svg id="rivet-chart" xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {w} {h}" width="{w}" height="{h}"'
        ' role="img" aria-label="completions and failures per minute over the last hour"'
        ' font-size="10" fill="currentColor">'
        '<line x1="{left}" y1="{base}" x2="{right}" y2="{base}" stroke="#999"/>'
        '<line x1="{left}" y1="{top}" x2="{left}" y2="{base}" stroke="#999"/>'
        '<text x="{lx}" y="{ty}" text-anchor="end">{peak}</text><text x="{lx}" y="{base}" text-anchor="end">0</text>'
        "{rects}{ticks}</svg>",
        w=_W,
        h=_H,
        left=_LEFT,
        right=_W - 8,
        base=f"{base:.1f}",
        top=_TOP_PAD,
        lx=_LEFT - 4,
        ty=_TOP_PAD + 8,
        peak=peak,
        rects=rects,
        ticks=ticks,
    )


# --- the page ----------------------------------------------------------------------------------------


@admin.register(models.Dashboard)
class DashboardAdmin(admin.ModelAdmin):
    """The dashboard as the admin page of the ``Dashboard`` proxy model, so it sits at
    ``/admin/rivet_workflows/dashboard/`` and the app index links it; it needs the actors' view permission."""

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_view_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        """The dashboard is an inspector page: operation ``inspect`` (docs/howto/authorization.md)."""
        return access.role_allows(request.user if request.user.is_authenticated else None, access.INSPECT)

    def has_module_permission(self, request: HttpRequest) -> bool:
        return self.has_view_permission(request)

    def get_urls(self) -> list:
        return [
            path(
                "",
                self.admin_site.admin_view(self.changelist_view),
                name="rivet_workflows_dashboard_changelist",
            )
        ]

    def changelist_view(self, request: HttpRequest, extra_context: dict | None = None) -> HttpResponse:
        """The dashboard page."""
        if not self.has_view_permission(request):
            raise PermissionDenied
        data = build(on_down=sharding.note_down(request))
        actors = reverse("admin:rivet_workflows_actor_changelist")
        context = {
            **self.admin_site.each_context(request),
            "opts": self.model._meta,
            "title": "Workflows dashboard",
            "data": data,
            "state_badges": [state_badge(s) for s in data.states],
            "chart": chart_svg(data.minutes),
            "completed_hour": sum(m.completed for m in data.minutes),
            "failed_hour": sum(m.failed for m in data.minutes),
            "actors_url": actors,
            "overdue": display.duration((data.now - data.oldest_due.wake_at).total_seconds())
            if data.oldest_due is not None and data.oldest_due.wake_at is not None
            else "",
        }
        return TemplateResponse(request, "rivet_workflows/admin/dashboard.html", context)
