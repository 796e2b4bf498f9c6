"""The engine contract tests (tests/contract) run again on the Django store (no manual clock there)."""

from __future__ import annotations

import importlib
from pathlib import Path
from typing import Any

import pytest

from tests.contract.conftest import Harness

pytestmark = pytest.mark.django_db(transaction=True)

for _path in sorted((Path(__file__).parent.parent / "contract").glob("test_*.py")):
    _module = importlib.import_module(f"tests.contract.{_path.stem}")
    for _name, _obj in vars(_module).items():
        if _name.startswith("test_") and callable(_obj):
            globals()[f"{_name}__{_path.stem.removeprefix('test_')}"] = _obj


class DjangoHarness(Harness):
    """The contract Harness on the Django store (``storage.store_for``); tests that need a manual clock are skipped.

    Each ``setup`` starts from an empty database and a fresh store object, like a fresh MemoryStore.
    """

    def setup(self, *, manual_clock: bool = False, **definitions: Any):
        if manual_clock:
            pytest.skip("the Django store reads the database clock; no manual clock")
        from rivet_workflows import models

        models.Actor.objects.all().delete()
        return super().setup(**definitions)


def _django_runtime(registry: Any, clock: Any = None):
    from rivet_workflows import storage
    from rivet_workflows.driver.dispatch import LocalDispatcher
    from rivet_workflows.engine.runtime.runtime import Runtime, Settings

    return Runtime(
        storage.store_for(poll_interval=0.01),
        LocalDispatcher(),
        registry,
        settings=Settings(poll_interval=0.01),
    )


@pytest.fixture
def h() -> Harness:
    """A Harness whose runtimes use the Django store + LocalDispatcher on the test database."""
    return DjangoHarness(_django_runtime)


def test_every_contract_test_runs_here_too():
    """Each test function of tests/contract is re-exported above, so none is left to the memory store."""
    contract = Path(__file__).parent.parent / "contract"
    expected = {
        f"{name}__{path.stem.removeprefix('test_')}"
        for path in contract.glob("test_*.py")
        for name, obj in vars(importlib.import_module(f"tests.contract.{path.stem}")).items()
        if name.startswith("test_") and callable(obj)
    }
    assert expected, "no contract tests found"
    assert expected <= set(globals())
