"""The storage and dispatch ports the engine talks to (implemented by testing.MemoryStore and storage.DjangoStore).

Invariants every implementation keeps (DESIGN.md sections 4-5, ENGINE-SEMANTICS.md section 1):

* Values crossing the port are already-decoded Python values; a store encodes them with
  ``engine.serde`` (the one serializer) when it writes and decodes them when it reads.
* ``commit`` is atomic: actor state, workflow status, history upserts/deletes, received and
  completed messages, and the new wake-up all commit together or not at all.
* Every executor write is fenced by the lease token returned by ``claim``: if the actor's current
  token differs, the write affects nothing and returns False (the executor must stop).
* Deadlines are compared with the store's clock (``now``); for the Django store that is the
  database clock.
* An actor is *due* when ``wake_at <= now`` and its lease is free or expired. ``claim`` keeps
  ``wake_at`` as it is while the executor runs, so an executor that dies leaves the actor due
  once its lease expires: no separate reaper is needed.
* ``send`` never loses a wake-up: it locks the actor row, stores the message and, unless the
  workflow is finished, sets ``wake_at = now`` when the workflow waits on that queue name or is
  currently leased. ``commit(..., release=True)`` re-checks, inside its own transaction, whether a
  pending message already matches the new ``waiting_for`` and if so sets ``wake_at = now``.
* ``updated_at`` moves on changes only: leases (``Commit.lease_only``), reads and no-op actions leave it.
* Actions and step bodies are serialised on one actor: the commit that records a step attempt
  (status running, attempts + 1) also sets ``step_lock_until`` and returns the actor's fresh state
  (``CommitResult.state``), which the step body then mutates; the commit that records the step's
  outcome writes the state and clears the lock. ``run_action`` waits while a live step lock is held
  (lock not expired and lease not expired), so no update is lost either way.
"""

from __future__ import annotations

import dataclasses
from abc import abstractmethod
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Protocol, runtime_checkable

from .errors import ActorNotFoundError
from .records import CRON_EXPRESSION as CRON_EXPRESSION
from .records import CRON_INTERVAL as CRON_INTERVAL
from .records import CRON_ONCE as CRON_ONCE
from .records import CronFireRecord as CronFireRecord
from .records import CronRecord as CronRecord
from .records import Flow as Flow

# Workflow states (ENGINE-SEMANTICS.md section 1).
PENDING = "pending"
RUNNING = "running"
SLEEPING = "sleeping"
COMPLETED = "completed"
ROLLING_BACK = "rolling_back"
FAILED = "failed"
CANCELLED = "cancelled"
FINISHED_STATES = frozenset({COMPLETED, FAILED, CANCELLED})
#: how an unfinished actor that an operator paused reads (``ActorRecord.workflow_state``); the stored
#: workflow state stays as the run left it and is back on resume (DESIGN.md section 12)
PAUSED = "paused"

# Entry metadata status.
ENTRY_PENDING = "pending"
ENTRY_RUNNING = "running"
ENTRY_COMPLETED = "completed"
ENTRY_FAILED = "failed"
ENTRY_EXHAUSTED = "exhausted"

# Queue message status.
MESSAGE_PENDING = "pending"  # not yet received by the workflow
MESSAGE_RECEIVED = "received"  # recorded in history by a queue wait
MESSAGE_COMPLETED = "completed"  # completable message answered with a response


class _Unset:
    __slots__ = ()

    def __repr__(self) -> str:
        return "UNSET"

    def __bool__(self) -> bool:
        return False


#: Marker for "leave this column as it is" in a Commit.
UNSET: Any = _Unset()


@dataclass
class ActorRecord:
    """One actor row: identity, state and workflow status."""

    actor_id: str
    name: str
    key: list
    state: Any = None
    input: Any = None
    output: Any = None
    error: dict | None = None
    workflow_state: str = PENDING
    wake_at: datetime | None = None
    waiting_for: list[str] = field(default_factory=list)
    created_at: datetime | None = None
    updated_at: datetime | None = None
    destroyed: bool = False
    lease_owner: str | None = None
    lease_expires_at: datetime | None = None
    lease_token: int = 0
    #: flow controls recorded at creation (``Flow``): the concurrency group (None: no limit), priority
    concurrency_key: str | None = None
    priority: int = 0
    #: the workflow's deadline (creation + ``timeout``), store clock; None: no timeout
    deadline_at: datetime | None = None
    #: paused by an operator (``workflow_state`` then reads ``"paused"``) and why
    paused: bool = False
    pause_reason: str | None = None


@dataclass
class EntryRecord:
    """One history entry with its metadata (ENGINE-SEMANTICS.md section 1).

    ``key`` is the location string (``outer/~3/inner``, ``wait:count``); ``location`` the same path as a
    list of names and iteration ints. ``seq`` orders entries by creation (replay-from-step uses it).
    """

    key: str
    location: list
    kind: str
    data: dict = field(default_factory=dict)
    status: str = ENTRY_PENDING
    attempts: int = 0
    error: dict | None = None
    seq: int = 0
    last_attempt_at: datetime | None = None
    created_at: datetime | None = None
    completed_at: datetime | None = None
    rollback_completed_at: datetime | None = None
    rollback_error: dict | None = None

    def copy(self) -> EntryRecord:
        return dataclasses.replace(self, location=list(self.location), data=dict(self.data))


@dataclass
class MessageRecord:
    """One queue message."""

    id: str
    actor_id: str
    name: str
    body: Any
    created_at: datetime
    completable: bool = False
    status: str = MESSAGE_PENDING
    response: Any = None
    completed_at: datetime | None = None


@dataclass
class Commit:
    """One atomic, lease-fenced write of an executor. Fields left UNSET are not touched."""

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
    #: set the step lock until this instant (None clears it); UNSET leaves it
    step_lock_until: Any = UNSET
    #: give up the lease (end of a run); the store then re-checks pending messages vs waiting_for
    release: bool = False

    @property
    def lease_only(self) -> bool:
        """True when only ``release``/``step_lock_until`` are set (it leaves ``updated_at``)."""
        columns = (self.state, self.workflow_state, self.input, self.output, self.error, self.wake_at)
        lists = (self.upserts, self.deletes, self.receive_messages, self.complete_messages, self.outbox)
        return all(v is UNSET for v in (*columns, self.waiting_for)) and not any(lists)


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


@runtime_checkable
class Store(Protocol):
    """The storage port: every capability the engine, the client and the adapters use of a store.

    Synchronous; the engine calls it through ``Runtime.call`` (a thread hop for a database store) unless
    ``inline_calls`` is True. Implementations subclass ``BaseStore`` (which gives the portable defaults
    marked below) and implement the abstract members; nobody probes a store for a capability. The
    invariants of the module docstring hold for every member. Implemented by ``testing.MemoryStore``,
    ``storage.DjangoStore`` and its PostgreSQL subclass; one conformance suite checks all three.
    """

    #: True when every member is quick and safe from any thread: the engine calls it without a thread hop
    inline_calls: bool

    # --- clock -------------------------------------------------------------------------------------

    @abstractmethod
    def now(self) -> datetime:
        """The store's clock as an aware UTC datetime (the database clock for a database store)."""

    # --- actors ------------------------------------------------------------------------------------

    def get_or_create_actor(
        self,
        name: str,
        key: list,
        input: Any,
        create_state: Callable[[], Any],
        *,
        due: bool = False,
        flow: Callable[[Any], Flow | None] | None = None,
    ) -> tuple[ActorRecord, bool]:
        """``(record, created)`` for the actor ``(name, key)``, creating it (pending) if there is none.

        ``create_state()`` is called only when creating; so is ``flow(state)``, whose ``Flow`` is recorded
        on the new row (as ``create_actor``'s ``flow``). ``due=True`` creates it due (``wake_at`` = the
        store's now), else with ``wake_at`` None. A creator losing a concurrent race gets the winner's
        actor (``created`` False); there is never a duplicate. ``SerializationError`` for an
        unserializable input or state (nothing written). Default: ``find_actor``, then ``create_actor``.
        """
        ...

    @abstractmethod
    def create_actor(
        self, name: str, key: list, input: Any, state: Any, *, due: bool = False, flow: Flow | None = None
    ) -> tuple[ActorRecord, bool]:
        """Insert the actor ``(name, key)`` with ``state`` (already built), pending, in one atomic write.

        ``flow`` (a ``Flow``) is recorded on the row in the same write: its concurrency group and limits,
        rate limit and priority, and ``deadline_at`` = the store's now + ``flow.timeout``.

        ``due=True``: ``wake_at`` is the store's now in the same write, so the actor is due as soon as it
        exists; else ``wake_at`` None. If the actor exists already (or a concurrent creator wins), nothing
        is written and ``(existing record, False)`` is returned; else ``(new record, True)``.
        ``SerializationError`` for an unserializable input or state.
        """

    @abstractmethod
    def get_actor(self, actor_id: str) -> ActorRecord:
        """The actor's record; ``ActorNotFoundError`` if unknown or destroyed."""

    @abstractmethod
    def find_actor(self, name: str, key: list) -> ActorRecord | None:
        """The live actor ``(name, key)``, or None."""

    @abstractmethod
    def list_actors(self, name: str | None = None, *, limit: int | None = None) -> list[ActorRecord]:
        """Live actors (of type ``name``, or all), oldest first, at most ``limit`` (None: all)."""

    @abstractmethod
    def destroy_actor(self, actor_id: str) -> None:
        """Delete the actor with its history, messages and schedules; its key is free again and a running
        executor's next write is fenced off. ``ActorNotFoundError`` if there is no such actor."""

    # --- leases ------------------------------------------------------------------------------------

    @abstractmethod
    def claim(self, actor_id: str, owner: str, lease_seconds: float) -> int | None:
        """Take the lease if it is free or expired: bump and return the fencing token (None if held, or
        the actor is gone). Keeps ``wake_at``; clears a dead step lock.

        The flow rules of every claim (``claim``, ``claim_and_load``, ``claim_due``; DESIGN.md 12): a
        paused actor is never claimed; an actor with a concurrency group is claimed only while fewer than
        ``concurrency_limit`` actors of its ``(name, concurrency_key)`` hold a live lease, and only while
        fewer than ``rate_count`` claims of the group happened in the last ``rate_per`` seconds (a claim
        is recorded as a run start). The database decides, atomically with the claim: concurrent claims
        never exceed a limit."""

    def claim_and_load(
        self, actor_id: str, owner: str, lease_seconds: float
    ) -> tuple[int, ActorRecord, list[EntryRecord], datetime] | None:
        """``claim`` plus a run's initial reads: ``(token, actor, history, now)`` (store clock), or None when
        the lease is held elsewhere or the actor is gone. Default: ``claim`` then ``load_for_run``."""
        ...

    def load_for_run(self, actor_id: str) -> tuple[ActorRecord, list[EntryRecord], datetime]:
        """``(actor, history, now)`` for a run that holds the lease already; ``ActorNotFoundError``.
        Default: ``get_actor``, ``load_history`` and ``now``."""
        ...

    @abstractmethod
    def claim_due(self, owner: str, limit: int, lease_seconds: float) -> list[tuple[str, int]]:
        """Claim up to ``limit`` due actors (``wake_at <= now``, lease free or expired, not paused, within
        their flow limits: see ``claim``), highest ``priority`` first, then earliest ``wake_at``:
        ``[(actor_id, token), ...]``. Concurrent callers never claim the same actor."""

    @abstractmethod
    def flow_retry_at(self, actor_id: str) -> datetime | None:
        """When the due actor ``actor_id``, held back by its rate limit, may be claimed (the oldest start in
        its window + ``rate_per``); None when no rate limit holds it back."""

    @abstractmethod
    def set_paused(self, actor_id: str, paused: bool, reason: str | None = None) -> bool:
        """Pause (recording ``reason``) or resume the actor; True when that changed it (a finished workflow is
        not paused). Never claimed while paused; a run holding the lease finds ``CommitResult.paused`` on
        its next commit. Resuming keeps ``wake_at`` (a deadline passed meanwhile is due). ActorNotFoundError."""

    @abstractmethod
    def renew(self, actor_id: str, token: int, lease_seconds: float) -> bool:
        """Extend the lease held with ``token`` to ``lease_seconds`` from now; False = the lease is lost."""

    @abstractmethod
    def handoff(self, actor_id: str, token: int, owner: str, lease_seconds: float) -> int | None:
        """Take over a lease claimed with ``token`` by someone else (the sweep hands its claims to run tasks):
        atomically, if the token still holds it, bump the token, set owner and expiry; return the new token.
        A duplicate delivery of the same hand-over (e.g. a broker redelivery) then gets None."""

    def release(self, actor_id: str, token: int) -> CommitResult:
        """Give the lease back without changing the workflow (``commit(Commit(release=True))``)."""
        ...

    @abstractmethod
    def next_deadline(self) -> datetime | None:
        """The earliest ``wake_at`` of any live, unfinished, unpaused actor (None if nothing is scheduled)."""

    # --- history and the run's writes ---------------------------------------------------------------

    @abstractmethod
    def load_history(self, actor_id: str) -> list[EntryRecord]:
        """Every history entry of the actor in creation order (``seq``); ``ActorNotFoundError``."""

    @abstractmethod
    def commit(self, actor_id: str, token: int, commit: Commit) -> CommitResult:
        """Apply ``commit`` atomically if ``token`` still holds the lease; ``ok=False`` and nothing written
        if not. The wake rule of the module docstring applies to the outbox and to ``release``."""

    # --- queues ------------------------------------------------------------------------------------

    @abstractmethod
    def send(self, actor_id: str, name: str, body: Any, completable: bool = False) -> MessageRecord:
        """Store a message and make the actor due if it waits on ``name`` (or ``"*"``) or is leased, unless
        its workflow is finished. ``ActorNotFoundError``, ``SerializationError``."""

    def send_and_check(
        self, actor_id: str, name: str, body: Any, completable: bool = False
    ) -> tuple[MessageRecord, bool | None]:
        """``send``, plus whether the sender should hand the actor to the dispatcher (it is due now and no
        live lease is held), when the store learns that in the same write; None = ask (``get_actor``).
        Default: ``(send(...), None)``."""
        ...

    @abstractmethod
    def pending_messages(self, actor_id: str, names: list[str] | None, limit: int) -> list[MessageRecord]:
        """Up to ``limit`` not yet received messages, oldest first; ``names`` None or with ``"*"`` = any."""

    @abstractmethod
    def get_message(self, message_id: str) -> MessageRecord:
        """One message by id; ``LookupError`` if there is none."""

    @abstractmethod
    def complete_message(self, message_id: str, response: Any) -> None:
        """Answer a completable message; ``MessageAlreadyCompletedError`` the second time, ``LookupError``."""

    def wait_for_messages(self, actor_id: str, names: list[str], timeout: float) -> bool:
        """Block up to ``timeout`` seconds until a pending message on ``names`` (``"*"``: any) exists for
        ``actor_id``, whose lease the caller holds (a warm queue wait); True then (the caller looks at its
        messages: it may be on another queue), False when the window passed. Default: False at once (a
        store without notifications: the run releases the actor as usual)."""
        ...

    # --- actions -----------------------------------------------------------------------------------

    @abstractmethod
    def run_action(
        self, actor_id: str, fn: Callable[[Any], Any], timeout: float, *, make_due: bool = False
    ) -> tuple[Any, Any]:
        """Run ``fn(state)`` (which may mutate ``state``) while no live step lock is held, serialised with
        commits on the actor, save the state and return ``(result, state)``.

        ``make_due=True`` also sets ``wake_at`` to the store's now (unless it is earlier already, the
        workflow is finished or ``fn`` destroyed the actor) in the same write: the client creates an
        actor with ``on_create`` not due and makes it due with the hook's state. Nothing is saved when
        ``fn`` raises. ``WorkflowInFlightError`` after ``timeout`` seconds, ``ActorNotFoundError``.
        """

    # --- schedules (cron and one-off actions) -------------------------------------------------------
    # Firing is claimed by ``cron_advance``, a compare-and-set on ``next_fire_at``: of several sweeps that
    # saw the same due entry exactly one advances it, and only that one runs the action (at most one fire
    # per slot; a crash between the advance and the action loses that one fire).

    @abstractmethod
    def cron_upsert(self, record: CronRecord) -> CronRecord:
        """Create or replace the entry ``(record.actor_id, record.name)``. A replacement on the same schedule
        keeps the stored ``next_fire_at`` (registering again in ``on_create``/``on_wake`` never delays or
        doubles a fire); another schedule takes ``record.next_fire_at``. ``ActorNotFoundError``."""

    @abstractmethod
    def cron_list(self, actor_id: str | None = None) -> list[CronRecord]:
        """Entries (of ``actor_id``, or all) in creation order."""

    @abstractmethod
    def cron_delete(self, actor_id: str, name: str) -> bool:
        """Delete the entry ``name`` of ``actor_id`` and its fire log; True if it existed."""

    @abstractmethod
    def cron_due(self, limit: int) -> list[CronRecord]:
        """Entries with ``next_fire_at <= now`` (store clock) of live actors, earliest first."""

    @abstractmethod
    def cron_advance(self, cron_id: str, expected: datetime, next_fire_at: datetime | None) -> bool:
        """If the entry's ``next_fire_at`` still equals ``expected``, set it to ``next_fire_at`` and
        ``last_fired_at = now`` (``next_fire_at=None``: a one-off that fired, kept for its log); True = won."""

    @abstractmethod
    def cron_record_fire(self, cron_id: str, fire: CronFireRecord, max_history: int) -> None:
        """Append ``fire`` to the entry's fire log, keeping the newest ``max_history`` rows (no-op if gone)."""

    @abstractmethod
    def cron_fires(self, cron_id: str) -> list[CronFireRecord]:
        """The fire log of ``cron_id``, oldest first."""

    @abstractmethod
    def cron_next_deadline(self) -> datetime | None:
        """The earliest ``next_fire_at`` of any entry of a live actor, or None."""

    # --- connections -------------------------------------------------------------------------------

    def close_thread_connection(self) -> None:
        """Close what the calling thread holds open (a database connection); called by threads the engine
        starts (the lease heartbeat) when they end. Default: nothing to close."""
        ...


class BaseStore(Store):
    """The portable defaults of ``Store``: implementations subclass this and implement the abstract
    members (and override a default where they can do it faster or atomically)."""

    inline_calls = False

    def get_or_create_actor(
        self,
        name: str,
        key: list,
        input: Any,
        create_state: Callable[[], Any],
        *,
        due: bool = False,
        flow: Callable[[Any], Flow | None] | None = None,
    ) -> tuple[ActorRecord, bool]:
        existing = self.find_actor(name, key)
        if existing is not None:
            return existing, False
        state = create_state()
        return self.create_actor(name, key, input, state, due=due, flow=None if flow is None else flow(state))

    def claim_and_load(
        self, actor_id: str, owner: str, lease_seconds: float
    ) -> tuple[int, ActorRecord, list[EntryRecord], datetime] | None:
        token = self.claim(actor_id, owner, lease_seconds)
        if token is None:
            return None
        try:
            actor, history, now = self.load_for_run(actor_id)
        except ActorNotFoundError:
            return None
        return token, actor, history, now

    def load_for_run(self, actor_id: str) -> tuple[ActorRecord, list[EntryRecord], datetime]:
        actor = self.get_actor(actor_id)
        return actor, self.load_history(actor_id), self.now()

    def release(self, actor_id: str, token: int) -> CommitResult:
        return self.commit(actor_id, token, Commit(release=True))

    def send_and_check(
        self, actor_id: str, name: str, body: Any, completable: bool = False
    ) -> tuple[MessageRecord, bool | None]:
        return self.send(actor_id, name, body, completable), None

    def wait_for_messages(self, actor_id: str, names: list[str], timeout: float) -> bool:
        return False

    def close_thread_connection(self) -> None:
        return None


class Dispatcher(Protocol):
    """Dispatch port: turns "actor X has work" into execution (a Celery task, or nothing under drain())."""

    def wake(self, actor_id: str) -> None: ...
