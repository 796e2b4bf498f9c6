"""Differential tests of ``engine.model.jsontext`` (issue 19): orjson's text against the stdlib ``json``'s on
generated tagged JSON (``serde.to_json`` of generated Python values, Hypothesis): the same decoded values,
exactly the size ``serde`` measured with the stdlib, the same values read back; on PostgreSQL the same
jsonb stored for both texts."""

from __future__ import annotations

import json
import math
from datetime import UTC, datetime
from decimal import Decimal

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from rivet_workflows.engine.model import errors, jsontext, serde
from tests.conftest import is_postgres

CASES = settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _stdlib_text(value) -> str:
    return json.dumps(value, separators=(",", ":"))


def _stdlib_size(value) -> int:
    """What ``serde._check_size`` counted before orjson: the UTF-8 length of the stdlib's compact text."""
    return len(json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode("utf-8"))


def _same(a, b) -> bool:
    """Identical JSON values: same types (``1``, ``1.0`` and ``True`` differ), floats to the bit (``-0.0``
    is not ``0.0``), dict keys in the same order."""
    if type(a) is not type(b):
        return False
    if type(a) is float:
        return a.hex() == b.hex() or (math.isnan(a) and math.isnan(b))
    if type(a) is list:
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    if type(a) is dict:
        return list(a) == list(b) and all(_same(a[k], b[k]) for k in a)
    return a == b


#: floats around the places where spellings differ: exponents, the fixed/scientific switches, extremes
tricky_floats = st.sampled_from(
    [0.0, -0.0, 1e16, 1e15, 9999999999999998.0, 1e-4, 9.99e-5, 1e-5, 1.5e-5, 1e-7, -1e-7, 2.5e-10, 1e22,
     1e300, 5e-324, 1.7976931348623157e308, 0.1, 1 / 3, 123456789012345680.0]
)  # fmt: skip
big_ints = st.sampled_from([2**63 - 1, -(2**63), 2**64 - 1, 2**64, -(2**63) - 1, 2**70, -(2**70), 10**30])
text = st.text(st.characters(codec="utf-8", exclude_characters="\x00"), max_size=12) | st.sampled_from(
    ['\x01\x1f\n\t\b\f\r\x7f\u2028\u2029/"\\', "é€😀", "e-", "0.0000", "x" * 40]
)
scalars = (
    st.none()
    | st.booleans()
    | st.integers()
    | big_ints
    | st.floats()
    | tricky_floats
    | text
    | st.datetimes(timezones=st.just(UTC))
    | st.decimals(allow_nan=False, places=3)
    | st.binary(max_size=8)
)
values = st.recursive(
    scalars,
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.dictionaries(text, inner, max_size=4)
        | st.tuples(inner, inner)
        | st.dictionaries(st.integers(), inner, max_size=2)
    ),
    max_leaves=25,
)


def _deep(depth: int, leaf, container=list):
    value = leaf
    for _ in range(depth):
        value = container([value])
    return value


@CASES
@given(values)
@example(2**70)
@example([-0.0, 1e16, 1e-7, 1e-5, 1.5e-5, 2**64, -(2**70)])
@example({"é": "\x1f€", "k": [1e-7] * 30})
@example(_deep(serde.MAX_DEPTH, 1e-7))
def test_orjson_text_decodes_to_the_stdlib_value_and_measures_the_stdlib_size(value):
    """For every value ``serde`` stores: ``jsontext.dumps`` decodes to what the stdlib's text decodes to,
    ``jsontext.size`` is the stdlib size ``_check_size`` counted, ``jsontext.loads`` reads both texts as
    ``json.loads`` does."""
    encoded = serde.to_json(value)
    stdlib_text = _stdlib_text(encoded)
    ours = jsontext.dumps(encoded)
    assert _same(json.loads(ours), json.loads(stdlib_text))
    assert jsontext.size(encoded) == _stdlib_size(encoded)
    for text_ in (stdlib_text, ours, ours.encode()):
        assert _same(jsontext.loads(text_), json.loads(text_))


@CASES
@given(st.floats(allow_nan=False, allow_infinity=False))
@example(1e-7)
@example(-1e-5)
@example(1e16)
def test_a_float_is_spelt_as_repr_spells_it_or_the_size_goes_to_the_stdlib(value):
    """``jsontext.size`` takes orjson's length only when no float is spelt otherwise than by ``repr``:
    orjson's spelling of such a float always holds ``e-`` or ``0.0000`` (and names the same number)."""
    orjson_text = jsontext._orjson_bytes(value)
    assert Decimal(orjson_text.decode()) == Decimal(repr(value))
    if orjson_text.decode() != repr(value):
        assert not jsontext._floats_spelt_alike(orjson_text)


@CASES
@given(st.from_regex(r"-?(0|[1-9][0-9]{0,24})(\.[0-9]{1,25})?", fullmatch=True))
@example("123456789012345678901234567890")
@example("0.000000000000000000000000001")
@example("-0")
def test_numbers_as_postgres_prints_them_are_read_as_the_stdlib_reads_them(number):
    """jsonb prints numbers as plain decimals (no exponent; ``1e300`` is 301 digits): ``jsontext.loads``
    reads each as ``json.loads`` does (an int stays an int however long, floats rounded alike)."""
    assert _same(jsontext.loads(f"[{number}]"), json.loads(f"[{number}]"))


@pytest.mark.parametrize("value", [2**70, -(2**70), [2**64], {"n": 10**30}])
def test_ints_beyond_64_bits_are_encoded_and_read_by_the_stdlib(value):
    """orjson refuses ints beyond 64 bits (and reads them as floats): the stdlib writes and reads them."""
    encoded = serde.to_json(value)
    assert jsontext.dumps(encoded) == _stdlib_text(encoded)
    assert jsontext.size(encoded) == _stdlib_size(encoded)
    assert _same(jsontext.loads(_stdlib_text(encoded)), encoded)
    assert serde.from_json(jsontext.loads(jsontext.dumps(encoded))) == value


def test_nesting_serde_accepts_past_orjsons_limit_is_encoded_by_the_stdlib():
    """orjson stops at 254 levels; ``serde`` accepts ``MAX_DEPTH`` (256) containers, and tagged tuples
    nest twice as deep: the stdlib encodes and measures those."""
    for value in (_deep(serde.MAX_DEPTH, "x"), _deep(serde.MAX_DEPTH // 2, "x", tuple)):
        encoded = serde.to_json(value)
        assert jsontext._orjson_bytes(encoded) is None
        assert jsontext.dumps(encoded) == _stdlib_text(encoded)
        assert jsontext.size(encoded) == _stdlib_size(encoded)
        assert jsontext.loads(jsontext.dumps(encoded)) == encoded


@pytest.mark.parametrize("bad", ["\ud800", {"\udfff": 1}])
def test_lone_surrogates_are_refused_by_serde_and_written_by_the_stdlib_as_before(bad):
    """``serde`` refuses a lone surrogate before any text is made; given one anyway, ``jsontext.dumps``
    writes the stdlib's text (orjson refuses it)."""
    with pytest.raises(errors.SerializationError):
        serde.to_json(bad)
    assert jsontext.dumps(bad) == _stdlib_text(bad)


@pytest.mark.parametrize("refused", [datetime(2024, 1, 2, tzinfo=UTC), object(), {1j: 1}])
def test_what_the_stdlib_refuses_is_still_refused(refused):
    """A datetime, or anything else the stdlib cannot encode, raises the stdlib's ``TypeError`` still (orjson
    would encode a datetime)."""
    with pytest.raises(TypeError) as stdlib:
        _stdlib_text([refused])
    with pytest.raises(TypeError) as ours:
        jsontext.dumps([refused])
    assert str(ours.value) == str(stdlib.value)


@pytest.mark.parametrize(
    "value", [[1e-7] * 40, [1e-5] * 40, {"é": "€" * 30, "f": 1e16}, [-0.0, 2**70, "\x1f"], _deep(255, 1.0)]
)
def test_the_payload_limit_is_exact_at_the_boundary(value):
    """``max_bytes`` is the stdlib size: a value exactly at it passes, one byte under it is refused with
    the stdlib size (floats orjson spells shorter or longer, non-ASCII, big ints, deep nesting)."""
    size = _stdlib_size(serde.to_json(value))
    serde.to_json(value, max_bytes=size)
    with pytest.raises(errors.PayloadTooLargeError) as raised:
        serde.to_json(value, max_bytes=size - 1)
    assert raised.value.metadata["size"] == size


@pytest.mark.skipif(not is_postgres(), reason="PostgreSQL's jsonb")
@settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck))
@given(values)
@example([-0.0, 1e16, 1e-7, 1e-5, 1.5e-5, 2**70, "é\x1f€😀"])
def test_postgres_stores_the_same_jsonb_for_both_texts(db, value):
    """The jsonb PostgreSQL makes of orjson's text is the one it makes of the stdlib's (its canonical text
    is compared), and ``load_json`` reads it as ``json.loads`` does."""
    from django.db import connection

    encoded = serde.to_json(value)
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT %s::jsonb::text, %s::jsonb::text", [_stdlib_text(encoded), jsontext.dumps(encoded)]
        )
        stdlib_jsonb, ours_jsonb = cursor.fetchone()
    assert ours_jsonb == stdlib_jsonb
    assert _same(jsontext.loads(ours_jsonb), json.loads(stdlib_jsonb))
