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
* ``run_in_commit`` runs a callable (an atomic step's body) inside the transaction of the commit it builds:
  a database store rolls the callable's own writes back with a failed or fenced commit.
* ``updated_at`` moves on changes only: leases (``Commit.lease_only``), reads and no-op actions leave it.
* Actions and step bodies are serialised on one actor: the commit that records a step attempt
  (status running, attempts + 1) also sets ``step_lock_until`` and returns the actor's fresh state
  (``CommitResult.state``), which the step body then mutates; the commit that records the step's
  outcome writes the state and clears the lock. ``run_action`` waits while a live step lock is held
  (lock not expired and lease not expired), so no update is lost either way.
"""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Callable
from datetime import datetime
from typing import Any, Protocol, runtime_checkable

from . import observe, watches

# records kept apart for size (actors, entries, messages, schedules, the audit, commits), re-exported here
from .records import CRON_EXPRESSION as CRON_EXPRESSION
from .records import CRON_INTERVAL as CRON_INTERVAL
from .records import CRON_ONCE as CRON_ONCE
from .records import RELAY_CREATE as RELAY_CREATE
from .records import RELAY_SEND as RELAY_SEND
from .records import UNSET as UNSET
from .records import ActorFilter as ActorFilter
from .records import ActorRecord as ActorRecord
from .records import Commit as Commit
from .records import CommitResult as CommitResult
from .records import CronFireRecord as CronFireRecord
from .records import CronRecord as CronRecord
from .records import EntryRecord as EntryRecord
from .records import Flow as Flow
from .records import MessageRecord as MessageRecord
from .records import OperatorActionRecord as OperatorActionRecord
from .records import RelayCreate as RelayCreate
from .records import RelayRecord as RelayRecord
from .records import ScheduleFireRecord as ScheduleFireRecord
from .records import ScheduleRecord as ScheduleRecord
from .records import StreamItem as StreamItem
from .records import StreamPage as StreamPage
from .records import relay_row_values as relay_row_values

# Workflow states (ENGINE-SEMANTICS.md section 1).
PENDING = "pending"
RUNNING = "running"
SLEEPING = "sleeping"
COMPLETED = "completed"
ROLLING_BACK = "rolling_back"
FAILED = "failed"
CANCELLED = "cancelled"
#: a code error stopped the run: nothing rolled back, not due, sends kept; ``retry`` goes on (DESIGN.md 16)
SUSPENDED = "suspended"
FINISHED_STATES = frozenset({COMPLETED, FAILED, CANCELLED})
#: states in which no run goes on by itself: the finished ones and suspended (never due, never run)
HALTED_STATES = FINISHED_STATES | {SUSPENDED}
#: finished states that refuse a send from outside a run (``errors.WorkflowFinishedError``): nothing will
#: consume it; a failed workflow accepts sends (an operator's recover or replay runs it again)
CLOSED_STATES = frozenset({COMPLETED, CANCELLED})
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
    notifies_wakes: bool  #: True when ``wait_for_wakes`` hears sends that make a released actor due

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
        trace_context: dict | None = None,
        flow: Callable[[Any], Flow | None] | None = None,
        parent_id: str | None = None,
        start_after: float | None = None,
    ) -> tuple[ActorRecord, bool]:
        """``(record, created)`` for the actor ``(name, key)``, creating it (pending) if there is none.

        ``create_state()`` is called only when creating; so is ``flow(state)``, whose ``Flow`` is recorded
        on the new row (as ``create_actor``'s ``flow``). ``due=True`` creates it due (``wake_at`` = the
        store's now), else with ``wake_at`` None. A creator losing a concurrent race gets the winner's
        actor (``created`` False); there is never a duplicate. ``SerializationError`` for an
        unserializable input or state (nothing written). Default: ``find_actor``, then ``create_actor``.
        """

    @abstractmethod
    def create_actor(
        self,
        name: str,
        key: list,
        input: Any,
        state: Any,
        *,
        due: bool = False,
        trace_context: dict | None = None,
        flow: Flow | None = None,
        parent_id: str | None = None,
        start_after: float | None = None,
    ) -> tuple[ActorRecord, bool]:
        """Insert the actor ``(name, key)`` with ``state`` (already built), pending, in one atomic write;
        ``trace_context`` (a dict of strings: the creating request's W3C trace context) is stored with it.

        ``flow`` (a ``Flow``) is recorded on the row in the same write: its concurrency group and limits,
        rate limit and priority, and ``deadline_at`` = the store's now + ``flow.timeout``.

        ``due=True``: ``wake_at`` is the store's now in the same write, so the actor is due as soon as it
        exists; else ``wake_at`` None. If the actor exists already (or a concurrent creator wins), nothing
        is written and ``(existing record, False)`` is returned; else ``(new record, True)``.
        ``SerializationError`` for an unserializable input or state. ``parent_id``: the actor whose run
        creates this one, recorded on the new row (``ActorRecord.parent_id``; DESIGN.md section 20).
        ``start_after`` (seconds, instead of ``due``): ``wake_at`` is the store's now + ``start_after`` in
        the same write, a deferred start (``client().TYPE.debounce``).
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
    def list_children(self, actor_id: str) -> list[ActorRecord]:
        """The live actors whose ``parent_id`` is ``actor_id`` (created from its runs), oldest first
        ([] for an unknown actor; DESIGN.md section 20)."""

    def find_actors(
        self,
        query: ActorFilter,
        *,
        limit: int = 100,
        after: tuple[datetime, str] | None = None,
        newest_first: bool = False,
        offset: int = 0,
    ) -> list[ActorRecord]:
        """Up to ``limit`` live actors ``query`` selects (``ActorFilter.matches``) ordered by ``(created_at,
        actor_id)`` (``newest_first``: descending), strictly after the keyset position ``after`` in that order
        (a ``(created_at, actor_id)`` pair; None: from the first), skipping ``offset`` rows first. A database store answers with one indexed query (PostgreSQL: the attribute filter is
        a ``jsonb @>`` containment on a GIN index; DESIGN.md section 19). Default: ``list_actors`` filtered."""
        ...

    def count_actors(self, query: ActorFilter) -> int:
        """How many live actors ``query`` selects (one query). Default: ``list_actors`` filtered."""
        ...

    def suspended_by_other_version(self, code_version: str, limit: int) -> list[str]:
        """Ids of suspended actors whose recorded ``code_version`` (the suspending commit's) is not
        ``code_version`` (None is another), least recently updated first, at most ``limit``: the runs a
        deploy retries (DESIGN.md section 16). Default: ``list_actors``."""
        ...

    def actor_counts(self) -> observe.ActorCounts:
        """Live actors per ``(type, workflow_state)``, how many are due, how many unfinished ones hold an
        expired lease (``observe.ActorCounts``; the metrics gauges, one query). Default: ``list_actors``."""
        ...

    @abstractmethod
    def defer_start(
        self, actor_id: str, input: Any, state: Any, delay: float, max_delay: float | None
    ) -> ActorRecord | None:
        """Push back the start of a workflow that has not started (a debounce, DESIGN.md section 20), in one
        conditional write: when the actor is ``PENDING``, holds no lease and is not due (``wake_at`` None
        or later than now), its ``input`` becomes ``input``, its state ``state`` (unless ``UNSET``) and
        ``wake_at`` now + ``delay`` seconds, but never later than its ``created_at`` (the first call of
        the burst) + ``max_delay`` seconds (None: no bound); returns the new record. None, writing
        nothing, when the workflow started or is due already (the caller then gets the actor as it is).
        ``ActorNotFoundError`` for an unknown actor; ``SerializationError`` for the values."""

    @abstractmethod
    def destroy_actor(self, actor_id: str) -> None:
        """Delete the actor with its history, messages and schedules; its key is free again and a running
        executor's next write is fenced off. ``ActorNotFoundError`` if there is no such actor."""

    @abstractmethod
    def fork_actor(
        self,
        source_id: str,
        name: str,
        key: list,
        input: Any,
        state: Any,
        entries: list[EntryRecord],
        *,
        source_audit: OperatorActionRecord,
        fork_audit: OperatorActionRecord,
        flow: Flow | None = None,
    ) -> ActorRecord:
        """Create the fork of ``source_id`` (DESIGN.md section 19) in one atomic write: the actor ``(name,
        key)`` with ``input`` and ``state``, pending and due now (store clock), with ``flow``'s controls
        (as ``create_actor``); its history ``entries`` (copies of the source's, as ``engine.forks`` chose
        them) inserted in list order, so their ``seq`` keeps that order, each keeping its key, location,
        kind, data, status, attempts, error and times; the audit row ``source_audit`` on the source and
        ``fork_audit`` (its ``actor_id`` ignored) on the new actor. What the copied entries wrote comes too
        (``fork_copy``): the search attributes, the merge of the copied ``attributes`` entries in order
        (``copied_attributes``), and the source's stream items of the copied workflow-code writes and of the
        copied completed steps (not discarded), renumbered densely from 0 per stream with the copied write
        entries' ``offset`` following, each stream closed by a copied close entry closed
        (``plan_stream_copy``). The source is not otherwise touched.

        Returns the new actor's record. Raises, writing nothing, ``ActorNotFoundError`` when the source is
        gone, ``ActorAlreadyExistsError`` when ``(name, key)`` is taken (also by a concurrent creator),
        ``SerializationError`` for a value that does not encode."""

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

    @abstractmethod
    def claim_for_operator(self, actor_id: str, owner: str, lease_seconds: float) -> int | None:
        """Take the lease for an operator's replay, recover or cancel (ENGINE-SEMANTICS.md section 9,
        DESIGN.md section 12): as ``claim``, only when the lease is free or expired (else None; None for
        a destroyed actor), bumping and returning the fencing token, keeping ``wake_at``, clearing a dead
        step lock and leaving ``updated_at``; but none of the flow rules apply: a paused actor is taken
        (an operator may cancel or replay what they paused), and concurrency and rate limits neither hold
        it back nor count it as a run start. The caller decides before it claims, so a refused or no-op
        operator call never reaches this."""

    def claim_and_load(
        self, actor_id: str, owner: str, lease_seconds: float
    ) -> tuple[int, ActorRecord, list[EntryRecord], datetime] | None:
        """``claim`` plus a run's initial reads: ``(token, actor, history, now)`` (store clock), or None when
        the lease is held elsewhere or the actor is gone. Default: ``claim`` then ``load_for_run``."""

    def load_for_run(self, actor_id: str) -> tuple[ActorRecord, list[EntryRecord], datetime]:
        """``(actor, history, now)`` for a run that holds the lease already; ``ActorNotFoundError``.
        Default: ``get_actor``, ``load_history`` and ``now``."""

    @abstractmethod
    def claim_due(
        self, owner: str, limit: int, lease_seconds: float, *, expired_only: bool = False
    ) -> list[tuple[str, int]]:
        """Claim up to ``limit`` due actors (``wake_at <= now``, lease free or expired, not paused, within
        their flow limits: see ``claim``), highest ``priority`` first, then earliest ``wake_at``:
        ``[(actor_id, token), ...]``. Concurrent callers never claim the same actor. ``expired_only``: only
        those whose lease expired (a takeover of a dead or stalled executor's actor; the sweep claims
        these whatever the broker's backlog, docs/howto/production.md)."""

    @abstractmethod
    def flow_retry_at(self, actor_id: str) -> datetime | None:
        """When the due actor ``actor_id``, held back by its rate limit, may be claimed (the oldest start in
        its window + ``rate_per``); None when no rate limit holds it back."""

    @abstractmethod
    def set_paused(
        self,
        actor_id: str,
        paused: bool,
        reason: str | None = None,
        *,
        audit: OperatorActionRecord | None = None,
    ) -> bool:
        """Pause (recording ``reason``) or resume the actor; True when that changed it (a finished or
        suspended workflow is not paused; a finished workflow is not resumed either: its pause, if it
        finished paused, is over and nothing is written). Never claimed while paused; a run holding the lease finds ``CommitResult.paused`` on
        its next commit. Resuming keeps ``wake_at`` (a deadline passed meanwhile is due). ``audit``: the
        operator action written in the same transaction when it changed the actor (none when it did not).
        ActorNotFoundError."""

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
        if not. The wake rule of the module docstring applies to the outbox and to ``release``, which
        ``defer_until`` postpones (an earlier wake-up moves to it; a later one or none stays)."""

    def run_in_commit(self, actor_id: str, token: int, body: Callable[[], Commit]) -> CommitResult:
        """Call ``body()`` (an atomic step's body; it returns the commit of its outcome) inside the
        transaction applying that commit, fenced by ``token`` (DESIGN.md section 13): ``ok=False`` without
        calling ``body`` when the lease is lost already; ``ok=False`` with the body's writes rolled back
        when the fence fails at the commit; an exception of ``body`` rolls them back and propagates.
        Default (a store that is not the body's database, e.g. the in-memory one): ``body()``, ``commit``."""
        ...

    # --- queues ------------------------------------------------------------------------------------
    @abstractmethod
    def send(
        self,
        actor_id: str,
        name: str,
        body: Any,
        completable: bool = False,
        *,
        trace_context: dict | None = None,
        dedup_id: str | None = None,
    ) -> MessageRecord:
        """Store a message (with the sender's ``trace_context``, a dict of strings) and make the actor due if it waits on ``name`` (or ``"*"``) or is leased, unless
        its workflow is finished. ``ActorNotFoundError``, ``SerializationError``; ``WorkflowFinishedError``
        (``errors.workflow_finished``) when the workflow is in ``CLOSED_STATES`` (completed, cancelled),
        checked under the same lock as the insert: nothing is stored. A commit's outbox is not a ``send``
        and is never refused (the run sent it while its workflow ran).

        ``dedup_id`` (a str, or None: no deduplication): when a kept message of the actor has it already,
        nothing is stored, nothing is woken, and that message is returned (even once the workflow is
        closed: a redelivered send is answered as the first was). The database enforces it (a unique
        (actor, dedup_id) constraint), so concurrent senders store one message (DESIGN.md section 20)."""

    def send_and_check(
        self,
        actor_id: str,
        name: str,
        body: Any,
        completable: bool = False,
        *,
        trace_context: dict | None = None,
        dedup_id: str | None = None,
    ) -> tuple[MessageRecord, bool | None]:
        """``send``, plus whether the sender should hand the actor to the dispatcher (it is due now and no
        live lease is held), when the store learns that in the same write; None = ask (``get_actor``).
        Default: ``(send(...), None)``."""

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

    def watch_sends(self, actor_id: str) -> watches.SendWatch:
        """A watch for a waiting send to ``actor_id`` (``ActorHandle.send(wait=True)``, HTTP ``wait``), taken
        before the message is stored and closed when the send stops waiting (docs/howto/calling.md).

        A store that can tell senders hands out a ``NotifiedWatch`` (``notifies`` True): it is woken when a
        commit completes the expected message and when the workflow finishes or the actor is destroyed
        (the ended check rides on that), and waiting on it holds no database connection, so the sender
        looks only when something happened and once at its deadline (PostgresStore: one listening
        connection per process, LISTEN/NOTIFY; MemoryStore: its change notification). Default
        (``BaseStore``): the polling ``SendWatch``; the sender backs off between looks."""
        ...

    def release_connection(self) -> None:
        """Give back the calling thread's database connection before a wait that needs none (a waiting
        send's pause): closed, or returned to the pool; kept when the thread is inside a transaction
        (closing it would end it). The next store call opens one again. Default: nothing."""

    def wait_for_wakes(self, timeout: float) -> list[str]:
        """Up to ``timeout`` s for sends making released actors due (``send_and_check``'s hint), heard by
        every calling thread since its first call: their ids, each once, or []. Default: [] at once."""
        return []

    # --- shards and the relay (DESIGN.md section 21) ---------------------------------------------------
    def same_shard(self, a_id: str, b_id: str) -> bool:
        """True when the actors with ids ``a_id`` and ``b_id`` live on the same shard (one database): a step
        of ``a_id`` then sends to ``b_id`` as today; False makes it a relay row committed with the step.
        Reads no row. Default (``BaseStore``, a store that is one shard): True."""
        ...

    def actor_id_for_key(self, name: str, key: list) -> str | None:
        """The id the actor ``(name, key)`` has (or will have when created), computed without reading a
        row, when this store computes ids from keys (a sharded store: ``shards.actor_id_for_key``); None
        when it cannot (one database: fresh uuid4 ids; a key that may be held by an actor made before
        sharding or by a fork given no key). Default (``BaseStore``): None."""
        ...

    def relay_sources(self) -> dict[str, Store]:
        """The stores whose relay rows the relay reads, by shard alias (``relay.relay_once``'s
        ``source_stores``): a store that is one shard returns ``{its alias: itself}``; a sharded store one
        entry per shard. Reads no row."""
        ...

    @abstractmethod
    def relay_pending(self, limit: int, *, after: int = 0) -> list[RelayRecord]:
        """Up to ``limit`` relay rows of this store (its shard) with an id above ``after`` that are neither
        delivered nor failed for good, in id order (commit order), as ``RelayRecord``s (bodies decoded)."""

    @abstractmethod
    def relay_mark_delivered(self, ids: list[int]) -> None:
        """Mark the relay rows ``ids`` delivered (``delivered_at`` = now); ids unknown or delivered already
        are left as they are (a second relay racing this one marks the same rows)."""

    @abstractmethod
    def relay_mark_failed(self, id: int, error: str, permanent: bool) -> None:
        """Record a failed delivery of relay row ``id``: ``attempts`` + 1 and ``last_error`` = ``error``;
        ``permanent`` True also sets ``failed`` (the target refused it for good: its workflow is closed, the
        actor is gone): the row is never tried again. An unknown id is ignored."""

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

    # --- the operator audit -------------------------------------------------------------------------

    @abstractmethod
    def record_operator_action(self, action: OperatorActionRecord) -> OperatorActionRecord:
        """Write ``action`` on its own (for an action with no fenced commit to ride on; a repair or a cancel
        passes it as ``Commit.audit`` instead, so the two are written together) and return it with ``at``
        (store clock) and ``id`` set. ``ActorNotFoundError`` for an unknown actor, ``SerializationError``
        for archived entries that are not JSON."""

    @abstractmethod
    def operator_actions(self, actor_id: str, *, limit: int | None = None) -> list[OperatorActionRecord]:
        """The audit rows of ``actor_id``, newest first (ties: the later written first), at most ``limit``
        (None: all). An unknown actor has none."""

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

    # --- durable streams (DESIGN.md section 17) -------------------------------------------------------
    # A stream is (actor, name): items at dense offsets from 0, then at most one closing row. It is closed
    # by that row or when the actor's workflow is finished (FINISHED_STATES). Items go with their actor.

    @abstractmethod
    def stream_write(
        self,
        actor_id: str,
        name: str,
        value: Any,
        *,
        attempt: int | None = None,
        step_key: str | None = None,
        write_key: str | None = None,
    ) -> StreamItem:
        """Append ``value`` (already checked by the serializer) to the stream ``name`` of ``actor_id`` at the
        next offset and commit at once (its own transaction, or the caller's when it is in one); return the
        item. ``attempt``/``step_key``: the step attempt writing it (``stream_discard`` marks it later).
        ``write_key``: a recorded write's key; when an item with that key exists already it is returned and
        nothing is written (a recorded write is exactly once). ``StreamClosedError`` when the stream is
        closed, ``ActorNotFoundError``, ``SerializationError``. Waiting readers are woken."""

    @abstractmethod
    def stream_close(self, actor_id: str, name: str) -> bool:
        """Close the stream ``name`` (a closing row after its last item); True when this call closed it,
        False when it was closed already. Waiting readers are woken. ``ActorNotFoundError``."""

    @abstractmethod
    def stream_close_all(self, actor_id: str) -> list[str]:
        """Close every stream of ``actor_id`` that is open (the workflow finished); the names closed now."""

    @abstractmethod
    def stream_discard(self, actor_id: str, step_key: str, before_attempt: int) -> int:
        """Mark ``discarded`` the items the step at ``step_key`` wrote in attempts ``< before_attempt`` (those
        attempts did not complete); returns how many changed. Unknown actor: 0."""

    @abstractmethod
    def stream_read(
        self, actor_id: str, name: str, offset: int, limit: int, *, include_discarded: bool = False
    ) -> StreamPage:
        """Up to ``limit`` rows of the stream from ``offset`` on, without waiting: a ``StreamPage`` whose
        ``closed`` says the stream is closed and this page reaches its end (nothing will follow). Discarded items are skipped (but counted in
        ``next_offset``) unless ``include_discarded``. A stream never written is empty and open (closed once
        the workflow finished). ``ActorNotFoundError`` for an unknown or destroyed actor."""

    @abstractmethod
    def stream_names(self, actor_id: str) -> list[str]:
        """The names of the actor's streams (any row written), sorted."""

    def stream_tail(self, actor_id: str, name: str, count: int) -> StreamPage:
        """The last ``count`` items of the stream (discarded included), oldest first, for the admin trace.
        Default: one ``stream_read`` from ``max(0, length - count)`` after reading the length."""
        ...

    def watch_stream(self, actor_id: str) -> watches.SendWatch:
        """A watch a waiting reader takes before it reads (``ActorHandle.read_stream``): its ``wait(timeout)``
        returns early (True) when an item is written to any stream of the actor, a stream closes or the
        workflow ends, if the store can tell (``notifies``); else it sleeps out the window and the reader
        looks again (the reader then keeps windows short: ``STREAM_POLL_SECONDS``). PostgresStore:
        LISTEN/NOTIFY on the process's listening connection; MemoryStore: its change notification.
        Default: the polling ``SendWatch``."""
        ...

    # --- schedules as data (DESIGN.md section 20) ---------------------------------------------------
    # A tick fires only after ``schedule_claim_tick`` inserted its fire log row, unique per (schedule,
    # tick): of the sweeps, triggers and backfills that reach the same tick exactly one fires it (at most
    # once: a crash after the claim loses that fire, its row stays ``claimed``). ``schedule_advance`` is a
    # compare-and-set on ``next_fire_at`` that keeps concurrent sweeps from planning the same ticks twice.

    @abstractmethod
    def schedule_create(self, record: ScheduleRecord) -> ScheduleRecord:
        """Insert ``record`` (``created_at`` = now); ``ScheduleAlreadyExistsError`` if the id is taken."""

    @abstractmethod
    def schedule_get(self, schedule_id: str) -> ScheduleRecord | None:
        """The schedule ``schedule_id``, or None."""

    @abstractmethod
    def schedule_list(self) -> list[ScheduleRecord]:
        """Every schedule, ordered by ``schedule_id``."""

    @abstractmethod
    def schedule_set_paused(
        self, schedule_id: str, paused: bool, next_fire_at: datetime | None
    ) -> ScheduleRecord | None:
        """Set ``paused`` and ``next_fire_at`` of the schedule; the updated record, or None if unknown."""

    @abstractmethod
    def schedule_delete(self, schedule_id: str) -> bool:
        """Delete the schedule and its fire log; True if it existed."""

    @abstractmethod
    def schedule_due(self, limit: int) -> list[ScheduleRecord]:
        """Unpaused schedules with ``next_fire_at <= now`` (store clock), earliest first, at most ``limit``."""

    @abstractmethod
    def schedule_advance(self, schedule_id: str, expected: datetime, next_fire_at: datetime | None) -> bool:
        """If the unpaused schedule's ``next_fire_at`` still equals ``expected`` set it to ``next_fire_at``;
        True = this caller won."""

    @abstractmethod
    def schedule_claim_tick(self, fire: ScheduleFireRecord) -> bool:
        """Insert ``fire`` (status ``claimed``) into the fire log and stamp the schedule's ``last_fired_at``.
        False, with nothing written, when the log already has ``(fire.schedule_id, fire.tick)``, when the
        schedule is gone, or, for a sweep fire (``how == "sweep"``), when the schedule is paused."""

    @abstractmethod
    def schedule_fire_done(
        self, schedule_id: str, tick: datetime, status: str, actor_id: str | None, error: dict | None
    ) -> None:
        """Record the outcome of a claimed fire (``status`` ok | error); no-op if the row is gone."""

    @abstractmethod
    def schedule_stale_fires(self, before: datetime, limit: int) -> list[ScheduleFireRecord]:
        """Fires still ``claimed`` whose ``fired_at`` is before ``before`` (their firer died or hangs), of
        schedules without an action, oldest first, at most ``limit``."""

    @abstractmethod
    def schedule_retake_fire(
        self, schedule_id: str, tick: datetime, expected_fired_at: datetime, fired_at: datetime
    ) -> bool:
        """If the fire ``(schedule_id, tick)`` is still ``claimed`` with ``fired_at == expected_fired_at``,
        set its ``fired_at`` to ``fired_at``; True = this caller takes the fire over."""

    @abstractmethod
    def schedule_fires(self, schedule_id: str, limit: int | None = None) -> list[ScheduleFireRecord]:
        """The fire log of ``schedule_id`` ordered by tick (the newest ``limit`` when given)."""

    @abstractmethod
    def schedule_next_deadline(self) -> datetime | None:
        """The earliest ``next_fire_at`` of an unpaused schedule, or None."""

    # --- connections -------------------------------------------------------------------------------
    def close_thread_connection(self) -> None:
        """Close what the calling thread holds open (a database connection); called by threads the engine
        starts when they are done with the store for a while (the lease keeper, idle). Default: nothing to close."""


class Dispatcher(Protocol):
    """Dispatch port: turns "actor X has work" into execution (a Celery task, or nothing under drain())."""

    def wake(self, actor_id: str) -> None: ...
