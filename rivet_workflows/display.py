"""How the admin and ``manage.py rivet`` show keys and times: unambiguous, bounded and in one time zone."""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime
from typing import Any

from django.utils import timezone

from .engine.model import serde

#: characters of a key shown in the admin list and command output before it is cut short with "…"
KEY_CHARS = 60
#: characters of a key kept in a title tooltip (a 100 KB key must not make a 5 MB list page)
TOOLTIP_CHARS = 2000


def key_json(key: Any) -> str:
    """An actor key as JSON text: ``["1/2"]`` and ``[1, 2]`` stay apart (a ``"/"``-join shows both as
    ``1/2``). Non-ASCII characters are kept; a value that is not JSON-serializable shows as its ``repr``."""
    try:
        return json.dumps(serde.to_json(list(key or [])), ensure_ascii=False)
    except Exception:  # a key stored before a serde change: still show something
        return repr(key)


def shorten(text: str, limit: int = KEY_CHARS) -> str:
    """``text`` cut to at most ``limit`` characters, the last one an ellipsis ("…") when it was cut."""
    if len(text) <= limit:
        return text
    return text[: max(limit - 1, 0)] + "…"


def short_key(key: Any, limit: int = KEY_CHARS) -> str:
    """``key_json(key)`` cut to ``limit`` characters (see ``shorten``)."""
    return shorten(key_json(key), limit)


def duration(seconds: float | None) -> str:
    """A short human duration: ``"12 ms"``, ``"3.4 s"``, ``"2 min 5 s"``; "" for None (the admin trace and
    ``manage.py rivet show``)."""
    if seconds is None:
        return ""
    if seconds < 1:
        return f"{seconds * 1000:.0f} ms"
    if seconds < 60:
        return f"{seconds:.1f} s"
    minutes, rest = divmod(int(seconds), 60)
    return f"{minutes} min {rest} s"


#: a W3C ``traceparent``: version, trace id, parent span id, flags (https://www.w3.org/TR/trace-context/)
_TRACEPARENT = re.compile(r"^[0-9a-f]{2}-([0-9a-f]{32})-[0-9a-f]{16}-[0-9a-f]{2}$")


def trace_id(trace_context: Any) -> str | None:
    """The trace id (32 hex digits) of a stored W3C trace context (``{"traceparent": "00-<trace id>-..."}``,
    ``Actor.trace_context``), or None when there is none or it is malformed (or all zeros)."""
    parent = trace_context.get("traceparent") if isinstance(trace_context, dict) else None
    found = _TRACEPARENT.match(parent.strip().lower()) if isinstance(parent, str) else None
    if found is None or set(found.group(1)) == {"0"}:
        return None
    return found.group(1)


def trace_link(trace_context: Any, template: str | None) -> tuple[str | None, str | None]:
    """``(trace id, link)`` of a stored trace context for the admin and ``rivet show``: the link fills the
    ``{trace_id}`` of ``template`` (``RIVET_WORKFLOWS["TRACE_URL"]``, e.g.
    ``"http://jaeger:16686/trace/{trace_id}"``). ``(None, None)`` without a trace context, ``(id, None)``
    without a template."""
    found = trace_id(trace_context)
    if found is None or not template:
        return found, None
    return found, template.replace("{trace_id}", found)


def _local(value: datetime) -> datetime:
    if timezone.is_naive(value):  # the stores keep UTC
        value = value.replace(tzinfo=UTC)
    return timezone.localtime(value)


def format_time(value: Any, precise: bool = False, date: bool = True) -> str:
    """A datetime in the current time zone (Django's ``TIME_ZONE`` or the activated one) with the zone's
    name: ``"2026-11-29 05:29:04 CST"``; ``precise`` adds milliseconds (``05:29:04.413``), ``date=False``
    leaves the date out. A naive datetime is taken as UTC; ``None`` is ``"—"``; another value its ``str``.
    """
    if value is None:
        return "—"
    if not isinstance(value, datetime):
        return str(value)
    local = _local(value)
    text = local.strftime("%H:%M:%S")
    if precise:
        text += f".{local.microsecond // 1000:03d}"
    if date:
        text = local.strftime("%Y-%m-%d ") + text
    return f"{text} {local.tzname() or local.strftime('%z')}"


def time_zone_name() -> str:
    """The name of the current time zone (``"UTC"``, ``"America/Chicago"``): the one ``format_time`` uses."""
    return timezone.get_current_timezone_name()
