"""Compare exported histories up to what may differ between two recordings: ids, timestamps
and measured durations.

``normalize(exported)`` keeps what is behaviour (entry keys, locations, kinds, data and outputs, statuses,
attempts, errors' name and message, which timestamps are set, the actor's values and workflow state) and
replaces ids, instants and stack traces. ``first_difference(name, expected, actual)`` names the first
differing field or entry, with a diff of it.
"""

from __future__ import annotations

import difflib
import json
import re
from typing import Any

from rivet_workflows.engine.model import serde
from rivet_workflows.engine.run.history import parent_key

#: the ids our stores hand out (uuid4 hex: actor ids, message ids)
_HEX_ID = re.compile(r"\b[0-9a-f]{32}\b")
#: an ISO 8601 instant inside a string (``2026-01-01T00:00:00.000148+00:00``)
_INSTANT = re.compile(r"\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}:\d{2}(?:\.\d+)?(?:[+-]\d{2}:\d{2}|Z)?")
#: an ISO 8601 duration measured at run time (a pydantic-ai model response's ``duration``: ``PT0.013481S``)
_DURATION = re.compile(r"^PT(?:\d+H)?(?:\d+M)?\d+(?:\.\d+)?S$")
_TIMESTAMPS = ("lastAttemptAt", "createdAt", "completedAt", "rollbackCompletedAt")


def _text(value: str) -> str:
    if _DURATION.match(value):
        return "<duration>"
    return _INSTANT.sub("<instant>", _HEX_ID.sub("<id>", value))


def _value(value: Any) -> Any:
    """A stored (tagged JSON) value with ids, instants and error stacks replaced."""
    if isinstance(value, str):
        return _text(value)
    if isinstance(value, list):
        return [_value(v) for v in value]
    if isinstance(value, dict):
        tag = value.get(serde.TAG)
        if tag in ("datetime", "time"):
            return f"<{tag}>"
        if {"name", "message", "stack"} <= value.keys():  # a stored error: its name and message
            return _error(value)
        return {k: _value(v) for k, v in value.items()}
    return value


def _tagged(view: dict) -> Any:
    """An exported entry's data as tagged JSON, whichever form the export holds it in: plain JSON with
    ``types`` (the inspector's view) or tagged JSON (exports written before it)."""
    data = view["kind"]["data"]
    if "types" in view:
        return serde.to_json(serde.from_plain(data, view["types"], prefix="/kind/data"))
    return data


def _error(error: Any) -> Any:
    if not isinstance(error, dict):
        return _value(error)
    return {"name": error.get("name"), "message": _text(str(error.get("message")))}


def normalize(exported: dict) -> dict:
    """``{"actor": {...}, "entries": {key: {...}}, "order": {parent key: [child keys]}}`` of an export.

    ``order`` keeps the creation order of the entries of each scope (the order of entries from different
    join or race branches is left out: they run concurrently).
    """
    actor = {k: _value(v) for k, v in exported["actor"].items() if k != "error"}
    actor["error"] = _error(exported["actor"].get("error")) if exported["actor"].get("error") else None
    history = exported.get("history")
    entries: dict[str, dict] = {}
    order: dict[str, list[str]] = {}
    if history is not None:
        for view in history["entries"]:
            key = view["id"]
            meta = history["entryMetadata"][key]
            entries[key] = {
                "location": view["location"],
                "kind": view["kind"]["type"],
                "data": _value(_tagged(view)),
                "status": meta["status"],
                "attempts": meta["attempts"],
                "error": _error(meta["error"]) if meta["error"] else None,
                "rollbackError": _error(meta["rollbackError"]) if meta["rollbackError"] else None,
                "set": [name for name in _TIMESTAMPS if meta.get(name) is not None],
            }
            order.setdefault(parent_key(key), []).append(key)
    return {"actor": actor, "entries": entries, "order": order}


def _dump(value: Any) -> list[str]:
    return json.dumps(value, indent=2, sort_keys=True).splitlines()


def _diff(expected: Any, actual: Any) -> str:
    return "\n".join(
        difflib.unified_diff(_dump(expected), _dump(actual), "golden", "regenerated", lineterm="", n=2)
    )


def first_difference(name: str, expected: dict, actual: dict) -> str | None:
    """None when the normalized ``expected`` and ``actual`` exports agree; else a message naming golden
    ``name`` and the first differing actor field or entry (in the golden's order), with a diff."""
    want, got = normalize(expected), normalize(actual)
    for field, value in want["actor"].items():
        if got["actor"].get(field) != value:
            return f"golden {name!r}: actor {field} differs\n{_diff(value, got['actor'].get(field))}"
    for key, entry in want["entries"].items():
        if key not in got["entries"]:
            return f"golden {name!r}: entry {key!r} is no longer recorded\n{_diff(entry, None)}"
        if got["entries"][key] != entry:
            return f"golden {name!r}: entry {key!r} differs\n{_diff(entry, got['entries'][key])}"
    extra = [k for k in got["entries"] if k not in want["entries"]]
    if extra:
        return f"golden {name!r}: new entry {extra[0]!r} recorded\n{_diff(None, got['entries'][extra[0]])}"
    for scope, keys in want["order"].items():
        if got["order"].get(scope) != keys:
            where = repr(scope) if scope else "the root scope"
            return f"golden {name!r}: entries of {where} in another order\n{_diff(keys, got['order'].get(scope))}"
    return None
