"""Property-based API testing with schemathesis against the OpenAPI schema: no input gets a 5xx."""

from __future__ import annotations

import pytest

schemathesis = pytest.importorskip("schemathesis")

from hypothesis import HealthCheck, settings  # noqa: E402
from schemathesis.checks import not_a_server_error  # noqa: E402


def allow_all(request):
    """API_AUTH for this test: every request is authorized, so bodies reach validation and the engine."""
    return "fuzzer"


@pytest.fixture
def fuzz_target(rivet):
    """Authorize everything and create a few actors (generated ids mostly miss them: 404s)."""
    rivet.configure(API_AUTH="tests.api.test_schemathesis.allow_all", ACTION_TIMEOUT=1.0)
    rivet.client.counter.get_or_create("c")
    rivet.client.order.get_or_create("o")
    return rivet


def _wsgi_app():
    from django.core.wsgi import get_wsgi_application

    return get_wsgi_application()


# The schema is read through the WSGI app (no database needed for /openapi.json).
schema = schemathesis.openapi.from_wsgi("/api/rivet/openapi.json", _wsgi_app())


@schema.parametrize()
@settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck))
def test_no_request_gets_a_server_error(case, fuzz_target):
    response = case.call()
    case.validate_response(response, checks=[not_a_server_error])
    assert response.status_code < 500, (case.method, case.formatted_path, case.body, response.text)
    if response.status_code >= 400 and response.status_code != 405:
        body = response.json()
        assert {"group", "code", "message", "metadata"} <= set(body), body
