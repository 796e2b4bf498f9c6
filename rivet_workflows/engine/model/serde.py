"""The one serializer: tagged JSON for every stored value (DESIGN.md section 3).

Plain JSON values (``None``, ``bool``, ``int``, ``float``, ``str``, ``list``, ``dict`` with ``str`` keys) are
stored as themselves. Other supported types are stored as a *tagged* object ``{"__rw__": tag, "v": ...}``:

===========  ===============================================  ==========================
type         tag and payload                                    example payload
===========  ===============================================  ==========================
datetime     ``datetime``: ISO 8601 (offset kept; naive stays    ``"2024-01-02T03:04:05+00:00"``
             naive)
date         ``date``: ISO 8601                                 ``"2024-01-02"``
time         ``time``: ISO 8601                                 ``"03:04:05.000001"``
timedelta    ``timedelta``: ``[days, seconds, microseconds]``   ``[1, 30, 0]``
Decimal      ``decimal``: ``str(value)``                        ``"1.10"``
UUID         ``uuid``: 32 hex digits                            ``"12345678..."``
bytes        ``bytes``: base64 (``bytearray`` decodes as bytes)  ``"AAE="``
tuple        ``tuple``: list of encoded items                   ``[1, 2]``
set          ``set``: list of encoded items (sorted if possible) ``[1, 2]``
frozenset    ``frozenset``: as ``set``                          ``[1, 2]``
float        ``float``: ``"nan"``, ``"inf"``, ``"-inf"`` only     ``"nan"``
dict         ``dict``: ``[[key, value], ...]`` used when a key is not a ``str`` or a user dict has the
             key ``"__rw__"`` (so user data can never be mistaken for a tag)
StepFailure  ``step_failure``, ``try_failure``, ``error_info``:  ``{"kind": ..., "error": {...}}``
TryFailure   the plain dict (nested failures plain too)
ErrorInfo
===========  ===============================================  ==========================

Subclasses of ``str``/``int``/``float`` (e.g. ``StrEnum``/``IntEnum`` members) are stored as the base value,
as ``json`` does. Anything else raises :class:`~rivet_workflows.engine.model.errors.SerializationError`.

Strings (values and dict keys) must be storable by every store: a string that cannot be encoded as UTF-8
(a lone surrogate such as ``"\\ud800"``) or that contains NUL (``"\\x00"``, which PostgreSQL's ``jsonb``
cannot hold) raises ``SerializationError`` naming the path, so such a value never reaches a store.
"""

from __future__ import annotations

import base64
import json
import math
import traceback
import uuid
from datetime import date, datetime, time, timedelta
from decimal import Decimal
from typing import Any

from . import errors, failures, jsontext

#: key marking a tagged value
TAG = "__rw__"

#: the deepest nesting of containers (lists, dicts, tuples, sets) a stored value may have. A fixed limit,
#: not the interpreter's recursion limit: how deep a value may be must not depend on the Python version
#: (3.12 inlined comprehensions and raised the C stack limit, so recursion alone let far deeper values
#: through), and no workflow value needs more.
MAX_DEPTH = 256

_JSON_SCALARS = (str, int, float, bool, type(None))


def _type_name(value: Any) -> str:
    cls = type(value)
    module = cls.__module__
    return cls.__qualname__ if module == "builtins" else f"{module}.{cls.__qualname__}"


def _bad_string(value: str) -> str | None:
    """Why ``value`` cannot be stored (None when it can): a lone surrogate or a NUL character."""
    if value.isascii():  # O(1) in CPython: the common case costs one flag test
        return "a NUL character (\\x00)" if "\x00" in value else None
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as exc:
        return f"a character that cannot be encoded as UTF-8 ({value[exc.start]!r}, a lone surrogate?)"
    return "a NUL character (\\x00)" if "\x00" in value else None


def _check_str(value: str, path: str, where: str, what: str = "string") -> str:
    reason = _bad_string(value)
    if reason is not None:
        raise errors.SerializationError(
            f"{where}: cannot serialize a {what} containing {reason} (at {path})",
            where=where,
            type_name="str",
            path=path,
        )
    return value


def _tagged(tag: str, payload: Any) -> dict:
    return {TAG: tag, "v": payload}


def _set_items(values: Any, path: str, where: str, seen: set[int]) -> list:
    items = [_encode(v, f"{path}[]", where, seen) for v in values]
    try:
        return sorted(items, key=lambda item: json.dumps(item, sort_keys=True))
    except TypeError:  # pragma: no cover - encoded items are always JSON
        return items


def _encode(value: Any, path: str, where: str, seen: set[int]) -> Any:
    # Exact JSON scalars first: the hot path.
    cls = type(value)
    if value is None or cls is bool or cls is int:
        return value
    if cls is str:
        if value.isascii() and "\x00" not in value:
            return value
        return _check_str(value, path, where)
    if cls is float:
        if math.isfinite(value):
            return value
        return _tagged("float", "nan" if math.isnan(value) else ("inf" if value > 0 else "-inf"))
    if cls is list or cls is tuple or cls is dict or isinstance(value, (set, frozenset, list, tuple, dict)):
        marker = id(value)
        if marker in seen:
            raise errors.SerializationError(
                f"{where}: cannot serialize a value that contains itself (at {path})",
                where=where,
                type_name=_type_name(value),
                path=path,
            )
        if len(seen) >= MAX_DEPTH:  # seen holds the containers on the path from the root to here
            raise errors.SerializationError(
                f"{where}: cannot serialize a value nested more than {MAX_DEPTH} levels deep (at {path[:200]})",
                where=where,
                type_name=_type_name(value),
                path=path[:200],
            )
        seen.add(marker)
        try:
            if cls in failures.TAGS:
                return _tagged(failures.TAGS[cls], _encode(value.to_dict(), path, where, seen))
            if isinstance(value, dict):
                if all(type(k) is str for k in value) and TAG not in value:
                    for k in value:
                        if not k.isascii() or "\x00" in k:
                            _check_str(k, f"{path}<key {k!r}>", where, "dict key")
                    return {k: _encode(v, f"{path}.{k}", where, seen) for k, v in value.items()}
                return _tagged(
                    "dict",
                    [
                        [_encode(k, f"{path}<key>", where, seen), _encode(v, f"{path}[{k!r}]", where, seen)]
                        for k, v in value.items()
                    ],
                )
            if isinstance(value, list):
                return [_encode(v, f"{path}[{i}]", where, seen) for i, v in enumerate(value)]
            if isinstance(value, tuple):
                return _tagged(
                    "tuple", [_encode(v, f"{path}[{i}]", where, seen) for i, v in enumerate(value)]
                )
            if isinstance(value, frozenset):
                return _tagged("frozenset", _set_items(value, path, where, seen))
            return _tagged("set", _set_items(value, path, where, seen))
        finally:
            seen.discard(marker)
    if cls is Encoded:  # encoded already (a step's output inside its history entry): used as it is
        return value.json
    if isinstance(value, datetime):
        return _tagged("datetime", value.isoformat())
    if isinstance(value, date):
        return _tagged("date", value.isoformat())
    if isinstance(value, time):
        return _tagged("time", value.isoformat())
    if isinstance(value, timedelta):
        return _tagged("timedelta", [value.days, value.seconds, value.microseconds])
    if isinstance(value, Decimal):
        return _tagged("decimal", str(value))
    if isinstance(value, uuid.UUID):
        return _tagged("uuid", value.hex)
    if isinstance(value, (bytes, bytearray, memoryview)):
        return _tagged("bytes", base64.b64encode(bytes(value)).decode("ascii"))
    # str/int/float subclasses (enums of those kinds) fold to their base value, as json does.
    if isinstance(value, bool):
        return bool(value)
    if isinstance(value, str):
        return _check_str(str(value), path, where)
    if isinstance(value, int):
        return int(value)
    if isinstance(value, float):
        return _encode(float(value), path, where, seen)
    raise errors.SerializationError(
        f"{where}: cannot serialize a value of type {_type_name(value)!r} (at {path})",
        where=where,
        type_name=_type_name(value),
        path=path,
    )


class Encoded:
    """A value encoded by :func:`to_json` already, with the Python value it was encoded from.

    A hot path that had to encode a value (for its size check) hands this on instead of the value, so the
    store writes ``json`` without encoding it again and the record it returns carries ``value`` without
    decoding what it stored (DESIGN.md section 15: values encoded once). :func:`to_json` returns ``json``
    for it (after the ``max_bytes`` check); :func:`decoded` returns ``value``.
    """

    __slots__ = ("json", "value")

    def __init__(self, json: Any, value: Any) -> None:
        self.json = json
        self.value = value

    def __repr__(self) -> str:
        return f"Encoded({self.json!r})"


def encode_once(value: Any, *, where: str = "value", max_bytes: int | None = None) -> Encoded:
    """``Encoded(to_json(value, ...), value)``: encode ``value`` once for a store. Errors as :func:`to_json`."""
    return (
        value if type(value) is Encoded else Encoded(to_json(value, where=where, max_bytes=max_bytes), value)
    )


def roundtrip_encoded(value: Any, *, where: str = "value", max_bytes: int | None = None) -> Encoded:
    """:func:`roundtrip` that keeps the encoding: ``Encoded(json, copy)`` where ``copy`` is
    ``from_json(json)`` (what the live path hands on) and ``json`` what the store writes for it, so the
    commit does not encode the copy again. Errors as :func:`to_json`."""
    encoded = to_json(value, where=where, max_bytes=max_bytes)
    return Encoded(encoded, from_json(encoded))


def entry_data(data: dict, reused: dict[str, Encoded] | None) -> dict:
    """A history entry's ``data`` to encode: each value of ``reused`` (``EntryRecord.reused``: data key ->
    ``Encoded``) in place of ``data[key]`` while that is still its value, so the store does not encode it
    again."""
    if not reused:
        return data
    swapped = {k: enc for k, enc in reused.items() if k in data and data[k] is enc.value}
    return {**data, **swapped} if swapped else data


def decode_keeping(data: Any) -> Encoded:
    """``Encoded(data, from_json(data))``: a stored value decoded, its encoding kept for a write of the same
    value (a received message's body in the history). Errors as :func:`from_json`."""
    return Encoded(data, from_json(data))


def decoded(value: Any) -> Any:
    """The Python value of ``value`` when it is :class:`Encoded`, else ``from_json(value)`` (a fresh copy)."""
    return value.value if type(value) is Encoded else from_json(value)


def to_json(value: Any, *, where: str = "value", max_bytes: int | None = None) -> Any:
    """Encode ``value`` into a JSON-compatible structure (tagged JSON, see the module docstring).

    ``where`` names the value in error messages (``"step 'charge' output"``). ``max_bytes`` (int or None)
    caps the size of the UTF-8 JSON text. Returns a structure of dict/list/str/int/float/bool/None that
    ``json.dumps`` accepts with ``allow_nan=False``. Raises ``SerializationError`` (metadata ``where``,
    ``type_name``, ``path``) for an unsupported type, a cycle or containers nested more than ``MAX_DEPTH``
    levels deep, and ``PayloadTooLargeError`` (metadata
    ``where``, ``size``, ``limit``) over ``max_bytes`` (DESIGN.md section 3).
    """
    if type(value) is Encoded:
        encoded = value.json
    else:
        encoded = _encode_value(value, where)
    if max_bytes is not None:
        _check_size(encoded, where, max_bytes)
    return encoded


#: what ``_encode_plain`` raises for anything it leaves to ``_encode`` (a builtin: the engine's exception
#: classes live in ``errors``; the fast path runs no user code, so nothing else raises it there)
_NotPlain = ValueError


def _encode_plain(value: Any, depth: int) -> Any:
    """``_encode`` for the common values, without its bookkeeping (the path of every item, the set of
    containers on the path): exact JSON scalars, ``dict`` with ``str`` keys (no ``TAG``), ``list``, ``tuple``,
    ``datetime`` and ``Encoded``. Same result as ``_encode`` for those; anything
    else, a string ``_encode`` refuses and nesting past ``MAX_DEPTH`` (a cycle too) raise ``_NotPlain``, and ``_encode_value`` encodes the value again with ``_encode``, which names the path in
    its errors."""
    cls = type(value)
    if cls is str:
        if (value.isascii() and "\x00" not in value) or _bad_string(value) is None:
            return value
        raise _NotPlain
    if value is None or cls is bool or cls is int:
        return value
    if cls is dict:
        if depth >= MAX_DEPTH or TAG in value:
            raise _NotPlain
        depth += 1
        out = {}
        for k, v in value.items():
            if type(k) is not str or ((not k.isascii() or "\x00" in k) and _bad_string(k) is not None):
                raise _NotPlain
            out[k] = _encode_plain(v, depth)
        return out
    if cls is list or cls is tuple:
        if depth >= MAX_DEPTH:
            raise _NotPlain
        depth += 1
        items = [_encode_plain(v, depth) for v in value]
        return items if cls is list else {TAG: "tuple", "v": items}
    if cls is float:
        if math.isfinite(value):
            return value
        raise _NotPlain
    if cls is datetime:
        return {TAG: "datetime", "v": value.isoformat()}
    if cls is Encoded:
        return value.json
    raise _NotPlain


def _encode_value(value: Any, where: str) -> Any:
    """One encoding of a value (the serializer call counted by tests/unit/test_encoded_once.py): the fast
    ``_encode_plain`` first, ``_encode`` for what it leaves (same result; ``_encode`` raises the errors)."""
    try:
        return _encode_plain(value, 0)
    except (_NotPlain, RecursionError):
        pass
    try:
        return _encode(value, "$", where, set())
    except RecursionError:
        raise errors.SerializationError(
            f"{where}: cannot serialize a value nested this deeply", where=where, type_name=_type_name(value)
        ) from None


def _check_size(encoded: Any, where: str, max_bytes: int) -> None:
    # the UTF-8 length of json.dumps(encoded, separators=(",", ":"), ensure_ascii=False), exactly
    size = jsontext.size(encoded)
    if size > max_bytes:
        raise errors.PayloadTooLargeError(
            f"{where}: serialized size {size} bytes is over the limit of {max_bytes} bytes",
            where=where,
            size=size,
            limit=max_bytes,
        )


def _decode_tagged(tag: str, payload: Any) -> Any:
    if tag == "datetime":
        return datetime.fromisoformat(payload)
    if tag == "date":
        return date.fromisoformat(payload)
    if tag == "time":
        return time.fromisoformat(payload)
    if tag == "timedelta":
        days, seconds, micros = payload
        return timedelta(days=days, seconds=seconds, microseconds=micros)
    if tag == "decimal":
        return Decimal(payload)
    if tag == "uuid":
        return uuid.UUID(hex=payload)
    if tag == "bytes":
        return base64.b64decode(payload, validate=True)
    if tag == "tuple":
        return tuple(_from_json(v) for v in payload)
    if tag == "set":
        return {_from_json(v) for v in payload}
    if tag == "frozenset":
        return frozenset(_from_json(v) for v in payload)
    if tag == "float":
        if payload not in ("nan", "inf", "-inf"):
            raise ValueError(f"a tagged float is 'nan', 'inf' or '-inf', got {payload!r}")
        return float(payload)
    if tag == "dict":
        return {_from_json(k): _from_json(v) for k, v in payload}
    if tag in failures.BY_TAG:
        return failures.BY_TAG[tag].from_dict(_from_json(payload))
    raise errors.SerializationError(f"unknown serialized tag {tag!r}", tag=tag)


def from_json(data: Any) -> Any:
    """Decode the output of :func:`to_json` back into Python values (always fresh objects).

    Raises ``SerializationError`` for an unknown tag (data written by a newer version), a tagged value
    whose payload does not decode (``{"__rw__": "bytes", "v": "!!!"}``: not base64) or data nested too
    deeply to decode.
    """
    try:
        return _from_json(data)
    except RecursionError:
        raise errors.SerializationError("cannot decode a value nested this deeply") from None


def _from_json(data: Any) -> Any:
    cls = type(data)
    if cls is dict:
        if TAG in data:
            try:
                return _decode_tagged(data[TAG], data.get("v"))
            except errors.SerializationError:
                raise
            except (ValueError, TypeError, AttributeError, ArithmeticError) as exc:
                raise errors.SerializationError(
                    f"malformed tagged value {{{TAG!r}: {data[TAG]!r}, 'v': ...}}: {exc}",
                    tag=str(data[TAG]),
                ) from exc
        return {k: _from_json(v) for k, v in data.items()}
    if cls is list:
        return [_from_json(v) for v in data]
    return data


def roundtrip(value: Any, *, where: str = "value", max_bytes: int | None = None) -> Any:
    """Return ``from_json(to_json(value))``: the copy the live path hands on, identical to what a replay sees.

    Same arguments and errors as :func:`to_json`.
    """
    return from_json(to_json(value, where=where, max_bytes=max_bytes))


def dumps(value: Any, *, where: str = "value", max_bytes: int | None = None) -> str:
    """Encode ``value`` as a compact JSON string (tagged JSON). Errors as :func:`to_json`."""
    return json.dumps(
        to_json(value, where=where, max_bytes=max_bytes), separators=(",", ":"), allow_nan=False
    )


def loads(text: str | bytes) -> Any:
    """Decode a string written by :func:`dumps`."""
    return from_json(json.loads(text))


# --- presentation: plain JSON with a side map of types (the HTTP API, the admin) ------------------------

#: the JSON form of each non-JSON type in ``to_plain`` (the tag names of the stored encoding)
PLAIN_FORMS = {
    "datetime": "ISO 8601 string (offset kept)",
    "date": "ISO 8601 string",
    "time": "ISO 8601 string",
    "timedelta": "seconds (number)",
    "decimal": "decimal string",
    "uuid": "canonical string (8-4-4-4-12)",
    "bytes": "base64 string",
    "tuple": "array",
    "set": "array (sorted when the items sort)",
    "frozenset": "array (sorted when the items sort)",
    "float": '"NaN", "Infinity" or "-Infinity"',
    "dict": "array of [key, value] pairs (a key that is not a string)",
}


def _pointer(path: str, token: Any) -> str:
    text = str(token).replace("~", "~0").replace("/", "~1")
    return f"{path}/{text}"


def _plain(data: Any, path: str, types: dict[str, str]) -> Any:
    cls = type(data)
    if cls is list:
        return [_plain(v, _pointer(path, i), types) for i, v in enumerate(data)]
    if cls is not dict:
        return data
    if TAG not in data:
        return {k: _plain(v, _pointer(path, k), types) for k, v in data.items()}
    tag, payload = data[TAG], data.get("v")
    if tag in failures.BY_TAG:  # shown as the plain dict it compares equal to (no type to record)
        return _plain(payload, path, types)
    types[path] = tag
    if tag in ("datetime", "date", "time", "decimal"):
        return payload
    if tag == "timedelta":
        return _decode_tagged(tag, payload).total_seconds()
    if tag == "uuid":
        return str(uuid.UUID(hex=payload))
    if tag == "float":
        return {"nan": "NaN", "inf": "Infinity", "-inf": "-Infinity"}.get(payload, payload)
    if tag in ("tuple", "set", "frozenset"):
        return [_plain(v, _pointer(path, i), types) for i, v in enumerate(payload)]
    if tag == "dict":
        return [
            [
                _plain(k, _pointer(_pointer(path, i), 0), types),
                _plain(v, _pointer(_pointer(path, i), 1), types),
            ]
            for i, (k, v) in enumerate(payload)
        ]
    return payload  # "bytes" (base64 already) and tags of a newer version: shown as stored


def to_plain(value: Any, *, where: str = "value", prefix: str = "") -> tuple[Any, dict[str, str]]:
    """``value`` as plain JSON for people and HTTP clients, and the types of the values JSON cannot hold.

    Returns ``(plain, types)``: ``plain`` has datetimes, dates and times as ISO 8601 strings, ``Decimal`` as
    its decimal string, ``timedelta`` as seconds, ``UUID`` as its canonical string, bytes as base64, tuples
    and sets as arrays, non-finite floats as ``"NaN"``/``"Infinity"``, a dict with non-string keys as
    ``[key, value]`` pairs (``PLAIN_FORMS``); never the storage tags (``{"__rw__": ...}``). ``types`` maps
    the JSON Pointer (RFC 6901) of each such value, prefixed with ``prefix`` (``"/output"``), to its type
    name (``{"/output/total": "decimal"}``); it is empty for plain JSON. ``from_plain`` rebuilds the value.
    Raises ``SerializationError`` like ``to_json`` for a value that cannot be stored (DESIGN.md section 3).
    """
    types: dict[str, str] = {}
    return _plain(to_json(value, where=where), prefix, types), types


def _unplain(data: Any, path: str, types: dict[str, str]) -> Any:
    tag = types.get(path)
    if tag is None:
        if type(data) is list:
            return [_unplain(v, _pointer(path, i), types) for i, v in enumerate(data)]
        if type(data) is dict:
            return {k: _unplain(v, _pointer(path, k), types) for k, v in data.items()}
        return data
    if tag == "timedelta":
        return timedelta(seconds=data)
    if tag == "uuid":
        return uuid.UUID(data)
    if tag == "float":
        return float({"NaN": "nan", "Infinity": "inf", "-Infinity": "-inf"}.get(data, data))
    if tag in ("tuple", "set", "frozenset"):
        items = [_unplain(v, _pointer(path, i), types) for i, v in enumerate(data)]
        return {"tuple": tuple, "set": set, "frozenset": frozenset}[tag](items)
    if tag == "dict":
        return {
            _unplain(k, _pointer(_pointer(path, i), 0), types): _unplain(
                v, _pointer(_pointer(path, i), 1), types
            )
            for i, (k, v) in enumerate(data)
        }
    return _decode_tagged(tag, data)


def from_plain(plain: Any, types: dict[str, str], *, prefix: str = "") -> Any:
    """The value ``to_plain`` showed as ``(plain, types)`` (``prefix`` as given to it). Raises
    ``SerializationError`` for an unknown type name and for a value that does not fit its type."""
    try:
        return _unplain(plain, prefix, types)
    except errors.SerializationError:
        raise
    except (ValueError, TypeError, AttributeError, ArithmeticError, KeyError) as exc:
        raise errors.SerializationError(f"a value does not fit its type: {exc}") from exc


def _json_native(value: Any, depth: int = 0) -> bool:
    if depth > 10:
        return False
    if type(value) is float:
        return math.isfinite(value)
    if type(value) is str:
        return _bad_string(value) is None
    if value is None or type(value) in (int, bool):
        return True
    if type(value) is list:
        return all(_json_native(v, depth + 1) for v in value)
    if type(value) is dict:
        return (
            all(type(k) is str and _json_native(v, depth + 1) for k, v in value.items()) and TAG not in value
        )
    return False


def _storable(text: str) -> str:
    """``text`` with what no store can hold escaped (lone surrogates as ``\\udxxx``, NUL as ``\\x00``)."""
    if _bad_string(text) is None:
        return text
    return text.encode("utf-8", "backslashreplace").decode("utf-8").replace("\x00", "\\x00")


def error_to_dict(exc: BaseException) -> dict:
    """Describe an exception for storage: ``{"name", "message", "stack", "metadata"}`` (DESIGN.md section 3).

    ``name`` is the type's qualified name (``ValueError``, ``CriticalError``, ``Outer.Inner``); ``message``
    is ``str(exc)``; ``stack`` the formatted traceback (or None when the exception was never raised);
    ``metadata`` the exception's public attributes whose values are plain JSON (for ``RivetWorkflowsError``
    its keyword metadata). A stored error in the metadata (``metadata.error`` of ``StepExhaustedError``)
    loses its ``stack`` when ``stack`` already shows it (the cause's traceback): one copy. The result is
    plain JSON.
    """
    message = _storable(exc.message if isinstance(exc, errors.RivetWorkflowsError) else str(exc))
    stack = _storable("".join(traceback.format_exception(exc))) if exc.__traceback__ is not None else None
    attrs: dict[str, Any] = {}
    source = exc.metadata if isinstance(exc, errors.RivetWorkflowsError) else getattr(exc, "__dict__", {})
    for key, value in source.items():
        if key.startswith("_") or key in ("message", "args"):
            continue
        if _json_native(value):
            attrs[key] = _without_shown_stack(value, stack)
    return {"name": type(exc).__qualname__, "message": message, "stack": stack, "metadata": attrs}


def _without_shown_stack(value: Any, stack: str | None) -> Any:
    """``value`` without its ``stack`` when it is an error dict whose stack ``stack`` contains already."""
    inner = value.get("stack") if isinstance(value, dict) else None
    if isinstance(inner, str) and stack is not None and inner.strip() in stack:
        return {k: v for k, v in value.items() if k != "stack"}
    return value
