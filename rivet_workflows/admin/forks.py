"""The trace page's fork (DESIGN.md section 19): the confirmation form with the entries a fork copies and
the new actor's editable input, state and key, and the fork itself."""

from __future__ import annotations

import json
from typing import Any

from django.contrib import messages
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseRedirect
from django.template.response import TemplateResponse
from django.urls import reverse

from .. import access, display
from ..engine.model import errors, ports, serde
from ..engine.operate import forks
from .trace import runtime as _runtime


def _json_text(value: Any) -> str:
    """``value`` as the JSON a form field shows (tagged JSON, ``serde.to_json``: it reads back exactly)."""
    return json.dumps(serde.to_json(value, where="form value"), indent=2, ensure_ascii=False)


def _fork_options(form: dict[str, str]) -> dict[str, Any]:
    """The ``forks.fork`` keyword arguments of the fork form: ``input`` (JSON), ``state`` (JSON; empty:
    the source's), ``key`` (JSON, or plain text for a one-part string key; empty: the default).
    ``ValueError`` naming the field whose JSON does not parse or decode."""
    options: dict[str, Any] = {"input": ports.UNSET, "state": ports.UNSET, "key": None}
    for field in ("input", "state"):
        text = form[field].strip()
        if field == "state" and not text:
            continue
        try:
            options[field] = serde.from_json(json.loads(text))
        except Exception as exc:  # JSONDecodeError, or a malformed tagged value
            raise ValueError(f"{field}: not valid JSON ({exc})") from None
    key = form["key"].strip()
    if key:
        try:
            options["key"] = json.loads(key)
        except ValueError:
            options["key"] = key
    return options


class ForkViewMixin:
    """``fork_view`` of ``ActorAdmin`` (it uses the admin's ``_record``, ``_refused`` and ``message_user``)."""

    def fork_view(self, request: HttpRequest, actor_id: str) -> HttpResponse:
        """GET: the confirmation page of a fork at ``entry_id`` (a step; the whole history when empty,
        DESIGN.md section 19): the entries it copies, the new actor's input (JSON, the source's, editable),
        state (JSON; empty: the source's), key (JSON or text; empty: the source's plus a ``fork-<hex>``
        part) and a reason; nothing changes. POST (with CSRF): do the fork and go to the new actor's page;
        JSON that does not parse shows the form again (400) with the error; a refusal goes back to the
        trace page with it. Operation ``replay``."""
        record = self._record(request, actor_id, access.REPLAY)
        back = reverse("admin:rivet_workflows_actor_change", args=[actor_id])
        data = request.POST if request.method == "POST" else request.GET
        entry_id = data.get("entry_id") or None
        runtime = _runtime()
        entries = runtime.store.load_history(actor_id)  # a refused or failed fork changes nothing: read once
        refused = forks.refusal(runtime, record, entries, entry_id, now=runtime.store.now())
        if refused is not None:
            self._refused(request, "fork", refused)
            return HttpResponseRedirect(back)
        form = {
            "input": data.get("input", _json_text(record.input))
            if request.method == "POST"
            else _json_text(record.input),
            "state": data.get("state", ""),
            "key": data.get("key", ""),
            "reason": (data.get("reason") or "")[:2000],
        }
        problem = ""
        if request.method == "POST":
            try:
                options = _fork_options(form)
            except ValueError as exc:
                problem = str(exc)
            else:
                try:
                    result = forks.fork(
                        runtime,
                        actor_id,
                        entry_id,
                        who=request.user.get_username(),
                        reason=form["reason"] or None,
                        **options,
                    )
                except errors.ActorNotFoundError as exc:
                    raise Http404(str(exc)) from exc
                except errors.ActorAlreadyExistsError as exc:
                    problem = exc.message
                except errors.RivetWorkflowsError as exc:
                    self._refused(request, "fork", exc)
                    return HttpResponseRedirect(back)
                else:
                    where = f"before step {entry_id!r}" if entry_id else "with the whole history"
                    self.message_user(
                        request,
                        f"Forked {record.name} {display.short_key(record.key)} {where}: "
                        f"{len(result.copied)} history entries copied; the new actor runs now.",
                        messages.SUCCESS,
                    )
                    return HttpResponseRedirect(
                        reverse("admin:rivet_workflows_actor_change", args=[result.actor_id])
                    )
        copied = [e.key for e in forks.plan_fork(entries, entry_id)]
        context = {
            **self.admin_site.each_context(request),
            "opts": self.model._meta,
            "title": f"Fork {record.name} {display.short_key(record.key)}?",
            "record": record,
            "entry_id": entry_id,
            "copied": copied,
            "rerun": [e.key for e in entries if e.kind == "step" and e.key not in set(copied)],
            "form": form,
            "problem": problem,
            "back_url": back,
            "fork_url": reverse("admin:rivet_workflows_actor_fork", args=[actor_id]),
        }
        return TemplateResponse(
            request, "rivet_workflows/admin/fork_confirm.html", context, status=400 if problem else 200
        )
