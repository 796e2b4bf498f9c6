"""Typing helpers of the public API: the error-hook event shape and the step-context alias."""

from __future__ import annotations

from typing import Any, Generic, NotRequired, TypedDict, TypeVar

from ..model.failures import ErrorInfo
from .step_context import StepContext


class StepErrorEvent(TypedDict, total=False):
    """Body of a ``{"step": ...}`` error event (ENGINE-SEMANTICS.md section 8)."""

    workflow_id: str
    step_name: str
    attempt: int
    max_retries: int
    remaining_retries: int
    will_retry: bool
    retry_delay: float  # seconds, present when will_retry
    retry_at: Any  # aware datetime, present when will_retry
    error: ErrorInfo


class RollbackErrorEvent(TypedDict):
    """Body of a ``{"rollback": ...}`` error event."""

    workflow_id: str
    step_name: str
    error: ErrorInfo


class WorkflowFailureEvent(TypedDict):
    """Body of a ``{"workflow": ...}`` error event; ``suspended`` (present and True only then) when a code
    error suspended the run instead of failing it (DESIGN.md section 16)."""

    workflow_id: str
    error: ErrorInfo
    suspended: NotRequired[bool]


class WorkflowErrorEvent(TypedDict, total=False):
    """What ``on_error(c, event)`` receives: a dict with exactly one key, ``step``, ``rollback`` or
    ``workflow`` (ENGINE-SEMANTICS.md section 8; spec "Error hooks")."""

    step: StepErrorEvent
    rollback: RollbackErrorEvent
    workflow: WorkflowFailureEvent


D = TypeVar("D")


class WorkflowStepContextOf(StepContext, Generic[D]):
    """Annotation helper, as Rivet's ``WorkflowStepContextOf<typeof actor>``: write
    ``def flush_batch(step: WorkflowStepContextOf[Any]) -> None``. At run time step bodies receive a
    plain ``StepContext``; this class only exists for type hints."""
