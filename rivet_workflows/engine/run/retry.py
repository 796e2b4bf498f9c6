"""Step retry policy: failure classes, backoff delays and the stored failure of an exhausted step."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..model import errors
from ..model.failures import StepFailure

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


# --- the attempt log (manual: HTTP API, Attempts) -----------------------------------------------------------

#: the key of a step entry's data that keeps its attempts: ``[{attempt, started_at, finished_at, outcome,
#: error: {name, message} | None}]``, oldest first, the last ``MAX_LOGGED_ATTEMPTS`` of them
ATTEMPT_LOG = "attempt_log"
MAX_LOGGED_ATTEMPTS = 10
#: longest error message kept per attempt (characters); the whole last error stays in the entry's ``error``
MAX_LOGGED_MESSAGE = 1000

# outcomes of one attempt
ATTEMPT_RUNNING = "running"
ATTEMPT_COMPLETED = "completed"
ATTEMPT_FAILED = "failed"
ATTEMPT_TIMED_OUT = "timed out"
#: started, never finished: its executor died or lost the lease (found by the next holder of the lease)
ATTEMPT_WORKER_LOST = "worker lost"


def _logged_error(error: dict | None) -> dict | None:
    if not error:
        return None
    message = str(error.get("message") or "")
    if len(message) > MAX_LOGGED_MESSAGE:
        message = message[: MAX_LOGGED_MESSAGE - 1] + "…"
    return {"name": error.get("name"), "message": message}


def start_attempt(data: dict, attempt: int, started_at: Any) -> dict:
    """``data`` (a step entry's) with attempt number ``attempt`` logged as running since ``started_at``.

    Returns a new dict with a new log list (the entry's previous data may be shared with a pending commit),
    capped at the last ``MAX_LOGGED_ATTEMPTS`` attempts.
    """
    log = list(data.get(ATTEMPT_LOG) or [])
    log.append(
        {
            "attempt": attempt,
            "started_at": started_at,
            "finished_at": None,
            "outcome": ATTEMPT_RUNNING,
            "error": None,
        }
    )
    return {**data, ATTEMPT_LOG: log[-MAX_LOGGED_ATTEMPTS:]}


def finish_attempt(
    data: dict,
    attempt: int,
    outcome: str,
    finished_at: Any,
    error: dict | None = None,
    started_at: Any = None,
) -> dict:
    """``data`` with attempt ``attempt`` logged as ended with ``outcome`` (an ``ATTEMPT_*``) at
    ``finished_at`` (None for a lost attempt) and ``error`` (``serde.error_to_dict`` form; name and message
    are kept). An attempt missing from the log (recorded before attempts were logged, or not committed
    when it started) is added, started at ``started_at``. Returns a new dict; ``data`` is not changed."""
    log = list(data.get(ATTEMPT_LOG) or [])
    item = {
        "attempt": attempt,
        "started_at": started_at,
        "finished_at": finished_at,
        "outcome": outcome,
        "error": _logged_error(error),
    }
    if log and log[-1].get("attempt") == attempt:
        item["started_at"] = log[-1].get("started_at", started_at)
        log[-1] = item
    else:
        log.append(item)
    return {**data, ATTEMPT_LOG: log[-MAX_LOGGED_ATTEMPTS:]}
