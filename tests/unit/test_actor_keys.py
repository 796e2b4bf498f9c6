"""Actor keys are strings and integers, in Python as over HTTP: anything else is a typed error before any
store call (a NaN used to reach PostgreSQL as a DataError)."""

from __future__ import annotations

import math

import pytest

from rivet_workflows.engine.model import errors
from rivet_workflows.engine.model.definitions import actor, setup
from rivet_workflows.engine.model.keys import MAX_KEY_INT, normalize_key
from rivet_workflows.testing import make_runtime


@pytest.fixture
def client():
    return make_runtime(setup(use={"counter": actor(state={"n": 0})})).client()


@pytest.mark.parametrize(
    ("key", "stored"),
    [("a", ["a"]), (7, [7]), ([1, 2], [1, 2]), (("t", 1), ["t", 1]), ([-MAX_KEY_INT, MAX_KEY_INT], None)],
)
def test_strings_and_integers_are_keys(client, key, stored):
    handle = client.counter.get_or_create(key)
    assert handle.key == (stored if stored is not None else list(key))
    assert client.counter.get(key).actor_id == handle.actor_id


@pytest.mark.parametrize(
    "key",
    [
        [math.nan],
        [float("inf")],
        [1.0],
        [True],
        [None],
        [["nested"]],
        [{"a": 1}],
        [MAX_KEY_INT + 1],
        None,
        1.5,
    ],
)
def test_other_key_parts_are_a_typed_error_and_create_nothing(client, key):
    with pytest.raises(errors.InvalidKeyError) as caught:
        client.counter.get_or_create(key)
    assert isinstance(caught.value, TypeError) and caught.value.http_status == 422
    assert caught.value.code == "invalid_key"
    with pytest.raises(TypeError):
        normalize_key(key)
    assert client.runtime.store.list_actors("counter") == []
