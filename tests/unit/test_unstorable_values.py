"""Values no store can hold (lone surrogates, NUL, absurd nesting, malformed tagged data) and reserved
characters in entry names are refused up front with a clear error, never retried and never stored."""

from __future__ import annotations

import pytest

from rivet_workflows.engine.model import errors, ports, serde
from rivet_workflows.engine.model.definitions import actor, setup, workflow
from rivet_workflows.testing import drain, make_runtime

SURROGATE = "\ud800"


@pytest.mark.parametrize(
    ("value", "path"),
    [
        (SURROGATE, "$"),
        ({"a": ["ok", "x" + SURROGATE]}, "$.a[1]"),
        ({"key" + SURROGATE: 1}, "$<key"),
        ({1: SURROGATE}, "$[1]"),
        ((SURROGATE,), "$[0]"),
        ({"nul": "a\x00b"}, "$.nul"),
        ({"a\x00": 1}, "$<key"),
        (["é", {"ü": "\udfff"}], "$[1].ü"),
    ],
)
def test_unstorable_strings_raise_serialization_error_naming_the_path(value, path):
    with pytest.raises(errors.SerializationError) as info:
        serde.to_json(value, where="step 's' output", max_bytes=1000)
    assert info.value.metadata["path"].startswith(path)
    assert "step 's' output" in str(info.value)


def test_ordinary_unicode_still_round_trips():
    value = {"é": "ü", "emoji": "\U0001f600", "tab": "\t", "cjk": "漢字"}
    assert serde.roundtrip(value, max_bytes=1000) == value


def test_deep_nesting_is_a_serialization_error_not_a_recursion_error():
    deep: list = []
    for _ in range(5000):
        deep = [deep]
    with pytest.raises(errors.SerializationError, match="nested"):
        serde.to_json(deep)
    encoded: list = []
    for _ in range(5000):
        encoded = [encoded]
    with pytest.raises(errors.SerializationError, match="nested"):
        serde.from_json(encoded)


def nested(depth: int) -> list:
    value: list = []
    for _ in range(depth - 1):
        value = [value]
    return value


def test_values_nest_at_most_max_depth_levels_on_every_python_version():
    # the limit is the serializer's, not the interpreter's recursion limit (Python 3.12+ recurses deeper)
    assert serde.to_json(nested(serde.MAX_DEPTH)) == nested(serde.MAX_DEPTH)
    for depth in (serde.MAX_DEPTH + 1, 900):
        with pytest.raises(errors.SerializationError, match=f"more than {serde.MAX_DEPTH} levels"):
            serde.to_json({"a": nested(depth)})


@pytest.mark.parametrize(
    "bad",
    [
        {"__rw__": "bytes", "v": "!!!"},
        {"__rw__": "float", "v": "1e400"},
        {"__rw__": "float", "v": "3.5"},
        {"__rw__": "decimal", "v": "abc"},
        {"__rw__": "set", "v": [[1]]},
        {"__rw__": "dict", "v": [[1]]},
        {"__rw__": "timedelta", "v": "x"},
    ],
)
def test_malformed_tagged_values_raise_serialization_error(bad):
    with pytest.raises(errors.SerializationError):
        serde.from_json(bad)


def test_error_records_escape_unstorable_characters():
    record = serde.error_to_dict(ValueError("bad " + SURROGATE + " and \x00"))
    assert "\\ud800" in record["message"] and "\\x00" in record["message"]
    record["message"].encode("utf-8")
    assert "\x00" not in record["message"]


@pytest.mark.parametrize("where", ["output", "state", "state-key"])
def test_a_step_producing_an_unstorable_string_fails_at_once_without_retries(where):
    calls = []

    def body(step):
        calls.append(1)
        if where == "state":
            step.state["s"] = SURROGATE
        elif where == "state-key":
            step.state[SURROGATE] = 1
        return SURROGATE if where == "output" else "fine"

    async def run(ctx):
        return await ctx.step("s", body, max_retries=3)

    runtime = make_runtime(setup(use={"wf": actor(state={}, run=workflow(run))}))
    handle = runtime.client().wf.get_or_create("k")
    drain(runtime, timeout=5)
    record = runtime.store.get_actor(handle.actor_id)
    if where == "output":
        assert len(calls) == 1  # a SerializationError is never retried
        assert record.workflow_state == ports.FAILED
        assert "lone surrogate" in record.error["message"]
    else:
        # the state is checked at the commit: nothing unstorable is written; the workflow fails
        assert record.workflow_state == ports.FAILED, record
        assert "lone surrogate" in record.error["message"] or "surrogate" in str(record.error)
        assert SURROGATE not in str(record.state)
        assert len(calls) == 1


@pytest.mark.parametrize("name", ["w:count", "a:b", "x" + SURROGATE, "nul\x00"])
def test_reserved_or_unstorable_entry_names_are_rejected_up_front(name):
    async def run(ctx):
        await ctx.step(name, lambda s: 1)

    runtime = make_runtime(setup(use={"wf": workflow(run=run)}))
    handle = runtime.client().wf.get_or_create("k")
    drain(runtime, timeout=5)
    record = runtime.store.get_actor(handle.actor_id)
    # a bad name is a code error of the workflow: the run is suspended until the fix (DESIGN.md section 16)
    assert record.workflow_state == ports.SUSPENDED
    assert record.error["name"] == "ValueError"
    assert runtime.store.load_history(handle.actor_id) == []


def test_a_colon_in_a_queue_wait_name_is_rejected():
    async def run(ctx):
        await ctx.queue.next("w:x")

    runtime = make_runtime(setup(use={"wf": workflow(run=run)}))
    handle = runtime.client().wf.get_or_create("k")
    drain(runtime, timeout=5)
    record = runtime.store.get_actor(handle.actor_id)
    assert record.workflow_state == ports.SUSPENDED and "':'" in record.error["message"]  # a code error
