"""rivet_workflows: durable, replayable workflows on actors for Django (public API)."""

# Importing this package never imports Django: the engine is pure Python (a test asserts that
# `import rivet_workflows.engine` loads no Django). Django-bound helpers import lazily.

from .engine.client import ActorHandle, Client, SendResult
from .engine.context import WorkflowContext
from .engine.definitions import (
    ActorDefinition,
    Concurrency,
    Loop,
    RateLimit,
    Registry,
    actor,
    event,
    queue,
    setup,
    workflow,
)
from .engine.dry_run import ReplayReport
from .engine.errors import (
    ActionNotFoundError,
    ActorAlreadyExistsError,
    ActorNotFoundError,
    ActorTypeNotRegisteredError,
    AtomicStepError,
    CriticalError,
    EntryInProgressError,
    HistoryDivergedError,
    InvalidAttributesError,
    InvalidFilterError,
    JoinError,
    MessageAlreadyCompletedError,
    NoWorkflowError,
    PayloadTooLargeError,
    QueryNotFoundError,
    QueueNotFoundError,
    QueueWaitTimeoutError,
    RaceError,
    ReentrantCallError,
    RivetWorkflowsError,
    RollbackCheckpointError,
    RollbackError,
    SerializationError,
    StepExhaustedError,
    StepNestingError,
    StepOnlyError,
    StoreRejectedError,
    TooManyWaitingSendsError,
    WorkflowFailure,
    WorkflowFinishedError,
    WorkflowInFlightError,
    WorkflowTimeoutError,
)
from .engine.executor import DrainSummary
from .engine.failures import ErrorInfo, StepFailure, TryFailure
from .engine.repairs import ReplayPlan
from .engine.results import QueueMessage, RaceResult, StepResult, TryResult
from .engine.search import ActorPage, ActorSummary, BulkResult
from .engine.slots import ScheduledFireInfo
from .engine.step_context import StepContext
from .engine.types import WorkflowErrorEvent, WorkflowStepContextOf


def client() -> Client:
    """The client of the registry named by ``RIVET_WORKFLOWS["REGISTRY"]``, bound to the Django store.

    Returns a ``Client``: ``client().payment_actor.get_or_create(["order-1"])`` (DESIGN.md section 2).
    Raises ``django.core.exceptions.ImproperlyConfigured`` when the registry cannot be imported.
    """
    from .django_runtime import client as _client

    return _client()


def drain(timeout: float = 10.0) -> DrainSummary:
    """Run, in this process, every actor with work due now, and keep going while a deadline falls within
    ``timeout`` seconds; never blocks past ``timeout``. Returns a summary (actors run, steps executed,
    still waiting). Same executor and leases as the Celery worker (DESIGN.md section 9)."""
    from .django_runtime import drain as _drain

    return _drain(timeout)


__all__ = [
    "ActionNotFoundError",
    "ActorAlreadyExistsError",
    "ActorDefinition",
    "ActorHandle",
    "ActorNotFoundError",
    "ActorPage",
    "ActorSummary",
    "ActorTypeNotRegisteredError",
    "AtomicStepError",
    "BulkResult",
    "Client",
    "Concurrency",
    "CriticalError",
    "DrainSummary",
    "EntryInProgressError",
    "ErrorInfo",
    "HistoryDivergedError",
    "InvalidAttributesError",
    "InvalidFilterError",
    "JoinError",
    "Loop",
    "MessageAlreadyCompletedError",
    "NoWorkflowError",
    "PayloadTooLargeError",
    "QueryNotFoundError",
    "QueueMessage",
    "QueueNotFoundError",
    "QueueWaitTimeoutError",
    "RaceError",
    "RaceResult",
    "RateLimit",
    "ReentrantCallError",
    "Registry",
    "ReplayPlan",
    "ReplayReport",
    "RivetWorkflowsError",
    "RollbackCheckpointError",
    "RollbackError",
    "ScheduledFireInfo",
    "SendResult",
    "SerializationError",
    "StepContext",
    "StepExhaustedError",
    "StepFailure",
    "StepNestingError",
    "StepOnlyError",
    "StepResult",
    "StoreRejectedError",
    "TooManyWaitingSendsError",
    "TryFailure",
    "TryResult",
    "WorkflowContext",
    "WorkflowErrorEvent",
    "WorkflowFailure",
    "WorkflowFinishedError",
    "WorkflowInFlightError",
    "WorkflowStepContextOf",
    "WorkflowTimeoutError",
    "actor",
    "client",
    "drain",
    "event",
    "queue",
    "setup",
    "workflow",
]


def __dir__() -> list[str]:
    """The public names (``__all__``), not the submodules and helpers the package imports."""
    return sorted(__all__)
