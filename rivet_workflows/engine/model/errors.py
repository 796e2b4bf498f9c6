"""Exceptions of rivet_workflows: user-visible errors and internal control-flow signals."""

from __future__ import annotations

from typing import Any


class RivetWorkflowsError(Exception):
    """Root of every error rivet_workflows raises.

    Subclasses take their default message from their docstring's first line. Details are typed attributes
    (None when not given), passed as keywords: ``SerializationError(msg, where=..., path=...)``;
    ``metadata`` (the HTTP API's ``metadata`` object, the stored error's) is the dict of the details given,
    in that order. The details any error may carry are declared here; a class declares its own.
    Every subclass pickles: the details are carried by ``__reduce__``.
    """

    #: machine-readable code used by the HTTP API (``{group, code, message, metadata}``)
    code = "rivet_error"
    group = "workflow"
    http_status = 400

    # -- a step's stored failure, on whichever error it raises (``retry.exhausted_error``)
    #: the step's name
    step_name: str | None = None
    #: the ``try_step`` kind of the failure (critical, rollback, timeout, exhausted, serialization)
    kind: str | None = None
    #: attempts the step made
    attempts: int | None = None
    #: the last attempt's error (``serde.error_to_dict`` form)
    error: dict | None = None
    # -- a refused repair (replay, recover, retry)
    #: the short text of the refusal (``repairs.reason``)
    reason: str | None = None
    #: the entry a replay could start from instead, when one could
    replay_from: str | None = None
    #: how to make the code fit the history (a divergence)
    hint: str | None = None

    def __init__(self, message: str | None = None, **details: Any) -> None:
        if message is None:
            message = (type(self).__doc__ or type(self).__name__).strip().splitlines()[0]
        super().__init__(message)
        self.message = message
        self._details: tuple[str, ...] = ()
        for name, value in details.items():
            self.set_detail(name, value)

    def set_detail(self, name: str, value: Any) -> None:
        """Set the detail attribute ``name`` to ``value`` and list it in ``metadata``."""
        setattr(self, name, value)
        if name not in self._details:
            self._details += (name,)

    @property
    def metadata(self) -> dict[str, Any]:
        """The details given (name -> value, in the order given): the HTTP error body's ``metadata``."""
        return {name: getattr(self, name) for name in self._details}

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


class WorkflowFailure(RivetWorkflowsError):
    """The workflow failed on purpose: raise it from workflow code to fail the run (rollback handlers run,
    ``on_error`` gets a ``workflow`` event), as opposed to a code error, which suspends the run.

    ``WorkflowFailure(message, details=None)``: ``details`` is any JSON-ready value kept with the stored error
    (``error["metadata"]["details"]``). The default of the setting ``WORKFLOW_FAILURE_TYPES``
    (docs/explanation/failures.md, DESIGN.md section 16); pickles like every error here."""

    code = "workflow_failure"
    details: Any

    def __init__(self, message: str | None = None, details: Any = None, **metadata: Any) -> None:
        super().__init__(message, details=details, **metadata)


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
    #: the history location (entry key) where the replay diverged
    location: str | None = None
    #: how far the replay got (the entries it matched)
    reached: Any = None
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
    #: the join's name
    join: str | None = None


class RaceError(RivetWorkflowsError):
    """Every race branch failed."""

    code = "race_failed"
    #: the race's name
    race: str | None = None


class QueueWaitTimeoutError(RivetWorkflowsError):
    """A queue wait reached its timeout before a message arrived."""

    code = "queue_wait_timeout"


class InvalidAttributesError(CriticalError, ValueError):
    """Search attributes must be a dict of JSON scalars (DESIGN.md section 19).

    Raised by ``ctx.set_attributes`` and ``step.set_attributes`` (a step fails at once: a ``CriticalError``,
    not retried) and by an attribute filter; ``metadata["attribute"]`` names the offending key."""

    code = "invalid_attributes"


class InvalidFilterError(RivetWorkflowsError, ValueError):
    """A listing or bulk filter is not valid (unknown state or action, naive datetime, bad cursor or limit).

    ``metadata["field"]`` names the field (DESIGN.md section 19); HTTP 400."""

    code = "invalid_filter"


class StepOnlyError(RivetWorkflowsError):
    """Actor state, vars, client() and events are only reachable inside a step callback."""

    code = "step_only"


class SerializationError(RivetWorkflowsError):
    """A value cannot be serialized for storage."""

    code = "serialization_error"
    #: what the value is (``"step 'charge' output"``)
    where: str | None = None
    #: the type that cannot be stored
    type_name: str | None = None
    #: where in the value (``$.items[2]``)
    path: str | None = None
    #: an unknown or malformed tag (decoding)
    tag: str | None = None
    http_status = 422


class PayloadTooLargeError(RivetWorkflowsError):
    """A serialized value is larger than MAX_PAYLOAD_BYTES."""

    code = "payload_too_large"
    #: what the value is (``"actor state"``)
    where: str | None = None
    #: its encoded size, bytes
    size: int | None = None
    #: the limit, bytes
    limit: int | None = None
    http_status = 413


class ActorNotFoundError(RivetWorkflowsError):
    """No actor matches."""

    group = "actor"
    code = "actor_not_found"
    http_status = 404


class ScheduleNotFoundError(RivetWorkflowsError):
    """No schedule with this id (DESIGN.md section 20); ``metadata``: ``schedule_id``."""

    group = "schedule"
    code = "schedule_not_found"
    http_status = 404


class ScheduleAlreadyExistsError(RivetWorkflowsError):
    """A schedule with this id already exists; ``metadata``: ``schedule_id``."""

    group = "schedule"
    code = "schedule_already_exists"
    http_status = 409


class InvalidScheduleError(RivetWorkflowsError, ValueError):
    """A schedule's definition is invalid (DESIGN.md section 20): neither or both of ``cron`` and ``every``,
    ``every`` below 1 s, a cron expression or timezone that does not parse, an unknown ``catchup``, or a
    backfill range with ``end`` before ``start``. ``metadata``: ``field``. Also a ``ValueError``."""

    group = "schedule"
    code = "invalid_schedule"
    http_status = 422


class InvalidKeyError(RivetWorkflowsError, TypeError):
    """An actor key must be a string, an integer, or a list of strings and integers.

    Raised by the client for any other part (a float, NaN, a bool, None, a nested list or dict, an integer
    beyond +-(2**53 - 1), which JSON clients cannot carry exactly); ``metadata``: ``index`` of the part and
    its ``type``. Also a ``TypeError``. Over HTTP the schema refuses such a key first (422)."""

    group = "actor"
    code = "invalid_key"
    http_status = 422


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


class QueryNotFoundError(RivetWorkflowsError):
    """The actor has no such query."""

    group = "actor"
    code = "query_not_found"
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


class NoWorkflowError(RivetWorkflowsError):
    """The actor's type has no workflow (no run function), so nothing would ever receive a queue message.

    Raised by every send (``ActorHandle.send``, ``c.queue.send``, HTTP ``POST /actors/{id}/queues/{queue}``:
    409 ``no_workflow``) before anything is stored; ``metadata``: ``actor`` (the type), ``queue``."""

    group = "queue"
    code = "no_workflow"
    http_status = 409


class WorkflowFinishedError(RivetWorkflowsError):
    """The actor's workflow is completed or cancelled, so nothing would ever receive a queue message.

    Raised by every send from outside a run (``ActorHandle.send``, ``c.queue.send`` in an action or a
    scheduled action, HTTP ``POST /actors/{id}/queues/{queue}``: 409 ``workflow_finished``); the store
    refuses it under the actor's row lock, so nothing is stored. A failed workflow still accepts messages
    (a recover or replay may consume them). ``metadata``: ``actor_id``, ``workflow_state``, ``queue``."""

    group = "queue"
    code = "workflow_finished"
    http_status = 409


def workflow_finished(actor_id: str, workflow_state: str, queue: str) -> WorkflowFinishedError:
    """The ``WorkflowFinishedError`` a store raises for a send to ``actor_id`` whose workflow is
    ``workflow_state`` (completed or cancelled) on queue ``queue``."""
    return WorkflowFinishedError(
        f"the workflow of actor {actor_id} is {workflow_state}: nothing would ever receive a message on queue "
        f"{queue!r} (a failed workflow still accepts messages, for a recover or replay)",
        actor_id=actor_id,
        workflow_state=workflow_state,
        queue=queue,
    )


class StreamClosedError(RivetWorkflowsError):
    """A write to a durable stream that is closed (``ctx.stream(name).close()`` ran, or the workflow
    finished): nothing is written (DESIGN.md section 17). ``metadata``: ``actor_id``, ``stream``."""

    group = "stream"
    code = "stream_closed"
    http_status = 409


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


class AtomicStepError(CriticalError):
    """An atomic step's body wrote through a database alias other than the store's (DESIGN.md section 13).

    Only the store's database takes part in the transaction that records the step, so such a write could
    not be rolled back with the step: the attempt fails at that statement (a critical failure, not retried)
    and its writes on the store's alias are rolled back. Metadata: ``alias``, ``store_alias``."""

    code = "atomic_step"


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
    """The store is unavailable (the database connection dropped, the server restarts...); try again later.

    Raised by a store call that failed for a reason outside the engine (the Django stores translate the
    database's ``OperationalError``/``InterfaceError``; ``__cause__``: the original), so no caller takes it
    for an error of user code: over HTTP a 503 ``{group: "server", code: "store_unavailable"}`` with
    ``Retry-After``. Inside a workflow run it becomes the ``StoreUnavailable`` signal, and
    ``executor.run_actor`` raises this error when its run stopped on it: the workflow is untouched, its
    lease expires and the sweep resumes it. Also a ``RuntimeError``, as it was before it joined the root.
    Under ``SHARDS`` the detail ``shard`` names the database alias that failed (``metadata.shard``)."""

    code = "store_unavailable"
    group = "server"
    http_status = 503
    #: seconds an HTTP client is told to wait before retrying (the ``Retry-After`` header)
    retry_after = 5
    #: the database alias of the shard that failed, when a sharded store names it (DESIGN.md section 21)
    shard: str | None = None


class TooManyWaitingSendsError(RivetWorkflowsError):
    """Too many sends of this process wait for their response already; try again shortly.

    Raised by ``handle.send(..., wait=True)`` (and ``asend``) beyond ``MAX_WAITING_SENDS`` concurrent
    waiting sends of the process, before anything is stored (``metadata``: ``limit``); over HTTP a 429
    ``{group: "server", code: "too_many_waiting_sends"}`` with ``Retry-After`` (docs/howto/calling.md)."""

    code = "too_many_waiting_sends"
    group = "server"
    http_status = 429
    #: seconds an HTTP client is told to wait before retrying (the ``Retry-After`` header)
    retry_after = 1


class ShardConfigError(RivetWorkflowsError, ValueError):
    """Invalid shard configuration: the aliases or the bucket count of a shard map (DESIGN.md section 21;
    ``metadata``: ``buckets`` when that is the cause)."""

    code = "invalid_shard_config"
    group = "server"
    http_status = 500


class InvalidBucketError(RivetWorkflowsError, ValueError):
    """A shard bucket (or bucket count) out of range: a bucket is an int in 0..65535 (``metadata``:
    ``bucket`` or ``buckets``)."""

    code = "invalid_bucket"


class CrossShardForkError(RivetWorkflowsError):
    """A fork given a key that lives on another shard than its source; fork without a key (the fork then
    stays on its source's shard; DESIGN.md section 21; ``metadata``: ``actor_id``)."""

    code = "cross_shard_fork"
    http_status = 409


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


class AtomicBodyFailed(Exception):  # noqa: N818 - a carrier, not an error of its own
    """Carries the exception of an atomic step's body (``__cause__``) out of the store's transaction, which
    it rolls back; the step primitive unwraps it (so the store call is not mistaken for a store failure)."""


class EvictedSignal(WorkflowSignal):
    """The executor lost its lease or is shutting down: stop without writing."""


class RollbackStop(WorkflowSignal):
    """Replaying a workflow that is rolling back reached work that has not happened: stop forward progress
    and go on with the rollback (ENGINE-SEMANTICS.md section 7)."""


class OtherCodeVersionSignal(WorkflowSignal):
    """A replay diverged on history entries written by another code version (a rolling deploy: old-code and
    new-code workers share the queue). The run stops and writes nothing; the executor releases the actor,
    unchanged and due, for a process of that version (DESIGN.md section 12; manual: Deploy new code).

    Attributes: ``code_version`` (the version that wrote the entry where the replay diverged) and
    ``divergence`` (the ``HistoryDivergedError`` a process of the run's own
    version would fail the workflow with).
    """

    def __init__(self, code_version: str = "", divergence: HistoryDivergedError | None = None) -> None:
        super().__init__(code_version, divergence)
        self.code_version = code_version
        self.divergence = divergence


class DryRunStop(WorkflowSignal):
    """A dry-run replay (``rivet check``) reached work that would write or run a step: stop there (nothing
    diverged so far)."""


class StoreUnavailable(WorkflowSignal):
    """A store call inside a workflow run failed for a reason outside the engine (the database connection
    dropped, a server restart...). A signal, so workflow code and the run's failure handling cannot take
    it for a workflow error: the run stops without further writes, the executor raises
    ``StoreUnavailableError`` and the lease expires, after which any worker resumes the actor (I5)."""
