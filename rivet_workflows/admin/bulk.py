"""The actor list's bulk actions (DESIGN.md sections 12, 16, 19): recover, cancel, pause, resume, retry and replay
many actors (the ticked rows, or with "select all N" every actor of the filtered list, acted on in batches),
with a confirmation page and a reason, each through the engine as its own button would, one ``bulk_<action>``
audit row per actor changed; they need the operations ``replay`` (recover) and ``operate`` (cancel,
pause, resume) of ``rivet_workflows.access``, asked per actor.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django.contrib import admin, messages
from django.db.models import Q
from django.http import HttpRequest, HttpResponse
from django.template.response import TemplateResponse
from django.urls import reverse

from .. import access, display, states
from ..engine.operate import bulk as engine_bulk
from ..engine.operate import inspector
from .trace import runtime as _runtime
from .trace import state_badge

#: actors listed on the confirmation page (the rest are counted); a "select all N" acts on every one
CONFIRM_LISTED = 100
#: actors read per batch when acting (keyset on (created_at, actor_id): no lock on more than one actor)
BATCH = 200

#: the bulk actions of the actor list: name -> (the verb its messages use, the operation of
#: ``rivet_workflows.access`` it is); each acts through ``engine.bulk.run``: one ``bulk_<name>`` audit row
#: per actor changed
BULK_ACTIONS: dict[str, tuple[str, str]] = {
    "recover": ("recover", access.REPLAY),
    "cancel": ("cancel", access.OPERATE),
    "pause": ("pause", access.OPERATE),
    "resume": ("resume", access.OPERATE),
    "retry": ("retry", access.REPLAY),
    "replay": ("replay", access.REPLAY),
}
#: actors named in one message of a bulk action's report (the rest are counted)
SHOWN_PER_MESSAGE = 20
#: the past tense of each verb, for the list of what was changed
_DONE = {
    "recover": "Recovered",
    "cancel": "Cancelled",
    "pause": "Paused",
    "resume": "Resumed",
    "retry": "Retried",
    "replay": "Replayed",
}


class BulkActionsMixin:
    """The bulk actions of ``ActorAdmin`` (a ``ModelAdmin``: ``message_user``, ``admin_site``, ``model``;
    ``has_replay_permission`` and ``has_operate_permission`` gate them, and each actor is checked with
    ``access.check`` before it is changed)."""

    actions = [
        "recover_selected",
        "cancel_selected",
        "pause_selected",
        "resume_selected",
        "retry_selected",
        "replay_selected",
    ]
    message_user: Callable[..., Any]
    admin_site: Any
    model: Any

    @admin.action(description="Recover selected failed workflows", permissions=["replay"])
    def recover_selected(self, request: HttpRequest, queryset: Any) -> HttpResponse | None:
        return self._bulk(request, queryset, "recover")

    @admin.action(description="Cancel selected workflows", permissions=["operate"])
    def cancel_selected(self, request: HttpRequest, queryset: Any) -> HttpResponse | None:
        return self._bulk(request, queryset, "cancel")

    @admin.action(description="Pause selected workflows", permissions=["operate"])
    def pause_selected(self, request: HttpRequest, queryset: Any) -> HttpResponse | None:
        return self._bulk(request, queryset, "pause")

    @admin.action(description="Resume selected paused workflows", permissions=["operate"])
    def resume_selected(self, request: HttpRequest, queryset: Any) -> HttpResponse | None:
        return self._bulk(request, queryset, "resume")

    @admin.action(description="Retry selected suspended workflows", permissions=["replay"])
    def retry_selected(self, request: HttpRequest, queryset: Any) -> HttpResponse | None:
        return self._bulk(request, queryset, "retry")

    @admin.action(description="Replay selected workflows from the start", permissions=["replay"])
    def replay_selected(self, request: HttpRequest, queryset: Any) -> HttpResponse | None:
        return self._bulk(request, queryset, "replay")

    def _bulk(self, request: HttpRequest, queryset: Any, name: str) -> HttpResponse | None:
        """First a confirmation page listing the selected actors (with a reason field); once confirmed
        (``post=yes``), the action on each through the engine, one audit row per actor it changed, and
        the messages of ``_report``: each actor's outcome (one the caller may not operate is refused)."""
        verb, operation = BULK_ACTIONS[name]
        # "select all N" (Django's select_across): the queryset is the whole filtered list, carried to the
        # confirmation by the changelist's query string (the form posts back to the same URL), not by ids
        across = request.POST.get("select_across") == "1"
        total = queryset.count()
        if request.POST.get("post") != "yes":
            listed = list(queryset.order_by("-updated_at")[:CONFIRM_LISTED])
            run_less = inspector.run_less_types(_runtime().registry)  # the badge as in the list
            context = {
                **self.admin_site.each_context(request),
                "opts": self.model._meta,
                "title": f"{verb.capitalize()} {total} workflow{'s' if total != 1 else ''}?",
                "verb": verb,
                "action": f"{name}_selected",
                "total": total,
                "more": total - len(listed),
                "select_across": across,
                "actors": [
                    {
                        "row": a,
                        "key": display.short_key(a.key),
                        "badge": state_badge(states.shown(a.name, a.workflow_state, a.paused_at, run_less)),
                    }
                    for a in listed
                ],
                "selected_ids": [] if across else list(queryset.values_list("pk", flat=True)),
                "action_checkbox_name": admin.helpers.ACTION_CHECKBOX_NAME,
                "changelist_url": reverse("admin:rivet_workflows_actor_changelist"),
            }
            return TemplateResponse(request, "rivet_workflows/admin/bulk_confirm.html", context)
        who = request.user.get_username()
        reason = request.POST.get("reason") or None
        engine_bulk.run(_runtime(), name, [], who=who, reason=reason)  # a bad who or action: refused first
        report = engine_bulk.BulkReport(name)
        for batch in _batches(queryset):
            for actor_id, actor_name in batch:

                def allowed(actor_id: str, actor_name: str = actor_name) -> None:  # refused for that actor
                    access.check(request, request.user, operation, actor_name, actor_id)

                report.outcomes.append(
                    engine_bulk.act_on(_runtime(), name, actor_id, who=who, reason=reason, check=allowed)
                )
        self._report(request, verb, report)
        return None

    def _report(self, request: HttpRequest, verb: str, report: engine_bulk.BulkReport) -> None:
        """One message with the counts, then one per outcome naming each actor: what was changed, what
        had nothing to do and why, what was refused and why (docs/howto/admin.md)."""
        changed = report.of(engine_bulk.CHANGED)
        unchanged = report.of(engine_bulk.UNCHANGED)
        refused = report.of(engine_bulk.REFUSED)
        level = messages.WARNING if refused else messages.SUCCESS
        self.message_user(
            request,
            f"Bulk {verb}: {len(changed)} done, {len(unchanged)} had nothing to {verb}, {len(refused)} refused.",
            level,
        )
        if changed:
            self.message_user(request, f"{_DONE[report.action]}: " + _listed(changed), messages.SUCCESS)
        if unchanged:
            self.message_user(request, f"Nothing to {verb}: " + _listed(unchanged), messages.INFO)
        if refused:
            self.message_user(request, "Refused: " + _listed(refused), messages.WARNING)


def _batches(queryset: Any, size: int = BATCH) -> Any:
    """``[(actor_id, name), ...]`` lists of at most ``size`` actors of ``queryset``, oldest first, each read
    by one short keyset query on ``(created_at, actor_id)``: no long-held cursor, no table lock."""
    rows = queryset.order_by("created_at", "pk")
    after: tuple[Any, str] | None = None
    while True:
        page = rows
        if after is not None:
            page = rows.filter(Q(created_at__gt=after[0]) | Q(created_at=after[0], pk__gt=after[1]))
        found = list(page.values_list("pk", "name", "created_at")[:size])
        if not found:
            return
        yield [(pk, actor_name) for pk, actor_name, _ in found]
        if len(found) < size:
            return
        after = (found[-1][2], found[-1][0])


def _listed(outcomes: list[engine_bulk.ActorOutcome]) -> str:
    """``"<id> (<why>); ..."`` for the first ``SHOWN_PER_MESSAGE`` outcomes, then how many more."""
    shown = [f"{o.actor_id} ({o.reason})" if o.reason else o.actor_id for o in outcomes[:SHOWN_PER_MESSAGE]]
    more = len(outcomes) - len(shown)
    return "; ".join(shown) + (f"; and {more} more" if more > 0 else "") + "."
