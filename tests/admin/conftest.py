"""Fixtures of the admin tests."""

from tests.api.support import rivet  # noqa: F401 - fixture
