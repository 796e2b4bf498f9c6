"""The API's JSON body parser: size limit (MAX_BODY_BYTES) and strict JSON (no NaN/Infinity)."""

from __future__ import annotations

import json
import math
from typing import Any

from django.http import HttpRequest
from ninja.parser import Parser

from ..conf import rivet_settings
from ..engine.model import serde
from .errors import BodyTooLargeError, MalformedBodyError


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON")


def _finite_float(text: str) -> float:
    value = float(text)
    if math.isinf(value):
        raise ValueError(f"the number {text} is out of range (not a finite double)")
    return value


def nesting(data: Any) -> int:
    """How many levels of lists and objects ``data`` (parsed JSON) nests, counted without recursion."""
    deepest, stack = 0, [(data, 1)]
    while stack:
        value, depth = stack.pop()
        if isinstance(value, dict | list):
            deepest = max(deepest, depth)
            stack.extend(
                (child, depth + 1) for child in (value.values() if isinstance(value, dict) else value)
            )
    return deepest


class BoundedJSONParser(Parser):
    """Parses request bodies as strict JSON; raises ``BodyTooLargeError`` (413) over MAX_BODY_BYTES and
    ``MalformedBodyError`` (400) for invalid JSON (also NaN/Infinity and numbers out of the double range such
    as ``1e400``), JSON nested more than ``serde.MAX_DEPTH`` levels (the same limit on every Python version), or a body that is neither an object nor ``null``.

    A ``null`` body is None: "no body" where the body is optional (replay), a 422 where it is required."""

    def parse_body(self, request: HttpRequest) -> dict | None:
        """The body as a dict, or None for ``null`` (shape checked later by the endpoint's schema)."""
        limit = rivet_settings.MAX_BODY_BYTES
        body = request.body
        if len(body) > limit:
            raise BodyTooLargeError(
                f"the request body has {len(body)} bytes; the limit is {limit}", size=len(body), limit=limit
            )
        try:
            data = json.loads(body, parse_constant=_reject_constant, parse_float=_finite_float)
        except (ValueError, UnicodeDecodeError) as exc:
            raise MalformedBodyError(f"the request body is not valid JSON: {exc}") from exc
        except RecursionError as exc:
            raise MalformedBodyError("the request body is nested too deeply") from exc
        if nesting(data) > serde.MAX_DEPTH + 1:  # the body object around a value of MAX_DEPTH levels
            raise MalformedBodyError(f"the request body is nested more than {serde.MAX_DEPTH} levels deep")
        if data is None:
            return None
        if not isinstance(data, dict):
            raise MalformedBodyError("the request body must be a JSON object")
        return data
