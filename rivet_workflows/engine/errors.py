"""Exceptions of rivet_workflows: user-visible errors and internal control-flow signals."""

from __future__ import annotations

from typing import Any


class RivetWorkflowsError(Exception):
    """Root of every error rivet_workflows raises.

    Subclasses take their default message from their docstring's first line.
    Every subclass pickles: keyword-only attributes are carried by ``__reduce__``.
    """

    #: machine-readable code used by the HTTP API (``{group, code, message, metadata}``)
    code = "rivet_error"
    group = "workflow"
    http_status = 400

    def __init__(self, message: str | None = None, **metadata: Any) -> None:
        if message is None:
            message = (type(self).__doc__ or type(self).__name__).strip().splitlines()[0]
        super().__init__(message)
        self.message = message
        self.metadata = metadata
        for key, value in metadata.items():
            setattr(self, key, value)

    def __reduce__(self):  # noqa: D105 - pickling support
        return (_rebuild, (type(self), self.message, self.metadata))

    def __str__(self) -> str:
        return self.message


def _rebuild(cls, message, metadata):
    obj = cls.__new__(cls)
    RivetWorkflowsError.__init__(obj, message, **metadata)
    return obj


# --- failures raised by step bodies (spec: "Timeouts", "Rollback") -----------------------------


class CriticalError(RivetWorkflowsError):
    """A step failed in a way that must not be retried."""

    code = "critical"


class StepNestingError(CriticalError):
    """A workflow primitive (``ctx.step``, ``ctx.sleep``, a queue wait, ...) was called inside a step body.

    Steps do not nest: the body gets ``step`` (state, vars, client), not the workflow context. A subclass of
    ``CriticalError``, so the step fails at once instead of retrying something that can never work.
    """

    code = "step_nesting"


class RollbackError(RivetWorkflowsError):
    """A step failed and the workflow must roll back; not retried, not caught by default."""

    code = "rollback"


# --- engine errors --------------------------------------------------------------------------------


class StepExhaustedError(RivetWorkflowsError):
    """A step failed and has no retries left."""

    code = "step_exhausted"

    def __init__(self, message: str | None = None, **metadata: Any) -> None:
        step_name = metadata.get("step_name")
        if message is None and step_name is not None:
            err = metadata.get("error") or {}
            message = f"step {step_name!r} exhausted its retries: {err.get('message', '')}".rstrip(": ")
        super().__init__(message, **metadata)


class HistoryDivergedError(RivetWorkflowsError):
    """The workflow code no longer matches its recorded history."""

    code = "history_diverged"
    http_status = 409


class EntryInProgressError(RivetWorkflowsError):
    """A workflow primitive was started while another one on the same context is still running (missing await?)."""

    code = "entry_in_progress"


class RollbackCheckpointError(RivetWorkflowsError):
    """A step with a rollback handler ran before any rollback_checkpoint in its scope."""

    code = "rollback_checkpoint_missing"


class JoinError(RivetWorkflowsError):
    """One or more join branches failed."""

    code = "join_failed"


class RaceError(RivetWorkflowsError):
    """Every race branch failed."""

    code = "race_failed"


class QueueWaitTimeoutError(RivetWorkflowsError):
    """A queue wait reached its timeout before a message arrived."""

    code = "queue_wait_timeout"


class StepOnlyError(RivetWorkflowsError):
    """Actor state, vars, client() and events are only reachable inside a step callback."""

    code = "step_only"


class SerializationError(RivetWorkflowsError):
    """A value cannot be serialized for storage."""

    code = "serialization_error"
    http_status = 422


class PayloadTooLargeError(RivetWorkflowsError):
    """A serialized value is larger than MAX_PAYLOAD_BYTES."""

    code = "payload_too_large"
    http_status = 413


class ActorNotFoundError(RivetWorkflowsError):
    """No actor matches."""

    group = "actor"
    code = "actor_not_found"
    http_status = 404


class ActorAlreadyExistsError(RivetWorkflowsError):
    """An actor with this name and key already exists."""

    group = "actor"
    code = "actor_already_exists"
    http_status = 409


class ActionNotFoundError(RivetWorkflowsError):
    """The actor has no such action."""

    group = "actor"
    code = "action_not_found"
    http_status = 404


class QueueNotFoundError(RivetWorkflowsError):
    """The actor declares no such queue."""

    group = "actor"
    code = "queue_not_found"
    http_status = 404


class WorkflowInFlightError(RivetWorkflowsError):
    """The workflow is running; try again once it waits or finishes."""

    code = "workflow_in_flight"
    http_status = 409


class WorkflowTimeoutError(RivetWorkflowsError):
    """The workflow passed its timeout (``workflow(run=..., timeout=seconds)``, measured from creation).

    Raised into the workflow where it stands (at a step, sleep or queue wait, or when a sleeping or waiting
    workflow is woken by its deadline): the workflow fails, rollback handlers of the steps it passed run,
    ``on_error`` gets a ``workflow`` event. Metadata: ``timeout`` (seconds), ``deadline_at`` (ISO text)."""

    code = "workflow_timeout"


class MessageAlreadyCompletedError(RivetWorkflowsError):
    """This queue message was already completed."""

    group = "queue"
    code = "message_already_completed"
    http_status = 409


class InvalidExportError(RivetWorkflowsError):
    """The exported history is malformed: not what rivet_workflows.testing.export_history returns."""

    group = "inspector"
    code = "invalid_export"
    http_status = 400


# --- inspector: replay and recover refusals (ENGINE-SEMANTICS.md section 9) ------------------------------


class EntryNotFoundError(RivetWorkflowsError):
    """The workflow history has no entry with this id."""

    group = "inspector"
    code = "entry_not_found"
    http_status = 404


class InvalidReplayTargetError(RivetWorkflowsError):
    """Only a step can be the target of a replay."""

    group = "inspector"
    code = "invalid_replay_target"
    http_status = 400


class WorkflowNotEnabledError(RivetWorkflowsError):
    """This actor has no workflow (its definition has no run handler)."""

    group = "inspector"
    code = "workflow_not_enabled"
    http_status = 400


class ActorTypeNotRegisteredError(RivetWorkflowsError):
    """The actor's type is not registered in this process, so its workflow cannot be repaired here."""

    group = "inspector"
    code = "actor_type_not_registered"
    http_status = 409


class WorkflowRolledBackError(RivetWorkflowsError):
    """The run was rolled back: a replay or recover would carry on past work its compensations undid."""

    group = "inspector"
    code = "rolled_back"
    http_status = 409


class WorkflowNotFailedError(RivetWorkflowsError):
    """Only a failed workflow can be recovered."""

    group = "inspector"
    code = "workflow_not_failed"
    http_status = 409


class ReentrantCallError(CriticalError):
    """A step body called its own actor through the client (an action, a waiting send or destroy)."""

    code = "reentrant_call"
    http_status = 409


class StepTimeoutError(RivetWorkflowsError):
    """A step body (or rollback handler) ran past its ``timeout``; its task was cancelled.

    Raised by the attempt runner to the step primitive, which records the attempt as a ``TimeoutError``
    failure (retried only with ``retry_on_timeout``); never reaches workflow code as such."""

    code = "step_timeout"


# --- store failures (the store's exceptions as the engine sees them) ---------------------------------


class StoreRejectedError(RivetWorkflowsError):
    """The store refused a write as invalid data (a database ``DataError``: a value the column cannot hold).

    Not transient, so not ``StoreUnavailable``: retrying the same write fails the same way. The executor
    fails the workflow with this error instead of running the step again every lease period."""

    code = "store_rejected"
    http_status = 422


class StoreUnavailableError(RivetWorkflowsError, RuntimeError):
    """The store was unavailable while the executor ran an actor; its lease expires and the sweep resumes it.

    Raised by ``executor.run_actor`` when its run stopped on ``StoreUnavailable`` (``__cause__``: the store's
    exception). The workflow is untouched. Also a ``RuntimeError``, as it was before it joined the root."""

    code = "store_unavailable"
    http_status = 503


def is_data_error(exc: BaseException) -> bool:
    """True for a database error about the data itself (PEP 249 ``DataError``, e.g. psycopg's or Django's,
    matched by class name so the engine needs no driver) or a text-encoding error of the driver: the store
    call is then reported as ``StoreRejectedError``."""
    if isinstance(exc, UnicodeError):
        return True
    return any(cls.__name__ == "DataError" for cls in type(exc).__mro__)


#: exceptions a store raises on purpose (engine errors, unknown ids, bad values): passed through as they are
STORE_DOMAIN_ERRORS = (RivetWorkflowsError, LookupError, TypeError, ValueError)


# --- control-flow signals (never user-visible; BaseException so `except Exception` does not swallow them)


class WorkflowSignal(BaseException):
    """Base of internal signals that unwind a workflow run."""


class WaitSignal(WorkflowSignal):
    """The run must stop and sleep until ``wake_at`` or until a message arrives on one of ``queue_names``.

    Attributes: ``wake_at`` (aware datetime or None), ``queue_names`` (frozenset of str).
    """

    def __init__(self, wake_at=None, queue_names=frozenset()):
        super().__init__(wake_at, queue_names)
        self.wake_at = wake_at
        self.queue_names = frozenset(queue_names)


class EvictedSignal(WorkflowSignal):
    """The executor lost its lease or is shutting down: stop without writing."""


class RollbackStop(WorkflowSignal):
    """Replaying a workflow that is rolling back reached work that has not happened: stop forward progress
    and go on with the rollback (ENGINE-SEMANTICS.md section 7)."""


class DryRunStop(WorkflowSignal):
    """A dry-run replay (``rivet check``) reached work that would write or run a step: stop there (nothing
    diverged so far)."""


class StoreUnavailable(WorkflowSignal):
    """A store call inside a workflow run failed for a reason outside the engine (the database connection
    dropped, a server restart...). A signal, so workflow code and the run's failure handling cannot take
    it for a workflow error: the run stops without further writes, the executor raises
    ``StoreUnavailableError`` and the lease expires, after which any worker resumes the actor (I5)."""
