"""Request and response schemas of the HTTP API (DESIGN.md section 6)."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal

from ninja import Field, Schema
from pydantic import (
    BeforeValidator,
    ConfigDict,
    StrictBool,
    StrictFloat,
    StrictStr,
    TypeAdapter,
    ValidationError,
    ValidatorFunctionWrapHandler,
    WrapValidator,
)
from pydantic_core import PydanticCustomError

from .. import inputs, states
from ..engine.model.keys import MAX_KEY_INT

#: the longest a waiting send may wait (seconds): ``SendIn.timeout``'s bound
MAX_SEND_TIMEOUT = 300.0
#: the largest page of ``GET /actors``
MAX_PAGE = 500
#: the longest actor type, queue and action name (the columns are ``varchar(200)``)
MAX_NAME_CHARS = 200
#: the length of an actor id (``models.new_actor_id``: 32 hex digits)
ACTOR_ID_CHARS = 32

#: text a database can store (no NUL; a lone surrogate is refused by the validator itself)
StorableText = Annotated[str, Field(pattern=inputs.TEXT_PATTERN)]


def _integer_key_part(value: Any) -> Any:
    """A JSON number without a fraction (``10`` or ``10.0``) as an int; a bool or a fraction is refused."""
    if isinstance(value, bool):
        raise ValueError("a boolean is not a key part")
    if isinstance(value, float):
        if not value.is_integer():
            raise ValueError("a key part is a string or an integer")
        return int(value)
    return value


#: one part of an actor key: a string or an integer (a JSON number without fraction, not a bool) within
#: +-(2**53 - 1), the same key type as the Python client's (``engine.keys.normalize_key``)
KeyPart = (
    StorableText | Annotated[int, Field(ge=-MAX_KEY_INT, le=MAX_KEY_INT), BeforeValidator(_integer_key_part)]
)

_ONE_PART: TypeAdapter[Any] = TypeAdapter(KeyPart)


def _key_part_problem(part: Any) -> str | None:
    """What is wrong with one key part, in the manual's words, or None when it is a valid part."""
    try:
        _ONE_PART.validate_python(part)
    except ValidationError:
        pass
    else:
        return None
    if isinstance(part, str):
        return inputs.text_problem(part) or "is not valid text"
    if isinstance(part, bool):
        return "must be an integer or a string, not a boolean"
    if isinstance(part, int | float) and float(part).is_integer():
        return f"is outside -{MAX_KEY_INT}..{MAX_KEY_INT}"
    return "must be an integer or a string"


def _key_in_words(value: Any, handler: ValidatorFunctionWrapHandler) -> Any:
    """Validate a key with ``handler``; refuse a bad one with one error in the manual's words ("key part 2
    must be an integer or a string") instead of one error per member of the type's union."""
    try:
        return handler(value)
    except ValidationError:
        if isinstance(value, list):
            if not value:
                raise PydanticCustomError("invalid_key", "a key has at least one part") from None
            for number, part in enumerate(value, start=1):
                problem = _key_part_problem(part)
                if problem is not None:
                    raise PydanticCustomError(
                        "invalid_key", "key part {number} {problem}", {"number": number, "problem": problem}
                    ) from None
        problem = _key_part_problem(value) or "must be a string, an integer or a list of them"
        if isinstance(value, dict | type(None)):
            problem = "must be a string, an integer or a list of them"
        raise PydanticCustomError("invalid_key", "the key {problem}", {"problem": problem}) from None


#: an actor key: a string, an integer or a list of them (``engine.keys.normalize_key``'s key type)
Key = Annotated[KeyPart | list[KeyPart], WrapValidator(_key_in_words)]


class StrictSchema(Schema):
    """The base of every request body schema: a field the schema does not declare is refused (422
    ``validation_error`` naming it, docs/reference/http-api.md), so a misspelt field or one of a newer API is never
    silently dropped (a dropped ``dryRun`` would replay for real)."""

    model_config = ConfigDict(extra="forbid")


#: the values of the ``state`` filter of ``GET /actors``: ``states.SHOWN_STATES``, the stored workflow
#: states (ENGINE-SEMANTICS.md section 1), ``paused`` for a paused unfinished actor (``ports.PAUSED``) and
#: ``no_workflow`` for actors whose type has no run function (``inspector.NO_WORKFLOW``); neither is stored
WorkflowState = Literal[states.SHOWN_STATES]  # type: ignore[valid-type]  # Literal of the tuple's values


class ErrorOut(Schema):
    """Every error body: ``{group, code, message, metadata}``."""

    group: str
    code: str
    message: str
    metadata: dict[str, Any] = {}


class CreateActorIn(StrictSchema):
    """``POST /actors``: the actor type ``name``, its ``key`` (a string, an integer, or a list of strings
    and integers: ``"eu"``, ``42``, ``["eu", 42]``) and an optional ``input`` (any JSON; tagged values are
    decoded)."""

    name: str = Field(..., min_length=1, max_length=MAX_NAME_CHARS, pattern=inputs.TEXT_PATTERN)
    key: Key
    input: Any = None


class CreateActorOut(Schema):
    actor_id: str
    name: str
    key: list[Any]
    created: bool


class ActorFilter(Schema):
    """``GET /actors`` query: type ``name``, workflow ``state`` (one of ``WorkflowState``), ``limit``
    (1..500) and ``offset`` (0..2**53-1; beyond the last actor the page is empty). An empty ``name=`` is no
    filter; ``state=`` is not a state (422)."""

    name: str | None = Field(None, max_length=MAX_NAME_CHARS, pattern=inputs.TEXT_PATTERN)
    state: WorkflowState | None = None
    limit: int = Field(50, ge=1, le=MAX_PAGE)
    offset: int = Field(0, ge=0, le=inputs.MAX_OFFSET)
    #: created strictly after / before these instants (ISO 8601 with an offset; DESIGN.md section 19)
    createdAfter: datetime | None = None  # noqa: N815 - the HTTP API's camelCase
    createdBefore: datetime | None = None  # noqa: N815
    updatedAfter: datetime | None = None  # noqa: N815
    updatedBefore: datetime | None = None  # noqa: N815
    #: a page's ``next_cursor``: the next page by keyset (no gap or duplicate while actors are created)
    cursor: str | None = Field(None, max_length=200)


class ActorSummary(Schema):
    actor_id: str
    name: str
    key: list[Any]
    workflow_state: str
    wake_at: datetime | None = None
    waiting_for: list[str] = []
    created_at: datetime | None = None
    updated_at: datetime | None = None
    #: the search attributes (``ctx.set_attributes``; DESIGN.md section 19)
    attributes: dict[str, Any] = {}


class ActorDetail(ActorSummary):
    """One actor with its state, input, output and error as plain JSON; ``types`` (present only when one
    of them holds a value JSON cannot) maps the JSON Pointer (from this object: ``/output/total``) of each
    such value to its type (``datetime``, ``decimal``, ``tuple``, ...; ``serde.PLAIN_FORMS`` says how each
    is shown). ``redacted`` names the fields withheld from a caller that may not inspect (``"input"``,
    ``"error.stack"``). ``parent_id``: the actor whose run created this one (null: created from outside a
    run); ``children``: the ids of the live actors its runs created, oldest first (DESIGN.md section 20);
    ``unavailable_shards``: the database aliases whose children could not be read (the shard is down:
    ``children`` misses theirs; empty when every shard answered, DESIGN.md section 21)."""

    state: Any = None
    input: Any = None
    output: Any = None
    error: Any = None
    types: dict[str, str] | None = None
    redacted: list[str] = []
    in_flight: bool = False
    lease_expires_at: datetime | None = None
    parent_id: str | None = None
    children: list[str] = []
    unavailable_shards: list[str] = []


class ActorPage(Schema):
    """A page of ``GET /actors``, newest first: ``count`` actors match; ``next_cursor`` (None on the last
    page) continues by keyset (pass it as ``cursor``)."""

    items: list[ActorSummary]
    count: int
    limit: int
    offset: int
    next_cursor: str | None = None


class BulkFilter(StrictSchema):
    """Which actors ``POST /actors/bulk/{action}`` acts on (DESIGN.md section 19); an empty filter is every
    actor."""

    name: str | None = Field(None, max_length=MAX_NAME_CHARS, pattern=inputs.TEXT_PATTERN)
    state: WorkflowState | None = None
    attributes: dict[str, str | int | float | bool | None] | None = None
    createdAfter: datetime | None = None  # noqa: N815
    createdBefore: datetime | None = None  # noqa: N815


class BulkIn(StrictSchema):
    """``POST /actors/bulk/{action}``: ``filter``, ``reason`` (kept in each actor's audit row), ``dryRun``."""

    filter: BulkFilter = BulkFilter()
    reason: str | None = Field(None, max_length=2000)
    dryRun: bool = False  # noqa: N815


class BulkOut(Schema):
    """What a bulk action did: ``matched`` actors, ``changed`` (would change, in a dry run), ``unchanged``
    (nothing to do, or refused: ``refused`` maps their ids to the reason), ``actor_ids`` changed."""

    matched: int
    changed: int
    unchanged: int
    actor_ids: list[str]
    refused: dict[str, str] = {}
    dry_run: bool = False


class ActionIn(StrictSchema):
    """``POST /actors/{id}/actions/{action}``: positional ``args`` (JSON values)."""

    args: list[Any] = []


class ActionOut(Schema):
    """The action's ``result`` as plain JSON, with ``types`` as in ``ActorDetail`` (``/result/...``)."""

    result: Any = None
    types: dict[str, str] | None = None


class SendIn(StrictSchema):
    """``POST /actors/{id}/queues/{queue}``: the message ``body`` (required; ``null`` is a body); with ``wait``
    (a JSON boolean) the call blocks until the workflow completes the message, the workflow ends, or
    ``timeout`` seconds (a JSON number 0..300, not a boolean; default ACTION_TIMEOUT) pass. ``dedupId`` (1..200
    characters): a second send with the same id to the actor stores nothing and answers as the first did
    (the same ``message_id``; DESIGN.md section 20)."""

    body: Any = Field(...)
    wait: StrictBool = False
    timeout: StrictFloat | None = Field(None, ge=0, le=MAX_SEND_TIMEOUT)
    dedupId: StrictStr | None = Field(None, min_length=1, max_length=200, pattern=inputs.TEXT_PATTERN)


class SendAccepted(Schema):
    message_id: str


class SendOut(Schema):
    """The answer of a waiting send: ``status`` ``completed`` (``response``: what the workflow passed to
    ``message.complete``, as plain JSON with ``types`` as in ``ActorDetail``) or ``timed_out`` with
    ``detail``, the same sentence as the Python client's ``SendResult.detail``: the timeout passed (the
    message not received yet, or received but not completed), the workflow ended without completing it, or
    the actor was destroyed."""

    status: Literal["completed", "timed_out"]
    response: Any = None
    types: dict[str, str] | None = None
    detail: str | None = None


class HistoryOut(Schema):
    history: dict[str, Any] | None
    workflowState: str
    isWorkflowEnabled: bool


#: longest ``reason`` of an operator action accepted over HTTP
MAX_REASON_CHARS = 2000


class ReplayIn(StrictSchema):
    """``entryId``: the step to replay from (an entry id of the history); omitted = replay everything.
    ``reason``: why, kept in the audit row (``GET .../inspector/audit``). ``dryRun``: true answers the
    plan (``ReplayPlanOut``) and changes nothing."""

    entryId: str | None = Field(None, pattern=inputs.TEXT_PATTERN)
    reason: str | None = Field(None, max_length=MAX_REASON_CHARS, pattern=inputs.TEXT_PATTERN)
    dryRun: StrictBool = False


class ReplayPlanOut(Schema):
    """What a replay would do (``repairs.ReplayPlan``): ``reset``/``deleted`` history entry ids, ``rerun``
    the steps that run again, in order (each with a new idempotency key)."""

    entryId: str | None
    reset: list[str]
    deleted: list[str]
    rerun: list[str]


class RecoverIn(StrictSchema):
    """``reason``: why, kept in the audit row (``GET .../inspector/audit``)."""

    reason: str | None = Field(None, max_length=MAX_REASON_CHARS, pattern=inputs.TEXT_PATTERN)


class CancelIn(StrictSchema):
    """``reason``: why, kept in the audit row (``GET .../inspector/audit``). ``children``: true also cancels
    every unfinished descendant (the actors its runs created, theirs...), each with its own audit row."""

    reason: str | None = Field(None, max_length=MAX_REASON_CHARS, pattern=inputs.TEXT_PATTERN)
    children: StrictBool = False


class CancelOut(Schema):
    """``changed``: True when the call cancelled the workflow, False when it had finished already (nothing
    was written); ``workflowState`` after it."""

    actorId: str
    changed: bool
    workflowState: str


class OperatorActionOut(Schema):
    """One operator action: ``action`` (replay, replay_all, recover, cancel, pause, resume, ``bulk_*``),
    ``who`` (a user name or ``"token"``), ``reason``, ``at``, and ``archived_entries``: the history entries
    it deleted or reset as they were (tagged JSON of the stored entry records)."""

    action: str
    who: str
    reason: str | None
    at: datetime
    archived_entries: list[Any]


class AuditOut(Schema):
    items: list[OperatorActionOut]


class PauseIn(StrictSchema):
    """``reason``: free text kept with the pause (at most 1000 characters); omitted or null = none."""

    reason: str | None = Field(None, max_length=1000, pattern=inputs.TEXT_PATTERN)


class RetryIn(StrictSchema):
    """``reason``: why, kept in the audit row ``retry`` (at most 2000 characters); omitted or null = none.
    Unknown fields are refused (422)."""

    reason: str | None = Field(None, max_length=MAX_REASON_CHARS, pattern=inputs.TEXT_PATTERN)


class RetryOut(Schema):
    """``changed``: True when the run was suspended and now goes on; ``workflowState`` after the call."""

    actorId: str
    changed: bool
    workflowState: str


class PauseOut(Schema):
    """``changed``: True when the call paused (resumed) the actor; ``workflowState`` after it."""

    actorId: str
    changed: bool
    workflowState: str
    pauseReason: str | None = None


class ForkIn(StrictSchema):
    """``POST .../inspector/workflow/fork`` (DESIGN.md section 19). ``entryId``: the step the fork starts at
    (the history before it is copied; omitted: all of it). ``input``/``state``: the new actor's (any JSON,
    tagged values decoded; omitted: the source's; ``null`` is a value). ``key``: the new actor's key (a
    string, an integer or a list of them; omitted: the source's key plus a ``fork-<hex>`` part).
    ``reason``: why, kept in both actors' audit rows."""

    entryId: str | None = Field(None, pattern=inputs.TEXT_PATTERN)
    input: Any = None
    state: Any = None
    key: Key | None = None
    reason: str | None = Field(None, max_length=MAX_REASON_CHARS, pattern=inputs.TEXT_PATTERN)


class ForkOut(Schema):
    """The new actor: ``actor_id`` and ``key``; the source's ``source_id``, the ``entry_id`` forked at, and
    ``copied``, the history entry ids the new actor starts with."""

    actor_id: str
    key: list[Any]
    source_id: str
    entry_id: str | None
    copied: list[str]


class RepairOut(Schema):
    actorId: str
    deleted: list[str]
    reset: list[str]
    workflowState: str


class StreamItemOut(Schema):
    """One item of a durable stream (DESIGN.md section 17): ``offset`` (dense from 0), ``value`` (plain
    JSON: ISO times, decimal strings), ``attempt`` (the step attempt that wrote it; null for a write of
    workflow code), ``discarded`` (its attempt did not complete) and ``at`` (when it was written)."""

    offset: int
    value: Any
    attempt: int | None
    discarded: bool
    at: datetime


class StreamPageOut(Schema):
    """A page of a stream (``Accept: application/json``): ``items`` in offset order, ``closed`` (the stream
    is closed and this page reaches its end), ``next_offset`` (the ``offset`` to ask for next)."""

    items: list[StreamItemOut]
    closed: bool
    next_offset: int


class StreamQuery(Schema):
    """``offset``: the first offset returned (default 0; a ``Last-Event-ID: N`` header wins: N + 1);
    ``limit``: the most items of a JSON page (1-500, default 100); ``include_discarded``: also the items of
    step attempts that did not complete (default false)."""

    offset: int = Field(0, ge=0, le=inputs.MAX_OFFSET)
    limit: int = Field(100, ge=1, le=MAX_PAGE)
    include_discarded: bool = False


# --- schedules (DESIGN.md section 20) -------------------------------------------------------------------

Name200 = Annotated[str, Field(min_length=1, max_length=MAX_NAME_CHARS, pattern=inputs.TEXT_PATTERN)]


class ScheduleIn(StrictSchema):
    """``POST /schedules``: the schedule ``scheduleId`` firing actor type ``actor`` at ``key`` (omitted or
    null: a new actor ``[scheduleId, tick ISO]`` per tick) on ``cron`` (5 fields, read in ``timezone``) or
    every ``every`` seconds (at least 1), with ``input`` (tagged values decoded); ``action``/``args``: an
    action run on the actor at each fire; ``catchup``: one | all | none; ``paused``: created paused."""

    scheduleId: Name200
    actor: Name200
    key: Key | None = None
    cron: str | None = Field(None, max_length=MAX_NAME_CHARS, pattern=inputs.TEXT_PATTERN)
    every: StrictFloat | Annotated[int, Field(strict=True)] | None = None
    timezone: str = Field("UTC", min_length=1, max_length=64, pattern=inputs.TEXT_PATTERN)
    input: Any = None
    action: str | None = Field(None, min_length=1, max_length=MAX_NAME_CHARS, pattern=inputs.TEXT_PATTERN)
    args: list[Any] = []
    catchup: Literal["one", "all", "none"] = "one"
    paused: StrictBool = False


class BackfillIn(StrictSchema):
    """``POST /schedules/{id}/backfill``: fire each tick in ``[start, end)`` (ISO 8601 with an offset) that
    was not fired yet, in order."""

    start: datetime
    end: datetime


class ScheduleOut(Schema):
    """A schedule (``ScheduleInfo``): ``input`` is ``null`` and listed in ``redacted`` for a caller that may
    not ``inspect``; ``types`` as in ``ActorDetail``."""

    scheduleId: str
    actor: str
    key: list[Any] | None
    cron: str | None
    every: float | None
    timezone: str
    paused: bool
    nextFireAt: datetime | None
    lastFiredAt: datetime | None
    action: str | None
    args: list[Any]
    input: Any = None
    catchup: str
    createdAt: datetime | None
    redacted: list[str] = []
    types: dict[str, str] | None = None


class SchedulePage(Schema):
    """``GET /schedules``: every schedule the caller may list, by id."""

    items: list[ScheduleOut]


class ScheduleFireOut(Schema):
    """One fire: the ``tick`` served, ``how`` (sweep | trigger | backfill), ``status`` (claimed | ok |
    error), the actor it started (``actorId``), the ``error`` (type and message) of a failed fire."""

    scheduleId: str
    tick: datetime
    firedAt: datetime
    how: str
    status: str
    actorId: str | None
    error: dict[str, Any] | None
    missed: int


class ScheduleFiresOut(Schema):
    """``items``: fires in tick order."""

    items: list[ScheduleFireOut]


class ScheduleDeletedOut(Schema):
    """``DELETE /schedules/{id}``: ``deleted`` is always true (an unknown id is a 404)."""

    scheduleId: str
    deleted: bool
