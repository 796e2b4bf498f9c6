"""Search attributes: a flat dict of JSON scalars per actor, merged by ``ctx.set_attributes`` and
``step.set_attributes`` and matched by listing and bulk filters (DESIGN.md section 19)."""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from typing import Any

from . import errors

#: the longest attribute key, and the longest string value (characters)
MAX_KEY = 100
MAX_TEXT = 1000
#: how many attributes one actor keeps
MAX_ATTRIBUTES = 64


def _scalar(value: Any) -> bool:
    if value is None or isinstance(value, (str, bool, int)):
        return True
    return isinstance(value, float) and math.isfinite(value)


def check_attributes(attributes: Any, *, where: str = "attributes") -> dict[str, Any]:
    """``attributes`` as a plain dict after checking it: a mapping of non-empty str keys (at most ``MAX_KEY``
    characters, without ``.``, ``=`` or ``,``, which the HTTP filter and the commands' ``--attr k=v`` use) to JSON
    scalars (str of at most ``MAX_TEXT`` characters, int, finite float, bool, None), at most
    ``MAX_ATTRIBUTES`` keys. Raises ``InvalidAttributesError`` naming the offending key otherwise."""
    if not isinstance(attributes, Mapping):
        raise errors.InvalidAttributesError(
            f"{where} must be a dict of JSON scalars, got {type(attributes).__name__}", where=where
        )
    if len(attributes) > MAX_ATTRIBUTES:
        raise errors.InvalidAttributesError(
            f"{where}: at most {MAX_ATTRIBUTES} attributes per actor, got {len(attributes)}", where=where
        )
    out: dict[str, Any] = {}
    for key, value in attributes.items():
        if not isinstance(key, str) or not key or len(key) > MAX_KEY or any(c in key for c in ".=,\x00"):
            raise errors.InvalidAttributesError(
                f"{where}: attribute names are non-empty strings of at most {MAX_KEY} characters without "
                f"'.', '=', ',': got {key!r}",
                where=where,
                attribute=str(key),
            )
        if not _scalar(value):
            raise errors.InvalidAttributesError(
                f"{where}: attribute {key!r} must be a JSON scalar (str, int, float, bool or None), got "
                f"{type(value).__name__}",
                where=where,
                attribute=key,
            )
        if isinstance(value, str) and len(value) > MAX_TEXT:
            raise errors.InvalidAttributesError(
                f"{where}: attribute {key!r} is longer than {MAX_TEXT} characters", where=where, attribute=key
            )
        out[key] = value
    return out


def merged(current: Mapping[str, Any] | None, new: Mapping[str, Any]) -> dict[str, Any]:
    """``current`` with ``new``'s keys set (later calls win); ``InvalidAttributesError`` past ``MAX_ATTRIBUTES``."""
    out = dict(current or {})
    out.update(new)
    if len(out) > MAX_ATTRIBUTES:
        raise errors.InvalidAttributesError(f"at most {MAX_ATTRIBUTES} attributes per actor")
    return out


def parse_value(text: str) -> Any:
    """An attribute value written as text (HTTP ``attr.KEY=VALUE``, the commands' ``--attr KEY=VALUE``): a
    JSON number, ``true``, ``false``, ``null`` or a double-quoted JSON string is that value; anything
    else is the text itself (``c-42``). Write ``"120"`` (quoted) to match the text 120."""
    try:
        value = json.loads(text)
    except ValueError:
        return text
    return value if value is None or isinstance(value, (str, bool, int, float)) else text


def parse_pairs(pairs: list[str]) -> dict[str, Any]:
    """``["customer=c-42", "total=120"]`` -> ``{"customer": "c-42", "total": 120}`` (``parse_value``);
    ``InvalidAttributesError`` for an item without ``=`` or a bad name."""
    out: dict[str, Any] = {}
    for pair in pairs:
        key, sep, text = pair.partition("=")
        if not sep:
            raise errors.InvalidAttributesError(f"expected KEY=VALUE, got {pair!r}", attribute=pair)
        out[key.strip()] = parse_value(text)
    return check_attributes(out, where="attributes filter")
