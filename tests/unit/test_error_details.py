"""Error details are typed attributes of the error classes (DESIGN.md section 15); ``metadata`` lists the
details given, for the HTTP error body and the stored error."""

from __future__ import annotations

import pickle

from rivet_workflows.engine.model import errors, serde
from rivet_workflows.engine.run import retry


def test_a_serializer_error_carries_its_details_as_attributes_and_in_metadata():
    try:
        serde.to_json({"a": [object()]}, where="step 'charge' output")
    except errors.SerializationError as exc:
        assert (exc.where, exc.type_name, exc.path) == ("step 'charge' output", "object", "$.a[0]")
        assert exc.metadata == {"where": "step 'charge' output", "type_name": "object", "path": "$.a[0]"}


def test_a_detail_not_given_is_none_and_not_in_metadata():
    exc = errors.PayloadTooLargeError("too big", where="actor state", size=10, limit=5)
    assert exc.step_name is None and exc.reason is None
    assert list(exc.metadata) == ["where", "size", "limit"]


def test_a_steps_stored_failure_survives_pickling_with_its_details():
    exc = retry.exhausted_error(retry.EXHAUSTED, retry.EXHAUSTED, "charge", {"message": "boom"}, 3)
    again = pickle.loads(pickle.dumps(exc))
    assert type(again) is errors.StepExhaustedError
    assert (again.step_name, again.kind, again.attempts, again.error) == (
        "charge",
        "exhausted",
        3,
        {"message": "boom"},
    )
    assert again.metadata == exc.metadata


def test_set_detail_adds_a_detail_to_metadata():
    exc = errors.EntryNotFoundError("no such entry")
    exc.set_detail("reason", "refused: no such entry")
    assert exc.reason == "refused: no such entry" and exc.metadata == {"reason": "refused: no such entry"}
