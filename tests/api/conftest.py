"""Fixtures of the API tests."""

from tests.api.support import rivet  # noqa: F401 - fixture
