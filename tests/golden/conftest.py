"""Fixtures of the golden-history tests."""

from tests.api.support import rivet  # noqa: F401 - fixture (the inspector tests' registry, dev mode)
