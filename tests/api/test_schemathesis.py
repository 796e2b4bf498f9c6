"""Property-based API testing with schemathesis against the OpenAPI schema (DESIGN.md 6, cases C48/C59).

Both generation modes run (positive: requests the schema allows; negative: requests it forbids), through
the examples, coverage and fuzzing phases, with a fixed seed and a fixed ``max_examples`` so one run takes
well under two minutes per database. Every response must: not be a server error, have a status the
operation declares, have the declared content type, match the declared response schema, and be a 4xx
when the request breaks the schema (a bound, a pattern, a type). An error body is always ``{group, code,
message, metadata}``. Generated strings include NUL characters (``allow-x00``).
"""

from __future__ import annotations

import pytest

schemathesis = pytest.importorskip("schemathesis")

from typing import Any  # noqa: E402

from hypothesis import HealthCheck, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402
from schemathesis.checks import not_a_server_error  # noqa: E402
from schemathesis.config import SchemathesisConfig  # noqa: E402
from schemathesis.specs.openapi.checks import (  # noqa: E402
    content_type_conformance,
    negative_data_rejection,
    response_schema_conformance,
    status_code_conformance,
)

#: fixed, so a failure is reproducible and the run's length is bounded
SEED = 20_240_610
MAX_EXAMPLES = 100


def positive_data_passes_validation(ctx, response, case) -> None:
    """A request the schema allows is never refused for its shape: no 400 ``malformed_json`` and no 422
    ``validation_error`` (C59: a ``null`` replay body, which the schema allows, was a 400). Value-level
    refusals stay possible: an unknown actor (404), a step still running (409), a string with a NUL deep
    inside an ``input`` (422 ``serialization_error``)."""
    if not (case.meta and case.meta.generation.mode.is_positive) or response.status_code not in (400, 422):
        return
    code = response.json().get("code")
    assert code not in ("malformed_json", "validation_error"), (
        f"{case.method} {case.formatted_path} {case.query} {case.body!r}: the schema allows this request "
        f"but it was refused as {code}: {response.text}"
    )


CHECKS = [
    not_a_server_error,
    status_code_conformance,
    content_type_conformance,
    response_schema_conformance,
    negative_data_rejection,
    positive_data_passes_validation,
]


#: the API and inspector token of the run: every generated request carries it unless the case drops it
TOKEN = "fuzz-token"
#: what the fixture created, for ``_aim_at_real_actors`` (an id drawn at random never names an actor)
KNOWN: dict[str, Any] = {}
#: the longest a generated waiting send may wait here (seconds); every such send times out
WAIT_CAP = 0.2


@pytest.fixture
def fuzz_target(rivet):
    """Production auth (no dev mode; one bearer token for the API and the inspector) and one actor of each
    kind: a counter, a failed order (recover and replay apply), a waiter waiting on its queue."""
    rivet.configure(DEV_MODE=False, API_TOKEN=TOKEN, INSPECTOR_TOKEN=TOKEN, ACTION_TIMEOUT=0.5)
    counter = rivet.client.counter.get_or_create("c")
    waiter = rivet.client.waiter.get_or_create("w")
    rivet.drain()
    order = rivet.failed_order("o")
    KNOWN.clear()
    KNOWN.update(
        actors={
            counter.actor_id: ["increment"],
            order.actor_id: ["get_state", "boom", "add"],
            waiter.actor_id: ["approval"],  # no actions: a 404
        },
        names=["counter", "order", "waiter", "picky"],
        entries=["charge", "fetch-order", "pack-items", "nope", None],
    )
    yield rivet
    KNOWN.clear()


def _aim_at_real_actors(case, data) -> None:
    """Point most positive cases at the fixture's actors (their 200s, 400s and 409s get checked too) and
    keep every waiting send short. Negative cases keep the part the generator made invalid."""
    body = case.body if isinstance(case.body, dict) else None
    if body is not None and body.get("wait") is True:
        timeout = body.get("timeout")
        if isinstance(timeout, int | float) and not isinstance(timeout, bool) and 0 <= timeout <= 300:
            body["timeout"] = min(timeout, WAIT_CAP)
        elif timeout is None and case.meta and case.meta.generation.mode.is_positive:
            body["timeout"] = WAIT_CAP
    # 3 is the draw Hypothesis tries last, so a shrunk failure still aims at a real actor
    if not (case.meta and case.meta.generation.mode.is_positive) or data.draw(st.integers(0, 3)) == 3:
        return
    params = case.path_parameters or {}
    if "actor_id" in params:
        params["actor_id"] = data.draw(st.sampled_from(sorted(KNOWN["actors"])))
        if "/streams/" in case.path:  # a real actor's open stream: SSE would wait for items; ask for a page
            case.headers = {**(case.headers or {}), "Accept": "application/json"}
        if "action" in params:
            params["action"] = data.draw(st.sampled_from(KNOWN["actors"][params["actor_id"]]))
        if "queue" in params:
            params["queue"] = "approval"
    if body is not None and "name" in body:
        body["name"] = data.draw(st.sampled_from(KNOWN["names"]))
    if body is not None and case.path.endswith("/replay"):
        body["entryId"] = data.draw(st.sampled_from(KNOWN["entries"]))


def _wsgi_app():
    from django.core.wsgi import get_wsgi_application

    return get_wsgi_application()


def _config() -> SchemathesisConfig:
    return SchemathesisConfig.from_dict(
        {
            "seed": SEED,
            "generation": {"mode": "all", "max-examples": MAX_EXAMPLES},
            "headers": {"Authorization": f"Bearer {TOKEN}"},
        }
    )


# The schema is read through the WSGI app (no database needed for /openapi.json).
schema = schemathesis.openapi.from_wsgi("/api/rivet/openapi.json", _wsgi_app(), config=_config())


def test_both_generation_modes_run():
    """The run below really generates invalid requests and NULs too (a config typo would drop them)."""
    generation = schema.config.generation_for(operation=None)
    assert {m.value for m in generation.modes} == {"positive", "negative"}
    assert generation.allow_x00 and schema.config.seed == SEED
    phases = schema.config.phases_for(operation=None)
    assert phases.examples.enabled and phases.coverage.enabled and phases.fuzzing.enabled


@schema.parametrize()
@schema.given(data=st.data())
@settings(max_examples=MAX_EXAMPLES, deadline=None, suppress_health_check=list(HealthCheck))
def test_responses_conform_to_the_schema(case, data, fuzz_target):
    _aim_at_real_actors(case, data)
    response = case.call()
    case.validate_response(response, checks=CHECKS)
    assert response.status_code < 500, (case.method, case.formatted_path, case.body, response.text)
    if response.status_code >= 400:
        body = response.json()
        assert set(body) == {"group", "code", "message", "metadata"}, body
