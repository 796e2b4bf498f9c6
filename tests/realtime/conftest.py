"""Fixtures of the realtime tests."""

from tests.api.support import rivet  # noqa: F401 - fixture
