"""rivet_workflows: durable, replayable workflows on actors for Django (public API)."""

# Importing this package never imports Django: the engine is pure Python (a test asserts that
# `import rivet_workflows.engine` loads no Django). Django-bound helpers import lazily.

from .engine.actor.data_schedules import ScheduleInfo
from .engine.actor.slots import ScheduledFireInfo
from .engine.client.client import ActorHandle, Client, SendResult
from .engine.model.definitions import (
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
from .engine.model.errors import (
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
    InvalidScheduleError,
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
    ScheduleAlreadyExistsError,
    ScheduleNotFoundError,
    SerializationError,
    StepExhaustedError,
    StepNestingError,
    StepOnlyError,
    StoreRejectedError,
    StreamClosedError,
    TooManyWaitingSendsError,
    WorkflowFailure,
    WorkflowFinishedError,
    WorkflowInFlightError,
    WorkflowTimeoutError,
)
from .engine.model.failures import ErrorInfo, StepFailure, TryFailure
from .engine.model.records import StreamItem
from .engine.operate.dry_run import ReplayReport
from .engine.operate.repairs import ReplayPlan
from .engine.operate.search import ActorPage, ActorSummary, BulkResult
from .engine.run.context import WorkflowContext
from .engine.run.results import QueueMessage, RaceResult, StepResult, TryResult
from .engine.run.step_context import StepContext
from .engine.run.types import WorkflowErrorEvent, WorkflowStepContextOf
from .engine.runtime.executor import DrainSummary


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
    "StreamClosedError",
    "StreamItem",
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
    "InvalidScheduleError",
    "ScheduleAlreadyExistsError",
    "ScheduleInfo",
    "ScheduleNotFoundError",
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
