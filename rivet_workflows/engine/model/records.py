"""Port records kept apart from ``ports`` for size: an actor's flow controls, actors, history entries, queue
messages, schedule entries and their fires, operator audit rows (``ports`` re-exports each: use
``ports.Flow``, ``ports.ActorRecord``, ``ports.CronRecord``, ``ports.OperatorActionRecord``), and the
executor's write unit ``Commit`` with its ``CommitResult`` (the commit rule itself is each store's)."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any, ClassVar, NamedTuple

from .errors import InvalidFilterError


@dataclass(frozen=True)
class Flow:
    """The flow controls of one actor, recorded on its row at creation (DESIGN.md section 12).

    ``concurrency_key``: the group whose members share the limits (the text of ``Concurrency.key(c)``, or
    ``""`` for the whole type); None = the actor has no concurrency or rate limit. ``concurrency_limit``:
    at most this many actors of ``(name, concurrency_key)`` hold a lease at once (None: no limit).
    ``rate_count``/``rate_per``: at most ``rate_count`` claims (run starts) of the group in any window of
    ``rate_per`` seconds (None: no rate limit). ``priority``: among due actors, higher is claimed first.
    ``timeout``: seconds from creation to the workflow's deadline (``ActorRecord.deadline_at``).
    """

    concurrency_key: str | None = None
    concurrency_limit: int | None = None
    rate_count: int | None = None
    rate_per: float | None = None
    priority: int = 0
    timeout: float | None = None


@dataclass
class ActorRecord:
    """One actor row: identity, state, workflow status, the last commit's and the awaited code version."""

    actor_id: str
    name: str
    key: list
    state: Any = None
    input: Any = None
    output: Any = None
    error: dict | None = None
    workflow_state: str = "pending"  # ports.PENDING
    wake_at: datetime | None = None
    waiting_for: list[str] = field(default_factory=list)
    created_at: datetime | None = None
    updated_at: datetime | None = None
    destroyed: bool = False
    lease_owner: str | None = None
    lease_expires_at: datetime | None = None
    lease_token: int = 0
    code_version: str | None = None
    awaiting_code_version: str | None = None
    trace_context: dict | None = None  # W3C trace context of the creation: its runs join that trace
    replay_generation: int = 0  # bumped by each replay: steps recorded after it get new idempotency keys
    #: flow controls recorded at creation (``Flow``): the concurrency group (None: no limit), priority
    concurrency_key: str | None = None
    priority: int = 0
    #: the workflow's deadline (creation + ``timeout``), store clock; None: no timeout
    deadline_at: datetime | None = None
    #: paused by an operator (``workflow_state`` then reads ``"paused"``) and why
    paused: bool = False
    pause_reason: str | None = None
    #: the actor whose run created this one (``step.client()``, ``ctx.spawn``); None: created from outside
    parent_id: str | None = None

    #: the search attributes (``ctx.set_attributes``): a dict of JSON scalars (DESIGN.md section 19)
    attributes: dict = field(default_factory=dict)


@dataclass(frozen=True)
class ActorFilter:
    """Which actors a search or a bulk action selects (DESIGN.md section 19); every field set must match.

    ``name``: the actor type; ``state``: the workflow state an ``ActorRecord`` shows (``paused`` for a paused,
    unfinished workflow); ``attributes``: every key equal to its value (JSON scalars; ``1`` and ``true``
    differ); ``created_*``/``updated_*``: aware datetimes, ``after`` exclusive, ``before`` exclusive.
    Destroyed actors never match."""

    name: str | None = None
    state: str | None = None
    attributes: dict | None = None
    created_after: datetime | None = None
    created_before: datetime | None = None
    updated_after: datetime | None = None
    updated_before: datetime | None = None
    #: only actors of these types (None: any), and none of ``exclude_names`` (the HTTP listing's
    #: authorization hook and its ``no_workflow`` state narrow a listing so)
    names: tuple[str, ...] | None = None
    exclude_names: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        for label in ("created_after", "created_before", "updated_after", "updated_before"):
            when = getattr(self, label)
            if when is None:
                continue
            try:  # a time at the edge of datetime's range cannot be compared in UTC by a database
                utc = when.astimezone(UTC)
                utc + timedelta(microseconds=1) - timedelta(microseconds=2)
            except (OverflowError, TypeError, ValueError, AttributeError):
                raise InvalidFilterError(f"{label} is not a usable time: {when!r}", field=label) from None
            # kept in UTC: a database may refuse an offset Python allows (PostgreSQL: beyond +-15:59)
            object.__setattr__(self, label, utc)

    def matches(self, record: ActorRecord) -> bool:
        """True when ``record`` is selected (the rule each store's query implements)."""
        if record.destroyed or (self.name is not None and record.name != self.name):
            return False
        if (self.names is not None and record.name not in self.names) or record.name in self.exclude_names:
            return False
        if self.state is not None and record.workflow_state != self.state:
            return False
        for key, value in (self.attributes or {}).items():
            if key not in record.attributes or not same_scalar(record.attributes[key], value):
                return False
        return _within(record.created_at, self.created_after, self.created_before) and _within(
            record.updated_at, self.updated_after, self.updated_before
        )


def _within(when: datetime | None, after: datetime | None, before: datetime | None) -> bool:
    if after is not None and (when is None or when <= after):
        return False
    return before is None or (when is not None and when < before)


def same_scalar(a: Any, b: Any) -> bool:
    """JSON equality of two scalars: ``1 == 1.0``, but ``true`` is not ``1`` and ``"1"`` is not ``1``."""
    if isinstance(a, (bool, str)) or isinstance(b, (bool, str)) or a is None or b is None:
        return type(a) is type(b) and a == b
    return a == b


@dataclass
class EntryRecord:
    """One history entry with its metadata (ENGINE-SEMANTICS.md section 1).

    ``key`` is the location string (``outer/~3/inner``, ``wait:count``); ``location`` the same path as a
    list of names and iteration ints. ``seq`` orders entries by creation (replay-from-step uses it);
    ``code_version``: the code version of the process that last wrote it (None: unversioned).
    """

    key: str
    location: list
    kind: str
    data: dict = field(default_factory=dict)
    status: str = "pending"  # ports.ENTRY_PENDING
    attempts: int = 0
    error: dict | None = None
    seq: int = 0
    last_attempt_at: datetime | None = None
    created_at: datetime | None = None
    completed_at: datetime | None = None
    rollback_completed_at: datetime | None = None
    rollback_error: dict | None = None
    code_version: str | None = None
    #: per instance, values of ``data`` encoded already: ``{key: serde.Encoded}`` whose ``value`` is
    #: ``data[key]`` (a step's output, a received message's body); a store writes their ``json`` instead
    #: of encoding them again (``serde.entry_data``). Not a field: never stored or compared; ``copy`` keeps it
    reused: ClassVar[dict[str, Any] | None] = None

    def copy(self) -> EntryRecord:
        """A copy with its own ``location`` list and ``data`` dict (the values inside are shared) and the
        same ``reused``; what ``dataclasses.replace`` made, without its per-call field introspection (a
        step commit copies its entries)."""
        clone = object.__new__(type(self))
        clone.__dict__.update(self.__dict__)
        clone.location = list(self.location)
        clone.data = dict(self.data)
        return clone


@dataclass
class MessageRecord:
    """One queue message."""

    id: str
    actor_id: str
    name: str
    body: Any
    created_at: datetime
    completable: bool = False
    status: str = "pending"  # ports.MESSAGE_PENDING
    response: Any = None
    completed_at: datetime | None = None
    trace_context: dict | None = None  # W3C trace context of the send: the receiving run links to it
    #: the sender's deduplication id: unique per actor among its kept messages (DESIGN.md section 20)
    dedup_id: str | None = None
    #: per instance, set by a store that decoded ``body`` from its stored JSON: ``serde.Encoded`` of it,
    #: so a queue wait's history entry writes that JSON instead of encoding ``body`` again (not a field)
    encoded_body: ClassVar[Any] = None


# --- cron and one-off schedules (DESIGN.md section 4) ------------------------------------------

#: kinds of a schedule entry
CRON_INTERVAL = "interval"  # every interval_seconds
CRON_EXPRESSION = "cron"  # a cron expression in a timezone
CRON_ONCE = "once"  # a one-off scheduled action (c.schedule.after/at); next_fire_at None once fired


@dataclass
class CronRecord:
    """One schedule entry of an actor: fire ``action(c, ScheduledFireInfo, *args)`` at ``next_fire_at``.

    ``kind`` is derived: ``interval_seconds`` set -> interval, ``expression`` set -> cron, neither -> once.
    ``id`` is the store's id (a str); ``next_fire_at`` and ``last_fired_at`` are store-clock instants.
    """

    actor_id: str
    name: str
    action: str
    args: list = field(default_factory=list)
    interval_seconds: float | None = None
    expression: str | None = None
    timezone: str = "UTC"
    next_fire_at: datetime | None = None
    last_fired_at: datetime | None = None
    max_history: int = 100
    created_at: datetime | None = None
    id: str = ""

    @property
    def kind(self) -> str:
        if self.interval_seconds is not None:
            return CRON_INTERVAL
        if self.expression:
            return CRON_EXPRESSION
        return CRON_ONCE

    def same_schedule(self, other: CronRecord) -> bool:
        """True when ``other`` fires on the same schedule (interval, expression and timezone)."""
        return (self.interval_seconds, self.expression, self.timezone) == (
            other.interval_seconds,
            other.expression,
            other.timezone,
        )


@dataclass
class CronFireRecord:
    """One firing of a schedule entry: the slot it served, when it ran, ``status`` ok|error, result/error."""

    scheduled_at: datetime
    fired_at: datetime
    status: str = "ok"
    result: Any = None
    error: dict | None = None


#: catch-up policies of a schedule (DESIGN.md section 20): after downtime fire the latest missed tick once,
#: every missed tick in order, or none of them
CATCHUP_ONE = "one"
CATCHUP_ALL = "all"
CATCHUP_NONE = "none"
CATCHUP_POLICIES = (CATCHUP_ONE, CATCHUP_ALL, CATCHUP_NONE)

#: how a schedule tick was fired, and the states of its fire log row
FIRE_SWEEP, FIRE_TRIGGER, FIRE_BACKFILL = "sweep", "trigger", "backfill"
FIRE_CLAIMED, FIRE_OK, FIRE_ERROR = "claimed", "ok", "error"


@dataclass
class ScheduleRecord:
    """A schedule managed as data (``client().schedules``, DESIGN.md section 20).

    Fires on ``cron`` (5-field expression, wall clock in ``timezone``) or ``every`` seconds (ticks aligned to
    multiples of ``every`` since the Unix epoch); each fire get_or_creates the actor ``actor``/``key``
    (``key`` None: ``[schedule_id, tick ISO]``) with ``input`` and, with ``action``, runs
    ``action(c, fire, *args)`` on it. ``next_fire_at`` is the next tick the sweep fires (None while paused).
    """

    schedule_id: str
    actor: str
    key: list | None = None
    cron: str | None = None
    every: float | None = None
    timezone: str = "UTC"
    input: Any = None
    action: str | None = None
    args: list = field(default_factory=list)
    catchup: str = CATCHUP_ONE
    paused: bool = False
    next_fire_at: datetime | None = None
    last_fired_at: datetime | None = None
    created_at: datetime | None = None


@dataclass
class ScheduleFireRecord:
    """One row of a schedule's fire log: the ``tick`` served (unique per schedule), ``how`` it was fired
    (sweep | trigger | backfill), ``status`` (claimed -> ok | error), the ``actor_id`` it started or ran the
    action on, ``error`` (``serde.error_to_dict``) and ``missed`` (ticks skipped by the catch-up policy)."""

    schedule_id: str
    tick: datetime
    fired_at: datetime
    how: str = FIRE_SWEEP
    status: str = FIRE_CLAIMED
    actor_id: str | None = None
    error: dict | None = None
    missed: int = 0


@dataclass
class OperatorActionRecord:
    """One audit row: an operator action on an actor (DESIGN.md section 12).

    ``action``: ``replay``, ``replay_all``, ``recover``, ``cancel``, ``pause``, ``resume`` (``bulk_*`` when
    it was one of a bulk action); ``who``: the user name, ``"token"`` (the inspector token), ``"python"``
    (the Python API) or ``"command"`` (``manage.py rivet``); ``reason``: what the operator said, or None;
    ``archived_entries``: the history entries the action deleted or reset, as they were, each the tagged
    JSON (``serde.to_json``) of its ``EntryRecord`` fields (``engine.audit.archived_records`` decodes them);
    ``at``: the store-clock instant it was written (the store sets it); ``id``: the store's id (a str).
    """

    actor_id: str
    action: str
    who: str
    reason: str | None = None
    archived_entries: list = field(default_factory=list)
    at: datetime | None = None
    id: str = ""


@dataclass(frozen=True)
class StreamItem:
    """One item of a durable stream (DESIGN.md section 17): ``offset`` (int, dense from 0 per actor and
    stream name), ``value`` (the decoded value), ``attempt`` (the 1-based step attempt that wrote it; None
    for a write of workflow code), ``discarded`` (True when that attempt did not complete) and ``at`` (aware
    UTC datetime, the store's clock when it was written)."""

    offset: int
    value: Any
    attempt: int | None
    discarded: bool
    at: datetime


@dataclass(frozen=True)
class StreamPage:
    """What one read of a stream returns (``Store.stream_read``): ``items`` in offset order, ``closed``
    (the stream is closed and this page reaches its end: nothing follows these items)
    and ``next_offset`` (the offset to read from next: past every row the read looked at, discarded ones
    included)."""

    items: list[StreamItem]
    closed: bool
    next_offset: int


class _Unset:
    __slots__ = ()

    def __repr__(self) -> str:
        return "UNSET"

    def __bool__(self) -> bool:
        return False


#: Marker for "leave this column as it is" in a Commit.
UNSET: Any = _Unset()


@dataclass
class Commit:
    """One atomic, lease-fenced write of an executor. Fields left UNSET are not touched.

    ``relay``: messages to actors on another shard, shaped like ``outbox`` entries, and creates of actors
    there (``RelayCreate``, also carried by ``outbox`` until a sharded store moves them); the store writes
    each as a relay row (``RelayRecord``) in the commit's transaction, and the relay delivers it to the
    target's shard later (``engine.runtime.relay``; DESIGN.md section 21)."""

    state: Any = UNSET
    workflow_state: Any = UNSET
    input: Any = UNSET
    output: Any = UNSET
    error: Any = UNSET  # dict or None
    wake_at: Any = UNSET  # datetime or None
    waiting_for: Any = UNSET  # list[str]
    upserts: list[EntryRecord] = field(default_factory=list)
    deletes: list[str] = field(default_factory=list)  # entry keys
    receive_messages: list[str] = field(default_factory=list)  # message ids -> MESSAGE_RECEIVED
    complete_messages: list[tuple[str, Any]] = field(default_factory=list)  # (id, response)
    #: messages sent by step bodies, delivered in this same transaction (exactly once with the step):
    #: (target actor_id, queue name, body, completable). The store wakes each target like ``send``.
    outbox: list[tuple[str, str, Any, bool]] = field(default_factory=list)
    relay: list[Any] = field(default_factory=list)  # outbox entries and ``RelayCreate``s
    #: set the step lock until this instant (None clears it); UNSET leaves it
    step_lock_until: Any = UNSET
    #: give up the lease (end of a run); the store then re-checks pending messages vs waiting_for
    release: bool = False
    #: an operator action (a repair, a cancel) written in the same transaction, ``at`` set by the store
    audit: OperatorActionRecord | None = None
    code_version: Any = UNSET
    awaiting_code_version: Any = UNSET
    defer_until: Any = UNSET
    replay_generation: Any = UNSET  # the actor's new ``replay_generation`` (an int, set by a replay)
    #: search attributes merged into the actor's (a dict of JSON scalars; DESIGN.md section 19)
    attributes: Any = UNSET

    @property
    def lease_only(self) -> bool:
        """True when only lease bookkeeping (release, step lock, deferral) is set: it leaves ``updated_at``."""
        columns = (
            self.state,
            self.workflow_state,
            self.input,
            self.output,
            self.error,
            self.wake_at,
            self.attributes,
        )
        lists = (
            self.upserts,
            self.deletes,
            self.receive_messages,
            self.complete_messages,
            self.outbox,
            self.relay,
        )
        return (
            all(v is UNSET for v in (*columns, self.waiting_for, self.replay_generation))
            and not any(lists)
            and self.audit is None
        )


@dataclass
class CommitResult:
    """What a commit reports back: whether the fence held and, after a release, the actor's wake_at."""

    ok: bool
    wake_at: datetime | None = None
    #: actor ids (outbox targets, and this actor after a release that found a due wake-up) to hand to
    #: Dispatcher.wake once the transaction has committed
    woken: list[str] = field(default_factory=list)
    state: Any = UNSET  # fresh state when the commit took the step lock
    #: the actor is paused (an operator paused it, maybe during this run): the run starts no new step
    paused: bool = False
    #: the commit wrote relay rows (``Commit.relay``): the caller has the relay run soon
    #: (``Runtime.relay_soon``; DESIGN.md section 21)
    relayed: bool = False


class RelayCreate(NamedTuple):
    """A step body's ``get_or_create`` of an actor on another shard, committed with the step as a relay row
    of kind ``"create"`` (DESIGN.md section 21): ``target_actor_id`` (the id computed from (type, key),
    ``shards.actor_id_for_key``), ``name`` (the actor type), ``key`` (normalized), ``input`` (round-tripped)
    and ``parent_id`` (the step's actor: recorded as the new actor's parent). The first item is the target
    id, as in an outbox entry, so the order per target holds among sends and creates."""

    target_actor_id: str
    name: str
    key: list
    input: Any = None
    parent_id: str | None = None


#: the kinds of relay rows: a message to a queue, or a create of an actor (``RelayCreate``)
RELAY_SEND = "send"
RELAY_CREATE = "create"


def relay_row_values(entry: Any) -> tuple[str, str, str, Any, bool]:
    """``(kind, target id, name, body, completable)`` of a ``Commit.relay`` entry as a relay row stores it:
    a send keeps its queue name and body; a ``RelayCreate`` stores the type name and ``{"key", "input"}``
    as its body (the parent is the row's source actor)."""
    if isinstance(entry, RelayCreate):
        return (
            RELAY_CREATE,
            entry.target_actor_id,
            entry.name,
            {"key": entry.key, "input": entry.input},
            False,
        )
    target, name, body, completable = entry
    return RELAY_SEND, target, name, body, completable


@dataclass
class RelayRecord:
    """One row of a shard's relay outbox (DESIGN.md section 21): a message a step of ``source_actor_id``
    sent to ``target_actor_id`` on another shard, committed with that step on the sender's shard.

    ``id``: the row id, increasing in commit order on its shard (the relay delivers in id order and sends
    with ``dedup_id=f"relay:{source_alias}:{id}"``); ``name``: the target's queue; ``body``: the decoded
    value; ``completable``: as ``Store.send``; ``attempts``: failed delivery attempts so far;
    ``last_error``: the last failure's text (None: none). Pending rows only are read by the relay.
    ``kind``: ``"send"``, or ``"create"`` (``RelayCreate``: ``name`` is the actor type, ``body``
    ``{"key": [...], "input": ...}``, the parent the source actor)."""

    id: int
    source_actor_id: str
    target_actor_id: str
    name: str
    body: Any = None
    completable: bool = False
    created_at: datetime | None = None
    attempts: int = 0
    last_error: str | None = None
    kind: str = RELAY_SEND
