"""Step retry policy: failure classes, backoff delays and the stored failure of an exhausted step."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from . import errors
from .failures import StepFailure

# failure kinds (ENGINE-SEMANTICS.md section 3, try_step)
CRITICAL = "critical"
ROLLBACK = "rollback"
TIMEOUT = "timeout"
EXHAUSTED = "exhausted"
RETRYABLE = "retryable"
SERIALIZATION = "serialization"

#: kinds try_step catches by default; ``catch=("rollback",)`` adds rollback
DEFAULT_CATCH = frozenset({CRITICAL, TIMEOUT, EXHAUSTED})


@dataclass(frozen=True)
class StepOptions:
    """Options of one ``ctx.step`` call; durations in seconds (ENGINE-SEMANTICS.md section 3)."""

    max_retries: int = 3
    retry_backoff_base: float = 0.1
    retry_backoff_max: float = 30.0
    timeout: float | None = 30.0
    retry_on_timeout: bool = False
    ephemeral: bool = False
    #: the body runs inside the transaction that records the step (DESIGN.md section 13)
    atomic: bool = False


def backoff_delay(attempts: int, base: float, maximum: float) -> float:
    """Seconds to wait after the ``attempts``-th failed attempt: ``min(maximum, base * 2**attempts)``."""
    try:
        delay = base * (2**attempts)
    except OverflowError:
        return maximum
    return min(maximum, delay)


def classify(exc: BaseException, *, timed_out: bool, options: StepOptions) -> str:
    """The failure class of one attempt's exception: CRITICAL, ROLLBACK, TIMEOUT, SERIALIZATION or RETRYABLE.

    A timeout with ``retry_on_timeout`` counts as retryable (its kind stays "timeout" on exhaustion).
    """
    if timed_out:
        return RETRYABLE if options.retry_on_timeout else TIMEOUT
    if isinstance(exc, (errors.SerializationError, errors.PayloadTooLargeError)):
        return SERIALIZATION
    if isinstance(exc, errors.RollbackError):
        return ROLLBACK
    if isinstance(exc, errors.CriticalError):
        return CRITICAL
    return RETRYABLE


def exhausted_error(kind: str, raised: str, step_name: str, error: dict, attempts: int) -> BaseException:
    """The exception an exhausted step raises (again, on replay) for its stored failure.

    ``kind`` is the try_step kind (critical, rollback, timeout, exhausted, serialization); ``raised`` the
    exception class to raise: "critical" (a CriticalError; also a timeout without retry_on_timeout),
    "rollback", "serialization"/"payload" (the serializer's error) or "exhausted" (``StepExhaustedError``).
    ``error`` is the ``serde.error_to_dict`` form of the last attempt's exception. Every error carries
    ``step_name``, ``attempts``, ``error`` and ``kind`` as metadata.
    """
    meta: dict[str, Any] = {"step_name": step_name, "attempts": attempts, "error": error, "kind": kind}
    message = error.get("message") or error.get("name") or "step failed"
    if raised == CRITICAL:
        if kind == TIMEOUT:
            message = f"step {step_name!r} timed out"
        return errors.CriticalError(message, **meta)
    if raised == ROLLBACK:
        return errors.RollbackError(message, **meta)
    if raised == "payload":
        return errors.PayloadTooLargeError(message, **meta)
    if raised == SERIALIZATION:
        return errors.SerializationError(message, **meta)
    return errors.StepExhaustedError(None, **meta)


def failure_dict(kind: str, step_name: str, attempts: int, error: dict) -> StepFailure:
    """The ``try_step`` failure: a ``StepFailure`` ``{kind, step_name, attempts, error: {name, message, stack?,
    metadata?}}`` (attribute and mapping access)."""
    return StepFailure(kind, step_name, attempts, dict(error))
