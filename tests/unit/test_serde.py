"""The one serializer: tagged JSON round-trips (DESIGN.md section 3)."""

from __future__ import annotations

import json
import math
import pickle
import uuid
from datetime import UTC, date, datetime, time, timedelta, timezone
from decimal import Decimal
from enum import IntEnum, StrEnum

import pytest

from rivet_workflows.engine.model import errors, serde


class Color(StrEnum):
    RED = "red"


class Level(IntEnum):
    HIGH = 3


ROUNDTRIP_VALUES = [
    None,
    True,
    0,
    -7,
    2**70,
    1.5,
    "",
    "héllo",
    [],
    {},
    [1, "a", None],
    {"a": {"b": [1, 2]}},
    datetime(2024, 1, 2, 3, 4, 5, 678901, tzinfo=UTC),
    datetime(2024, 1, 2, 3, 4, 5, tzinfo=timezone(timedelta(hours=5, minutes=30))),
    datetime(2024, 1, 2, 3, 4, 5),
    date(2024, 2, 29),
    time(23, 59, 58, 1),
    timedelta(days=-1, seconds=5, microseconds=7),
    Decimal("1.10"),
    Decimal("-0.000000000000000000001"),
    uuid.UUID("12345678-1234-5678-1234-567812345678"),
    b"\x00\x01\xff",
    (1, (2, 3)),
    {1, 2, 3},
    frozenset({"x", "y"}),
    {1: "one", (1, 2): "pair", None: "none"},
    {"__rw__": "datetime", "v": "not a tag"},
    {"nested": [{"t": (Decimal("2.5"), b"z")}]},
]


@pytest.mark.parametrize("value", ROUNDTRIP_VALUES, ids=repr)
def test_value_roundtrips_equal_and_same_type(value):
    encoded = serde.to_json(value)
    text = json.dumps(encoded, allow_nan=False)  # the encoding is plain JSON
    decoded = serde.from_json(json.loads(text))
    assert decoded == value
    assert type(decoded) is type(value)
    assert serde.loads(serde.dumps(value)) == value


def test_datetime_keeps_its_offset_and_naive_stays_naive():
    aware = datetime(2024, 1, 2, 3, 4, 5, tzinfo=timezone(timedelta(hours=-3)))
    assert serde.roundtrip(aware).utcoffset() == timedelta(hours=-3)
    assert serde.roundtrip(datetime(2024, 1, 2)).tzinfo is None


def test_decimal_keeps_its_exponent():
    assert str(serde.roundtrip(Decimal("1.10"))) == "1.10"


def test_non_finite_floats_roundtrip_as_valid_json():
    out = serde.loads(serde.dumps([math.inf, -math.inf, math.nan]))
    assert out[0] == math.inf and out[1] == -math.inf and math.isnan(out[2])


def test_bytearray_decodes_as_bytes():
    assert serde.roundtrip(bytearray(b"ab")) == b"ab"


def test_str_and_int_enums_are_stored_as_their_value():
    assert serde.roundtrip({"c": Color.RED, "l": Level.HIGH}) == {"c": "red", "l": 3}


def test_user_dict_with_tag_key_is_not_mistaken_for_a_tag():
    value = {"__rw__": "bytes", "v": "AAE="}
    assert serde.roundtrip(value) == value


def test_roundtrip_returns_a_fresh_copy():
    original = {"items": [1, 2]}
    copy = serde.roundtrip(original)
    copy["items"].append(3)
    assert original == {"items": [1, 2]}


def test_unserializable_value_names_where_and_type():
    with pytest.raises(errors.SerializationError) as info:
        serde.to_json({"ok": 1, "bad": [object()]}, where="step 'charge' output")
    message = str(info.value)
    assert "step 'charge' output" in message
    assert "object" in message
    assert info.value.type_name == "object"
    assert info.value.path == "$.bad[0]"


@pytest.mark.parametrize(
    "value",
    [
        {"attempt_log": [{"attempt": 1, "started_at": datetime(2024, 1, 2, tzinfo=UTC), "error": None}]},
        {"k": ("a", [1.5, None], ("b",))},
        {"grüße": "naïve ✓", "n": -1, "f": 0.25, "t": True},
        [datetime(2024, 1, 2, 3, 4, 5, 6)],
        # what the fast encoder leaves to the full one: the result is the same whoever encodes it
        {"__rw__": "user data"},
        {1: "int key"},
        [float("nan"), Level.HIGH, Color.RED, {1, 2}, Decimal("1.10")],
    ],
)
def test_the_encoding_is_the_documented_one_whatever_the_value_mixes(value):
    assert serde.to_json(value) == serde._encode(value, "$", "value", set())


def test_an_unstorable_value_deep_in_plain_data_is_reported_with_its_path():
    value = {"log": [{"ok": 1}, {"note": "fine", "bad": "a\x00b"}]}
    with pytest.raises(errors.SerializationError) as info:
        serde.to_json(value, where="step 'x' output")
    assert info.value.path == "$.log[1].bad"
    assert "step 'x' output" in str(info.value)


def test_unserializable_custom_class_reports_qualified_type():
    class Thing:
        pass

    with pytest.raises(errors.SerializationError) as info:
        serde.to_json(Thing())
    assert "Thing" in info.value.type_name


def test_self_referencing_value_fails_with_serialization_error():
    value: list = [1]
    value.append(value)
    with pytest.raises(errors.SerializationError):
        serde.to_json(value)


def test_shared_subvalue_that_is_not_a_cycle_is_fine():
    shared = [1, 2]
    assert serde.roundtrip({"a": shared, "b": shared}) == {"a": [1, 2], "b": [1, 2]}


def test_payload_over_limit_raises_payload_too_large():
    with pytest.raises(errors.PayloadTooLargeError) as info:
        serde.to_json("x" * 100, where="queue body", max_bytes=50)
    assert info.value.limit == 50
    assert info.value.size > 50
    assert "queue body" in str(info.value)
    assert serde.to_json("x" * 10, max_bytes=50) == "x" * 10


def test_unknown_tag_fails_clearly():
    with pytest.raises(errors.SerializationError):
        serde.from_json({"__rw__": "from-the-future", "v": 1})


def test_error_to_dict_of_builtin_exception():
    try:
        raise ValueError("bad amount")
    except ValueError as exc:
        exc.code = 42
        exc._private = 1
        exc.obj = object()
        info = serde.error_to_dict(exc)
    assert info["name"] == "ValueError"
    assert info["message"] == "bad amount"
    assert "Traceback" in info["stack"] and "bad amount" in info["stack"]
    assert info["metadata"] == {"code": 42}
    json.dumps(info, allow_nan=False)


def test_error_to_dict_of_library_error_carries_its_metadata():
    exc = errors.StepExhaustedError(step_name="charge", error={"name": "ValueError", "message": "x"})
    info = serde.error_to_dict(exc)
    assert info["name"] == "StepExhaustedError"
    assert info["stack"] is None
    assert info["metadata"]["step_name"] == "charge"
    assert "charge" in info["message"]


def test_serialization_error_pickles():
    try:
        serde.to_json(object(), where="state")
    except errors.SerializationError as exc:
        again = pickle.loads(pickle.dumps(exc))
    assert isinstance(again, errors.SerializationError)
    assert again.where == "state"


def _has_tag(data) -> bool:
    if isinstance(data, dict):
        return serde.TAG in data or any(_has_tag(v) for v in data.values())
    if isinstance(data, list):
        return any(_has_tag(v) for v in data)
    return False


@pytest.mark.parametrize("value", ROUNDTRIP_VALUES, ids=repr)
def test_plain_form_is_json_without_tags_and_rebuilds_the_value(value):
    plain, types = serde.to_plain(value, prefix="/v")
    json.dumps(plain, allow_nan=False)  # plain JSON
    assert not _has_tag(plain)
    back = serde.from_plain(plain, types, prefix="/v")
    assert back == value and type(back) is type(value)
    assert all(pointer.startswith("/v") for pointer in types)


def test_plain_form_shows_iso_times_and_decimal_strings_with_their_types():
    value = {"at": datetime(2024, 1, 2, 3, 4, 5, tzinfo=UTC), "total": Decimal("1.10"), "n": 3, "a/b": (1,)}
    plain, types = serde.to_plain(value)
    assert plain == {"at": "2024-01-02T03:04:05+00:00", "total": "1.10", "n": 3, "a/b": [1]}
    assert types == {"/at": "datetime", "/total": "decimal", "/a~1b": "tuple"}  # RFC 6901 pointers
    assert serde.to_plain([1, "x"]) == ([1, "x"], {})
    assert serde.to_plain(float("nan")) == ("NaN", {"": "float"})
    assert serde.to_plain(timedelta(minutes=2)) == (120.0, {"": "timedelta"})
