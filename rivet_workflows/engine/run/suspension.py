"""Code errors suspend a run; failure types fail it (DESIGN.md section 16, docs/explanation/failures.md).

An exception that leaves the run function (or a join or race branch) outside any step body is either a
failure, which fails the workflow as the spec says (rollback handlers run), or a code error (a typo, an
``AttributeError`` on ``None``...), which leaves the run ``suspended``: nothing rolls back, the actor keeps its
state and history, and the run waits for a fix (``retry`` by an operator, or at once by the first process of
another ``CODE_VERSION``). Failures are the project's ``WORKFLOW_FAILURE_TYPES`` (``Settings.
workflow_failure_types``) plus what the engine raises on purpose (``ENGINE_FAILURES``, and a step's stored
failure however it is typed).
"""

from __future__ import annotations

import os
import traceback
from typing import Any

from ..model import errors, serde
from ..model.settings import Settings

#: what the engine raises on purpose: these fail the workflow whatever ``WORKFLOW_FAILURE_TYPES`` says (a
#: step's exhausted or critical failure propagated, the workflow's timeout, a queue wait's timeout, a join's
#: or race's collected failures, a divergence on the run's own code version, a value the store refuses)
ENGINE_FAILURES: tuple[type[BaseException], ...] = (
    errors.CriticalError,
    errors.RollbackError,
    errors.StepExhaustedError,
    errors.WorkflowTimeoutError,
    errors.QueueWaitTimeoutError,
    errors.JoinError,
    errors.RaceError,
    errors.HistoryDivergedError,
    errors.SerializationError,
    errors.PayloadTooLargeError,
    errors.StoreRejectedError,
)

#: the package whose frames an error's ``location`` skips (the engine's own frames)
_PACKAGE_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def fails(exc: BaseException, failure_types: tuple[type[BaseException], ...]) -> bool:
    """True when ``exc``, raised by workflow code outside a step body, fails the workflow: an engine failure
    (``ENGINE_FAILURES``, or any error carrying a step's stored failure) or one of ``failure_types``."""
    if isinstance(exc, ENGINE_FAILURES) or isinstance(exc, tuple(failure_types)):
        return True
    return isinstance(exc, errors.RivetWorkflowsError) and bool(exc.step_name and exc.kind)


def suspends(exc: BaseException, settings: Settings) -> bool:
    """True when ``exc`` (raised by workflow code outside a step body) is a code error: the run suspends."""
    return isinstance(exc, Exception) and not fails(exc, settings.workflow_failure_types)


def location(exc: BaseException) -> str | None:
    """Where ``exc`` was raised in the project's code: ``"path/to/file.py:42 in run"`` for the innermost
    traceback frame outside rivet_workflows (the innermost frame when every frame is ours); None when
    ``exc`` was never raised."""
    frames = traceback.extract_tb(exc.__traceback__) if exc.__traceback__ is not None else []
    if not frames:
        return None
    ours = [f for f in frames if not os.path.abspath(f.filename).startswith(_PACKAGE_DIR + os.sep)]
    frame = (ours or frames)[-1]
    return f"{_short(frame.filename)}:{frame.lineno} in {frame.name}"


def _short(path: str) -> str:
    """``path`` relative to the working directory when it is under it (a project's file), else as is."""
    try:
        relative = os.path.relpath(path)
    except ValueError:  # another drive (Windows)
        return path
    return path if relative.startswith("..") else relative


def suspended_error(exc: BaseException) -> dict[str, Any]:
    """The stored error of a suspension: ``serde.error_to_dict`` (name, message, stack, metadata) plus
    ``location`` (``location(exc)``) and ``suspended: True``."""
    error = serde.error_to_dict(exc)
    error["location"] = location(exc)
    error["suspended"] = True
    return error


def is_suspended_error(error: Any) -> bool:
    """True for a stored error written by a suspension (``suspended_error``)."""
    return isinstance(error, dict) and bool(error.get("suspended"))
