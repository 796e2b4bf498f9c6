"""JSON text of stored values on the hot paths: orjson, with the stdlib wherever the two could differ.

A store turns ``serde.to_json`` structures into text (a jsonb parameter) and its columns' text back into
structures, and ``serde`` measures the text's size against ``max_bytes``; this module does the three with
orjson (issue 19: a C library on the hot path) and keeps the results of the stdlib ``json`` module:

* ``dumps``: compact text that decodes to the same value as ``json.dumps(value, separators=(",", ":"))``.
  Anything orjson refuses (an int beyond 64 bits, nesting deeper than its limit of 254 levels, a key that
  is not a str, a lone surrogate, a datetime or a dataclass) is encoded by the stdlib encoder, which gives
  the text it gave before or raises what it raised (``TypeError``, ``ValueError``, ``RecursionError``).
  The text itself may differ: non-ASCII characters raw instead of ``\\u`` escapes and floats below
  ``1e-4`` spelt ``1e-7``/``0.00001`` instead of ``1e-07``/``1e-05`` (the same numbers: PostgreSQL's
  jsonb stores them identically). Values where orjson parts from the stdlib never reach it: a
  ``uuid.UUID`` or a plain ``enum.Enum`` member (the stdlib refuses them, orjson encodes them) and a NaN
  or infinite float (orjson writes ``null``, the stdlib ``NaN``, which jsonb refuses): ``serde`` output
  and the engine's plain columns (keys, waiting names, attributes: finite floats only) hold only
  ``dict``/``list``/``str``/``int``/finite ``float``/``bool``/``None``.
* ``size``: the UTF-8 length in bytes of ``json.dumps(value, separators=(",", ":"), ensure_ascii=False)``,
  exactly (the ``max_bytes`` limit of DESIGN.md section 3).
* ``loads``: ``json.loads(text)``, the same Python values (a text with a run of 19 or more digits, where
  orjson would read a big int as a float, or that orjson refuses, is read by the stdlib).
"""

from __future__ import annotations

import json
import re
from typing import Any

import orjson

#: the stdlib encoders: the fallback of ``dumps`` and the exact text ``size`` measures
_stdlib_text = json.JSONEncoder(separators=(",", ":")).encode
_stdlib_sized_text = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False).encode

#: datetimes and dataclasses, which orjson would encode and the stdlib refuses, are refused by orjson too
_OPTIONS = orjson.OPT_PASSTHROUGH_DATETIME | orjson.OPT_PASSTHROUGH_DATACLASS

#: a run of digits orjson may read differently: an int beyond 64 bits (a float for orjson), in str and bytes
_LONG_DIGITS = re.compile(r"[0-9]{19}")
_LONG_DIGITS_BYTES = re.compile(rb"[0-9]{19}")


def _orjson_bytes(value: Any) -> bytes | None:
    """``orjson.dumps(value)`` (UTF-8, compact), or None when orjson refuses the value."""
    try:
        return orjson.dumps(value, option=_OPTIONS)
    except orjson.JSONEncodeError:  # a big int, deep nesting, a non-str key, a surrogate...: the stdlib's
        return None


def dumps(value: Any) -> str:
    """Compact JSON text of ``value`` (a JSON-compatible structure) for a jsonb column: decodes to the same
    value as the stdlib's ``json.dumps(value, separators=(",", ":"))``; raises what that raises."""
    data = _orjson_bytes(value)
    return _stdlib_text(value) if data is None else data.decode()


def _floats_spelt_alike(data: bytes) -> bool:
    """True when every float in orjson's text ``data`` is spelt as ``repr`` spells it. orjson and ``repr``
    agree on floats from ``1e-4`` up (digits, notation, ``e+16``); below they differ (``1e-7`` for
    ``1e-07``, ``0.00001`` for ``1e-05``), and orjson's spelling of such a float holds ``e-`` or
    ``0.0000``. A string holding either only sends the measure to the stdlib."""
    return b"e-" not in data and b"0.0000" not in data


def size(value: Any) -> int:
    """The UTF-8 length in bytes of ``json.dumps(value, separators=(",", ":"), ensure_ascii=False)`` for a
    ``serde.to_json`` structure (no NaN, no NUL, no lone surrogate): orjson's length when its text is
    the same (orjson escapes strings as the stdlib does with ``ensure_ascii=False``), else the stdlib
    text's. Raises what the stdlib encoder raises."""
    data = _orjson_bytes(value)
    if data is not None and _floats_spelt_alike(data):
        return len(data)
    return len(_stdlib_sized_text(value).encode("utf-8"))


def loads(text: str | bytes) -> Any:
    """``json.loads(text)``: the same Python values (big ints stay ints). Raises what that raises."""
    long_digits = _LONG_DIGITS if type(text) is str else _LONG_DIGITS_BYTES
    if long_digits.search(text) is None:
        try:
            return orjson.loads(text)
        except orjson.JSONDecodeError:  # the stdlib reads what orjson refuses (1e400: inf) or raises
            pass
    return json.loads(text)
