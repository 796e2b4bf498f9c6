"""The actor list's bulk actions (DESIGN.md section 12): recover, cancel, pause and resume many actors, with a
confirmation page and a reason, each through the engine as its own button would, one ``bulk_<action>``
audit row per actor changed; they need the operations ``replay`` (recover) and ``operate`` (cancel,
pause, resume) of ``rivet_workflows.access``, asked per actor.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django.contrib import admin, messages
from django.http import HttpRequest, HttpResponse
from django.template.response import TemplateResponse
from django.urls import reverse

from .. import access, display, models, states
from ..engine import errors, inspector, repairs
from ..engine.cancel import cancel as cancel_workflow
from .trace import runtime as _runtime
from .trace import state_badge

#: most actors one bulk action takes (narrow the list with its filters for more)
BULK_LIMIT = 500


def _bulk_recover(actor_id: str, who: str, reason: str | None) -> bool:
    repairs.recover(_runtime(), actor_id, who=who, reason=reason, bulk=True)
    return True


def _bulk_cancel(actor_id: str, who: str, reason: str | None) -> bool:
    return cancel_workflow(_runtime(), actor_id, who=who, reason=reason, bulk=True)


def _bulk_pause(actor_id: str, who: str, reason: str | None) -> bool:
    return repairs.pause(_runtime(), actor_id, reason, who=who, bulk=True)


def _bulk_resume(actor_id: str, who: str, reason: str | None) -> bool:
    return repairs.resume(_runtime(), actor_id, reason, who=who, bulk=True)


#: the bulk actions of the actor list: name -> (verb for messages, the operation of
#: ``rivet_workflows.access`` it is, what it does to one actor: True when it changed it, False when there
#: was nothing to do; a refusal raises). Each writes a ``bulk_<name>`` audit row per actor it changed.
BULK_ACTIONS: dict[str, tuple[str, str, Callable[[str, str, str | None], bool]]] = {
    "recover": ("recover", access.REPLAY, _bulk_recover),
    "cancel": ("cancel", access.OPERATE, _bulk_cancel),
    "pause": ("pause", access.OPERATE, _bulk_pause),
    "resume": ("resume", access.OPERATE, _bulk_resume),
}


class BulkActionsMixin:
    """The bulk actions of ``ActorAdmin`` (a ``ModelAdmin``: ``message_user``, ``admin_site``, ``model``;
    ``has_replay_permission`` and ``has_operate_permission`` gate them, and each actor is checked with
    ``access.check`` before it is changed)."""

    actions = ["recover_selected", "cancel_selected", "pause_selected", "resume_selected"]
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

    def _bulk(self, request: HttpRequest, queryset: Any, name: str) -> HttpResponse | None:
        """First a confirmation page listing the selected actors (with a reason field); once confirmed
        (``post=yes``), the action on each through the engine, one audit row per actor it changed, and
        one message with what was done, skipped and refused."""
        verb, operation, run = BULK_ACTIONS[name]
        ids = list(queryset.order_by("-updated_at").values_list("pk", flat=True)[: BULK_LIMIT + 1])
        if len(ids) > BULK_LIMIT:
            self.message_user(
                request,
                f"A bulk {verb} takes at most {BULK_LIMIT} actors at once; narrow the list with its filters.",
                messages.ERROR,
            )
            return None
        if request.POST.get("post") != "yes":
            actors = list(models.Actor.objects.filter(pk__in=ids).order_by("-updated_at"))
            run_less = inspector.run_less_types(_runtime().registry)  # the badge as in the list
            context = {
                **self.admin_site.each_context(request),
                "opts": self.model._meta,
                "title": f"{verb.capitalize()} {len(actors)} workflow{'s' if len(actors) != 1 else ''}?",
                "verb": verb,
                "action": f"{name}_selected",
                "actors": [
                    {
                        "row": a,
                        "key": display.short_key(a.key),
                        "badge": state_badge(states.shown(a.name, a.workflow_state, a.paused_at, run_less)),
                    }
                    for a in actors
                ],
                "action_checkbox_name": admin.helpers.ACTION_CHECKBOX_NAME,
                "changelist_url": reverse("admin:rivet_workflows_actor_changelist"),
            }
            return TemplateResponse(request, "rivet_workflows/admin/bulk_confirm.html", context)
        who = request.user.get_username()
        reason = request.POST.get("reason") or None
        done, skipped, refused = 0, 0, []
        names = dict(models.Actor.objects.filter(pk__in=ids).values_list("pk", "name"))
        for actor_id in ids:
            try:
                access.check(request, request.user, operation, names.get(actor_id, ""), actor_id)
                changed = run(actor_id, who, reason)
            except errors.WorkflowNotFailedError:
                changed = False
            except errors.ActorNotFoundError:
                changed = False
            except errors.RivetWorkflowsError as exc:
                refused.append(f"{actor_id}: {repairs.reason(exc)}")
                continue
            done += 1 if changed else 0
            skipped += 0 if changed else 1
        text = f"Bulk {verb}: {done} done, {skipped} had nothing to {verb}, {len(refused)} refused."
        if refused:
            text += " Refused: " + "; ".join(refused[:10]) + (" ..." if len(refused) > 10 else "")
        self.message_user(request, text, messages.WARNING if refused else messages.SUCCESS)
        return None
