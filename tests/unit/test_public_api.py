"""The public API of DESIGN.md section 2 is importable from `rivet_workflows` without Django."""

from __future__ import annotations

import pickle
import subprocess
import sys

import pytest

import rivet_workflows
from rivet_workflows.engine.model import errors

DESIGN_NAMES = [
    "actor", "workflow", "queue", "event", "setup", "Registry", "Loop", "client", "drain",
    "RivetWorkflowsError", "CriticalError", "RollbackError", "StepExhaustedError", "HistoryDivergedError",
    "EntryInProgressError", "RollbackCheckpointError", "JoinError", "RaceError", "QueueWaitTimeoutError",
    "StepOnlyError", "SerializationError", "PayloadTooLargeError", "ActorNotFoundError",
    "ActionNotFoundError", "QueueNotFoundError", "WorkflowInFlightError", "WorkflowErrorEvent",
    "ScheduledFireInfo", "StepResult", "TryResult", "RaceResult", "QueueMessage", "WorkflowStepContextOf",
    "StepFailure", "TryFailure", "ErrorInfo",
]  # fmt: skip


@pytest.mark.parametrize("name", DESIGN_NAMES)
def test_design_name_is_exported(name):
    assert name in rivet_workflows.__all__
    assert getattr(rivet_workflows, name) is not None


def _error_classes():
    return [
        obj
        for obj in vars(errors).values()
        if isinstance(obj, type) and issubclass(obj, errors.RivetWorkflowsError)
    ]


@pytest.mark.parametrize("cls", _error_classes(), ids=lambda c: c.__name__)
def test_every_error_is_under_the_root_and_pickles(cls):
    exc = cls("boom", step_name="charge", attempts=2)
    again = pickle.loads(pickle.dumps(exc))
    assert type(again) is cls
    assert str(again) == "boom"
    assert again.step_name == "charge" and again.attempts == 2


def _signal_classes():
    return [
        obj
        for obj in vars(errors).values()
        if isinstance(obj, type) and issubclass(obj, errors.WorkflowSignal)
    ]


@pytest.mark.parametrize("cls", _signal_classes(), ids=lambda c: c.__name__)
def test_every_signal_is_apart_from_the_errors_and_pickles(cls):
    assert not issubclass(cls, Exception)  # ``except Exception`` in workflow code never swallows one
    signal = cls() if cls is not errors.WaitSignal else cls(None, {"orders"})
    again = pickle.loads(pickle.dumps(signal))
    assert type(again) is cls
    if cls is errors.WaitSignal:
        assert again.queue_names == frozenset({"orders"}) and again.wake_at is None


def test_store_unavailable_error_is_under_the_root():
    exc = errors.StoreUnavailableError("store unavailable while running actor a1")
    assert isinstance(exc, errors.RivetWorkflowsError) and isinstance(exc, RuntimeError)
    assert exc.code == "store_unavailable"


def test_default_message_comes_from_the_docstring():
    assert str(errors.StepOnlyError()).startswith("Actor state, vars, client() and events")


def test_importing_the_package_loads_no_django():
    code = "import sys, rivet_workflows, rivet_workflows.engine; print('django' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_dir_lists_the_public_names_only():
    listed = set(dir(rivet_workflows))
    assert listed == set(rivet_workflows.__all__)
    assert not {"Any", "annotations", "engine"} & listed
    for name in rivet_workflows.__all__:
        assert hasattr(rivet_workflows, name)
