"""``ActorAdmin``: the actors list and the per-actor run trace page with replay/recover buttons."""

from __future__ import annotations

import functools
import hashlib
import re
from collections.abc import Callable
from typing import Any

from django.contrib import admin, messages
from django.core.exceptions import PermissionDenied
from django.core.handlers.asgi import ASGIRequest
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseRedirect, JsonResponse
from django.template.loader import render_to_string
from django.template.response import TemplateResponse
from django.urls import path, reverse
from django.utils import timezone
from django.utils.html import format_html
from django.utils.translation import ngettext
from django.views.decorators.http import require_http_methods, require_POST

from .. import access, display, inputs, models, sharding, states
from ..checks import in_memory_layer_misses_workers
from ..conf import rivet_settings
from ..engine.actor import audit, cancel
from ..engine.model import errors, ports, serde
from ..engine.model.attributes import parse_pairs
from ..engine.operate import forks, inspector, repairs, retrying
from .bulk import BulkActionsMixin
from .filters import AttributeFilter, AwaitingCodeVersionFilter, ShardFilter, WorkflowStateFilter, attribute_q
from .forks import ForkViewMixin
from .trace import error_details, pretty, state_badge, trace_rows
from .trace import runtime as _runtime

REPLAY_PERMISSION = access.REPLAY_PERMISSION
#: period (ms) of the trace page's poll while its WebSocket is open, in case a history push is lost
FALLBACK_POLL_MS = 10_000
_CSRF_INPUT = re.compile(r'<input type="hidden" name="csrfmiddlewaretoken" value="[^"]*">')

#: a list cell that may break anywhere, so a long word cannot push the columns after it off screen
_BREAKABLE = '<span style="overflow-wrap:anywhere">{}</span>'


def reject_bad_input(view: Callable[..., HttpResponse]) -> Callable[..., HttpResponse]:
    """Wrap an admin view so a request carrying text no database can store (``inputs.find_bad_input``: a
    NUL character or a lone surrogate in the object id, a list filter, the search, a form field such as
    the replay button's ``entry_id``, or the session cookie) gets a 400 JSON ``{group, code: "invalid_input",
    message, metadata: {where}}`` before any query runs, instead of PostgreSQL's ``DataError`` (manual: HTTP
    API, errors)."""

    @functools.wraps(view)
    def wrapper(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        bad = inputs.find_bad_input(request, kwargs, form=True)
        if bad is not None:
            return JsonResponse(bad.error_body(), status=400)
        return view(request, *args, **kwargs)

    return wrapper


def _json_error(status: int, group: str, code: str, message: str, **metadata: Any) -> JsonResponse:
    """An error of the trace JSON as ``{group, code, message, metadata}`` (it is read by a script)."""
    body = {"group": group, "code": code, "message": message, "metadata": metadata}
    return JsonResponse(body, status=status)


def _stored(value: Any) -> Any:
    """A JSON column as the value it stores (``serde.from_json``: tagged times, decimals... decoded), so
    ``pretty`` shows it as plain JSON; an undecodable one (written by a newer version) as it is."""
    try:
        return serde.from_json(value)
    except errors.RivetWorkflowsError:
        return value


def _family_links(store: Any, record: Any, request: Any = None) -> tuple[dict | None, list[dict]]:
    """The trace page's links to the actor's parent (None when it has none, it is gone or its shard is
    down) and children (``{"url", "label", "state"}``; DESIGN.md section 20); the children on a shard that
    cannot be reached are left out, with an admin message naming it on ``request``."""

    def link(other: Any) -> dict:
        return {
            "url": reverse("admin:rivet_workflows_actor_change", args=[other.actor_id]),
            "label": f"{other.name} {display.short_key(other.key)}",
            "state": other.workflow_state,
        }

    parent = None
    if record.parent_id is not None:
        try:
            parent = link(store.get_actor(record.parent_id))
        except (errors.ActorNotFoundError, errors.StoreUnavailableError):  # gone, or its shard is down
            parent = None
    children, unavailable = sharding.children(store, record.actor_id)
    if unavailable and request is not None:
        note = sharding.note_down(request)
        for alias in unavailable:
            note(alias, errors.StoreUnavailableError(f"shard {alias!r} is unavailable", shard=alias))
    return parent, [link(child) for child in children]


#: how many of each stream's last items the trace page shows (DESIGN.md section 17)
STREAM_TAIL = 10


def _stream_tails(store: ports.Store, actor_id: str) -> list[dict]:
    """Each durable stream of the actor with its last ``STREAM_TAIL`` items (discarded ones marked), newest
    last, for the trace page."""
    tails = []
    for name in store.stream_names(actor_id):
        tail = store.stream_tail(actor_id, name, STREAM_TAIL)
        items = [{"item": i, "text": pretty(i.value)} for i in tail.items]
        length = tail.items[-1].offset + 1 if tail.items else 0
        tails.append({"name": name, "items": items, "closed": tail.closed, "length": length})
    return tails


def _audit_item(row: Any) -> dict:
    """An audit row for the trace page: the row, the archived entries' keys and their pretty JSON."""
    entries = audit.archived_records(row)
    return {
        "row": row,
        "keys": [e.key for e in entries],
        "text": pretty([serde.from_json(item) for item in row.archived_entries]) if entries else "",
    }


def operator(request: HttpRequest) -> Any:
    """The admin user as the caller of ``rivet_workflows.access``; also set as ``request.auth``, which is
    where the ``AUTHORIZE`` hook finds the caller (as over HTTP)."""
    user = request.user if request.user.is_authenticated else None
    request.auth = user  # type: ignore[attr-defined]
    return user


@admin.register(models.Actor)
class ActorAdmin(BulkActionsMixin, ForkViewMixin, admin.ModelAdmin):
    """Actors: list with filters (type, workflow state) and key search; each row opens the run trace."""

    list_display = (
        "name",
        "key_display",
        "state_display",
        "waiting_on",
        "wake_at_display",
        "last_error",
        "updated_display",
    )
    list_display_links = ("name", "key_display")
    list_filter = ("name", WorkflowStateFilter, AttributeFilter, AwaitingCodeVersionFilter, ShardFilter)
    search_fields = ("key_text", "actor_id")
    search_help_text = "A key or actor id, or search attributes as key=value (customer=c-42 total=120)."
    ordering = ("-updated_at",)
    list_per_page = 50
    empty_value_display = "—"  # the same dash as the "waiting on" and "last error" columns
    show_full_result_count = False

    # --- read-only ----------------------------------------------------------------------------------

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def get_queryset(self, request: HttpRequest) -> Any:
        """The actors that are not destroyed, without the types the ``AUTHORIZE`` hook refuses to ``list``
        to this user (as ``GET /actors`` leaves them out); when sharded, those of the shard the "shard" filter
        chose (``ShardFilter``: the first until another is chosen), so every filter's choices read it too."""
        rows = super().get_queryset(request).filter(destroyed=False)
        if sharding.sharded():
            rows = rows.using(ShardFilter.alias_of(request))
        if rivet_settings.AUTHORIZE:
            caller = operator(request)
            names = sorted(set(rows.order_by().values_list("name", flat=True).distinct()))
            rows = rows.filter(name__in=[n for n in names if access.allows(request, caller, access.LIST, n)])
        return rows

    def get_search_results(self, request: HttpRequest, queryset: Any, search_term: str) -> tuple[Any, bool]:
        """The key and id search, where each ``key=value`` term of the search box filters by that search
        attribute instead (``attributes.parse_value``: ``total=120`` is the number)."""
        terms = search_term.split()
        pairs = [t for t in terms if "=" in t]
        if not pairs:
            return super().get_search_results(request, queryset, search_term)
        try:
            queryset = queryset.filter(attribute_q(parse_pairs(pairs)))
        except errors.RivetWorkflowsError as exc:
            self.message_user(request, str(exc), messages.ERROR)
            return queryset.none(), False
        rest = " ".join(t for t in terms if "=" not in t)
        return super().get_search_results(request, queryset, rest) if rest else (queryset, False)

    def has_view_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        """Seeing actors in the admin is the ``inspect`` operation (docs/howto/authorization.md): staff with
        ``view_actor``."""
        return access.role_allows(operator(request), access.INSPECT)

    def has_replay_permission(self, request: HttpRequest) -> bool:
        """The bulk recover needs the ``replay`` operation (``view_actor`` and ``replay_workflow``)."""
        return access.role_allows(operator(request), access.REPLAY)

    def has_operate_permission(self, request: HttpRequest) -> bool:
        """The bulk cancel, pause and resume need the ``operate`` operation (``view_actor`` and
        ``replay_workflow``)."""
        return access.role_allows(operator(request), access.OPERATE)

    # --- columns ------------------------------------------------------------------------------------

    @admin.display(description="key", ordering="key_text")
    def key_display(self, obj: models.Actor) -> str:
        """The key as JSON (``["1/2"]`` is not ``[1, 2]``), cut to ``display.KEY_CHARS`` characters and at
        most 12em wide (CSS ellipsis) so the other columns stay on screen; the whole key (up to
        ``display.TOOLTIP_CHARS``) is its tooltip."""
        text = display.key_json(obj.key)
        return format_html(
            '<span class="rivet-key" title="{}" style="display:inline-block;max-width:12em;overflow:hidden;'
            'text-overflow:ellipsis;white-space:nowrap;vertical-align:bottom">{}</span>',
            display.shorten(text, display.TOOLTIP_CHARS),
            display.shorten(text),
        )

    @admin.display(description="workflow state", ordering="workflow_state")
    def state_display(self, obj: models.Actor) -> str:
        """The badge of the state the actor shows (``states.shown``): "no workflow" for an actor whose
        type has no run function, "paused" for a paused unfinished one."""
        run_less = inspector.run_less_types(_runtime().registry)
        return state_badge(states.shown(obj.name, obj.workflow_state, obj.paused_at, run_less))

    @staticmethod
    def _activity(obj: models.Actor) -> inspector.Activity:
        """What the run does now (``inspector.activity``; the database row's fields, this process's clock)."""
        return inspector.activity(
            obj.lease_owner, obj.lease_expires_at, obj.wake_at, obj.waiting_for, timezone.now()
        )

    @admin.display(description="waiting on")
    def waiting_on(self, obj: models.Actor) -> str:
        """What the run does now: "running now" while an executor holds it, "due now" once its wait or
        sleep is over (a worker picks it up), else the queues it waits on; and the code version it waits
        for when a worker of another version left it (a rolling deploy): such a run is not "due now" for
        the workers of this version, however late its wake time. A finished wait is not shown."""
        now = self._activity(obj)
        if now.doing == inspector.RUNNING or (now.doing == inspector.DUE and not obj.awaiting_code_version):
            return f"{now.doing} now"
        names = ["any queue" if n == "*" else n for n in now.waiting_for]
        if obj.awaiting_code_version:
            names.append(f"code version {obj.awaiting_code_version}")
        text = display.shorten(", ".join(names))
        return format_html(_BREAKABLE, text) if text else "—"

    @admin.display(description="wake at", ordering="wake_at")
    def wake_at_display(self, obj: models.Actor) -> str:
        """When a waiting run wakes; "—" while it runs or is due (no past wake time shown)."""
        return display.format_time(self._activity(obj).wake_at)

    @admin.display(description="updated", ordering="updated_at")
    def updated_display(self, obj: models.Actor) -> str:
        return display.format_time(obj.updated_at)

    @admin.display(description="last error")
    def last_error(self, obj: models.Actor) -> str:
        error = obj.error
        if not isinstance(error, dict):
            return "—"
        text = f"{error.get('name', 'Error')}: {error.get('message', '')}"
        return format_html(_BREAKABLE, display.shorten(text, 90))

    # --- extra pages --------------------------------------------------------------------------------

    def get_urls(self) -> list:
        """The admin's own URLs and the trace JSON, replay and recover views, every one behind
        ``reject_bad_input``."""
        patterns = self._urls()
        for pattern in patterns:
            pattern.callback = reject_bad_input(pattern.callback)
        return patterns

    def _urls(self) -> list:
        view = self.admin_site.admin_view
        extra = [
            path(
                "<str:actor_id>/trace.json",
                view(self.trace_json_view),
                name="rivet_workflows_actor_trace_json",
            ),
            path(
                "<str:actor_id>/replay/",
                view(require_http_methods(["GET", "POST"])(self.replay_view)),
                name="rivet_workflows_actor_replay",
            ),
            path(
                "<str:actor_id>/fork/",
                view(require_http_methods(["GET", "POST"])(self.fork_view)),
                name="rivet_workflows_actor_fork",
            ),
            path(
                "<str:actor_id>/recover/",
                view(require_POST(self.recover_view)),
                name="rivet_workflows_actor_recover",
            ),
            path(
                "<str:actor_id>/pause/",
                view(require_POST(self.pause_view)),
                name="rivet_workflows_actor_pause",
            ),
            path(
                "<str:actor_id>/resume/",
                view(require_POST(self.resume_view)),
                name="rivet_workflows_actor_resume",
            ),
            path(
                "<str:actor_id>/retry/",
                view(require_POST(self.retry_view)),
                name="rivet_workflows_actor_retry",
            ),
            path(
                "<str:actor_id>/cancel/",
                view(require_POST(self.cancel_view)),
                name="rivet_workflows_actor_cancel",
            ),
        ]
        return extra + super().get_urls()

    def _record(self, request: HttpRequest, actor_id: str, operation: str) -> Any:
        """The actor's record once the user may do ``operation`` to it (``access.check_actor``): 403
        (``PermissionDenied``) when the rule or the ``AUTHORIZE`` hook refuses, 404 for an unknown actor."""
        try:
            return access.check_actor(
                request, operator(request), operation, actor_id, _runtime().store.get_actor
            )
        except (access.NotAuthenticatedError, access.ForbiddenError) as exc:
            raise PermissionDenied(exc.message) from exc
        except errors.ActorNotFoundError as exc:
            raise Http404(str(exc)) from exc

    def _live_context(self, request: HttpRequest, record: Any) -> dict:
        runtime = _runtime()
        store = runtime.store
        now = store.now()
        entries = store.load_history(record.actor_id)
        busy = inspector.in_flight(record, now)
        enabled = record.name in runtime.registry and runtime.registry.get(record.name).run is not None
        caller = operator(request)
        can_replay = access.allows(request, caller, access.REPLAY, record.name, record.actor_id)
        can_operate = access.allows(request, caller, access.OPERATE, record.name, record.actor_id)
        shown_state = inspector.shown_workflow_state(runtime.registry, record)

        def why_not(operation: str, entry_id: str | None = None) -> str:
            """The button's tooltip when it is disabled ("" when it is enabled): the refusal the repair
            would raise (``repairs.refusal``, the predicate of the API and the commands), or the
            missing permission."""
            if not enabled:
                return ""
            refused = repairs.refusal(runtime, record, entries, operation, entry_id, now=now)
            if refused is not None:
                return repairs.reason(refused)
            return "" if can_replay else "not allowed to replay this actor"

        replay_reasons = {e.key: why_not(repairs.REPLAY, e.key) for e in entries if e.kind == "step"}
        fork_refused = forks.refusal(runtime, record, entries, now=now) if enabled else None
        fork_all_reason = (
            repairs.reason(fork_refused)
            if fork_refused is not None
            else ("" if can_replay else "not allowed to fork this actor")
        )
        alias = sharding.alias_for_actor(record.actor_id)
        actor_row = models.Actor.objects.using(alias).filter(pk=record.actor_id).first()
        queue = list(
            models.QueueMessage.objects.using(alias).filter(actor_id=record.actor_id).order_by("-id")[:50]
        )
        crons = list(
            models.CronEntry.objects.using(alias)
            .filter(actor_id=record.actor_id)
            .order_by("name")
            .prefetch_related("fires")
        )
        trace_id, trace_url = display.trace_link(record.trace_context, rivet_settings.TRACE_URL)
        parent_link, child_links = _family_links(store, record, request)
        return {
            "parent_link": parent_link,
            "child_links": child_links,
            "record": record,
            "activity": inspector.activity(
                record.lease_owner, record.lease_expires_at, record.wake_at, record.waiting_for, now
            ),
            "trace_id": trace_id,
            "trace_url": trace_url,
            "key_text": display.key_json(record.key),
            "key_short": display.short_key(record.key),
            "time_zone": display.time_zone_name(),
            "actor_row": actor_row,
            "rows": trace_rows(entries, now, record.workflow_state, replay_reasons),
            "entry_count": len(entries),
            "in_flight": busy,
            "workflow_enabled": enabled,
            "can_replay": can_replay and enabled,
            "can_recover": record.workflow_state == "failed",
            "replay_all_reason": why_not(repairs.REPLAY),
            "recover_reason": why_not(repairs.RECOVER),
            "shown_state": shown_state,
            "state_badge": state_badge(shown_state),
            "output_text": pretty(record.output) if record.output is not None else "",
            "error_details": error_details(record.error) if record.error else [],
            "state_text": pretty(record.state),
            "input_text": pretty(record.input),
            "queue_messages": [
                {
                    "message": m,
                    "body": pretty(_stored(m.body)),
                    "response": pretty(_stored(m.response)) if m.response is not None else "",
                }
                for m in queue
            ],
            "crons": [{"entry": c, "fires": list(c.fires.order_by("-id")[:10])} for c in crons],
            "streams": _stream_tails(store, record.actor_id),
            "operator_actions": [
                _audit_item(row) for row in store.operator_actions(record.actor_id, limit=50)
            ],
            "now": now,
            "replay_url": reverse("admin:rivet_workflows_actor_replay", args=[record.actor_id]),
            "fork_url": reverse("admin:rivet_workflows_actor_fork", args=[record.actor_id]),
            "fork_all_reason": fork_all_reason,
            "recover_url": reverse("admin:rivet_workflows_actor_recover", args=[record.actor_id]),
            # paused and unfinished (a finished run's pause is over: nothing to resume)
            "paused": record.workflow_state == ports.PAUSED,
            "can_operate": can_operate,
            "can_pause": can_operate
            and not record.paused
            and record.workflow_state not in ports.HALTED_STATES,
            "pause_url": reverse("admin:rivet_workflows_actor_pause", args=[record.actor_id]),
            "resume_url": reverse("admin:rivet_workflows_actor_resume", args=[record.actor_id]),
            "suspended": record.workflow_state == ports.SUSPENDED,
            "retry_url": reverse("admin:rivet_workflows_actor_retry", args=[record.actor_id]),
            "can_cancel": can_operate and record.workflow_state not in ports.FINISHED_STATES,
            "cancel_url": reverse("admin:rivet_workflows_actor_cancel", args=[record.actor_id]),
        }

    def change_view(
        self, request: HttpRequest, object_id: str, form_url: str = "", extra_context: dict | None = None
    ) -> HttpResponse:
        """The read-only actor page: identity, state, run trace, queue messages and cron entries."""
        record = self._record(request, object_id, access.INSPECT)
        live = self._live_context(request, record)
        context = {
            **self.admin_site.each_context(request),
            "opts": self.model._meta,
            "title": f"{record.name} {display.short_key(record.key)}",
            "subtitle": record.actor_id,
            "has_view_permission": True,
            "live_html": render_to_string("rivet_workflows/admin/_live.html", live, request=request),
            "can_replay": live["can_replay"],
            "record": record,
            "trace_json_url": reverse("admin:rivet_workflows_actor_trace_json", args=[record.actor_id]),
            # only a server speaking ASGI (daphne, channels' runserver) can take the WebSocket: under WSGI
            # (runserver, gunicorn) the page polls at once instead of logging a 404 for the attempt
            "ws_path": f"/ws/rivet/actors/{record.actor_id}/" if isinstance(request, ASGIRequest) else "",
            # worker processes cannot reach an in-memory channel layer: the page keeps polling every 2 s
            "ws_misses_workers": in_memory_layer_misses_workers(),
            "fallback_poll_ms": FALLBACK_POLL_MS,
        }
        return TemplateResponse(request, "rivet_workflows/admin/actor_trace.html", context)

    def trace_json_view(self, request: HttpRequest, actor_id: str) -> JsonResponse:
        """The live part of the trace page as ``{"version", "html", "workflowState", "inFlight"}``: the
        header (workflow state, executor lease, waiting on, wake-up), the buttons, the trace, messages and
        cron entries, rendered again; the page swaps it in on every WebSocket push and poll. An unknown
        actor is a 404 and a user without the view permission a 403, both as the JSON error body."""
        try:
            record = access.check_actor(
                request, operator(request), access.INSPECT, actor_id, _runtime().store.get_actor
            )
        except errors.RivetWorkflowsError as exc:  # forbidden (403) or an unknown actor (404)
            return _json_error(exc.http_status, exc.group, exc.code, exc.message, **exc.metadata)
        live = self._live_context(request, record)
        html = render_to_string("rivet_workflows/admin/_live.html", live, request=request)
        # the CSRF token is masked differently on every render: leave it out of the version
        version = hashlib.sha256(_CSRF_INPUT.sub("", html).encode()).hexdigest()[:16]
        return JsonResponse(
            {
                "version": version,
                "html": html,
                "workflowState": live["shown_state"],
                "inFlight": live["in_flight"],
            }
        )

    # --- buttons ------------------------------------------------------------------------------------

    def _repair(self, request: HttpRequest, actor_id: str, action: str) -> HttpResponse:
        self._record(request, actor_id, access.REPLAY)
        back = reverse("admin:rivet_workflows_actor_change", args=[actor_id])
        entry_id = request.POST.get("entry_id") or None
        who = request.user.get_username()
        reason = request.POST.get("reason") or None
        try:
            if action == "recover":
                result = repairs.recover(_runtime(), actor_id, who=who, reason=reason)
                reset = len(result.reset)
                text = ngettext(
                    "Recovered the workflow: %(count)d step reset; it runs again now.",
                    "Recovered the workflow: %(count)d steps reset; it runs again now.",
                    reset,
                ) % {"count": reset}
            else:
                result = repairs.replay(_runtime(), actor_id, entry_id, who=who, reason=reason)
                where = f"step {entry_id!r}" if entry_id else "the start"
                deleted = len(result.deleted)
                text = ngettext(
                    "Replaying from %(where)s: %(count)d history entry deleted; it runs again now.",
                    "Replaying from %(where)s: %(count)d history entries deleted; it runs again now.",
                    deleted,
                ) % {"where": where, "count": deleted}
        except errors.ActorNotFoundError as exc:
            raise Http404(str(exc)) from exc
        except errors.RivetWorkflowsError as exc:
            self._refused(request, action, exc)
            return HttpResponseRedirect(back)
        self.message_user(request, text, messages.SUCCESS)
        return HttpResponseRedirect(back)

    def _refused(self, request: HttpRequest, action: str, exc: errors.RivetWorkflowsError) -> None:
        """The error message of a refused repair (it changed nothing); a divergence also says how to make
        the code fit the history."""
        hint = exc.hint
        text = f"{action.capitalize()} refused: {exc.message}" + (f" Fix: {hint}." if hint else "")
        self.message_user(request, text, messages.ERROR)

    def replay_view(self, request: HttpRequest, actor_id: str) -> HttpResponse:
        """GET: the confirmation page of a replay from ``entry_id`` (a step; everything when it is empty),
        listing its plan (``repairs.replay_plan``: the steps that run again, each with a new idempotency
        key) with a reason field; nothing changes. POST (the confirmation, with CSRF): do the replay.
        A replay that would be refused goes back to the trace page with the refusal. Operation ``replay``."""
        if request.method == "POST":
            return self._repair(request, actor_id, "replay")
        record = self._record(request, actor_id, access.REPLAY)
        back = reverse("admin:rivet_workflows_actor_change", args=[actor_id])
        entry_id = request.GET.get("entry_id") or None
        try:
            plan = repairs.replay_plan(_runtime(), actor_id, entry_id)
        except errors.ActorNotFoundError as exc:
            raise Http404(str(exc)) from exc
        except errors.RivetWorkflowsError as exc:
            self._refused(request, "replay", exc)
            return HttpResponseRedirect(back)
        context = {
            **self.admin_site.each_context(request),
            "opts": self.model._meta,
            "title": f"Replay {record.name} {display.short_key(record.key)}?",
            "record": record,
            "plan": plan,
            "reason": (request.GET.get("reason") or "")[:2000],
            "back_url": back,
            "replay_url": reverse("admin:rivet_workflows_actor_replay", args=[actor_id]),
        }
        return TemplateResponse(request, "rivet_workflows/admin/replay_confirm.html", context)

    def recover_view(self, request: HttpRequest, actor_id: str) -> HttpResponse:
        """POST: recover a failed workflow; operation ``replay``."""
        return self._repair(request, actor_id, "recover")

    def pause_view(self, request: HttpRequest, actor_id: str) -> HttpResponse:
        """POST: pause the actor (``reason``: optional text, at most 1000 characters); operation ``operate``."""
        return self._pause(request, actor_id, pause=True)

    def resume_view(self, request: HttpRequest, actor_id: str) -> HttpResponse:
        """POST: resume a paused actor; operation ``operate``."""
        return self._pause(request, actor_id, pause=False)

    def retry_view(self, request: HttpRequest, actor_id: str) -> HttpResponse:
        """POST: retry a run a code error suspended (``reason``: optional text); operation ``replay``. The
        audit row ``retry`` names the user (DESIGN.md section 16)."""
        self._record(request, actor_id, access.REPLAY)
        back = reverse("admin:rivet_workflows_actor_change", args=[actor_id])
        reason = (request.POST.get("reason") or "").strip() or None
        try:
            changed = retrying.retry(_runtime(), actor_id, reason, who=request.user.get_username())
        except errors.ActorNotFoundError as exc:
            raise Http404(str(exc)) from exc
        text = (
            "Retried: the run goes on from where the code error stopped it."
            if changed
            else "Not retried: the run is not suspended."
        )
        self.message_user(request, text, messages.SUCCESS if changed else messages.WARNING)
        return HttpResponseRedirect(back)

    def cancel_view(self, request: HttpRequest, actor_id: str) -> HttpResponse:
        """POST: cancel the workflow, paused or not (``reason``: optional text; ``children=1`` also cancels
        every unfinished descendant, DESIGN.md section 20); operation ``operate``."""
        self._record(request, actor_id, access.OPERATE)
        reason = (request.POST.get("reason") or "").strip()[:1000] or None
        children = request.POST.get("children") == "1"
        try:
            changed = cancel.cancel(
                _runtime(), actor_id, who=request.user.get_username(), reason=reason, children=children
            )
        except errors.ActorNotFoundError as exc:
            raise Http404(str(exc)) from exc
        except errors.RivetWorkflowsError as exc:
            self.message_user(request, f"Cancel refused: {exc.message}", messages.ERROR)
            changed = None
        if changed is not None:
            text = "Cancelled: it never runs again." if changed else "Not cancelled: it has finished already."
            self.message_user(request, text, messages.SUCCESS if changed else messages.WARNING)
        return HttpResponseRedirect(reverse("admin:rivet_workflows_actor_change", args=[actor_id]))

    def _pause(self, request: HttpRequest, actor_id: str, *, pause: bool) -> HttpResponse:
        self._record(request, actor_id, access.OPERATE)
        back = reverse("admin:rivet_workflows_actor_change", args=[actor_id])
        reason = (request.POST.get("reason") or "").strip()[:1000] or None
        who = request.user.get_username()
        try:
            if pause:
                changed = repairs.pause(_runtime(), actor_id, reason, who=who)
                text = (
                    "Paused: no new step starts until it is resumed."
                    if changed
                    else "Not paused: it was paused already or has finished."
                )
            else:
                changed = repairs.resume(_runtime(), actor_id, reason, who=who)
                text = "Resumed: it runs again." if changed else "Not resumed: it was not paused."
        except errors.ActorNotFoundError as exc:
            raise Http404(str(exc)) from exc
        self.message_user(request, text, messages.SUCCESS if changed else messages.WARNING)
        return HttpResponseRedirect(back)
