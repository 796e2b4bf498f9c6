"""MemoryStore: the in-memory twin of the storage port, implementing every capability of ``ports.Store``.

``MemoryStore`` behaves like the Django stores: values are kept as ``serde.to_json`` output (so an
unserializable value fails here too, and callers never share mutable objects with the store), every
executor write is fenced by the lease token (``_holds``), and the wake rules of ``ports`` are applied in
the same critical section as the write. It implements every member natively (claim-and-load, load for
run, send with the dispatcher hint, a real blocking warm wait, release), so engine tests run the executor
path production runs. Importing this module does not import Django.
"""

from __future__ import annotations

import itertools
import json
import threading
import uuid
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any

from ..engine.model import base_store, errors, fork_copy, observe, ports, serde, wake
from . import memory_rows as rows
from .clock import utcnow
from .memory_actions import MemoryActionMixin
from .memory_audit import MemoryAuditMixin, encode_action
from .memory_cron import MemoryCronMixin
from .memory_flow import MemoryFlowMixin
from .memory_queues import MemoryQueueMixin
from .memory_relay import MemoryRelayMixin
from .memory_schedules import MemoryScheduleMixin
from .memory_streams import MemoryStreamsMixin


class MemoryStore(
    MemoryFlowMixin,
    MemoryActionMixin,
    MemoryAuditMixin,
    MemoryCronMixin,
    MemoryQueueMixin,
    MemoryRelayMixin,
    MemoryScheduleMixin,
    MemoryStreamsMixin,
    base_store.BaseStore,
):
    """Thread-safe in-memory ``ports.Store`` (see the ``ports`` module docstring for the invariants).

    ``clock`` is a callable returning an aware UTC datetime (default: the real clock; see ``ManualClock``).
    ``poll_interval`` (seconds) is how often ``run_action`` re-checks a held step lock.

    Behaves as the Django stores do, member by member (``ports.Store`` states the contract; the port
    conformance suite, ``tests/port``, runs the same assertions on all of them): one actor per
    ``(name, key)``; claims that keep ``wake_at``; commits that are all or nothing (values are encoded
    before anything is written) and fenced; new history entries get an increasing ``seq`` that an upsert
    of the same key keeps; the wake rules of sends, outbox deliveries and releases; message ids unknown
    to the store raise ``LookupError``.
    """

    #: every method is quick and thread-safe: the executor calls it without a thread hop
    inline_calls = True
    #: ``wait_for_wakes`` hears of sends that make a released actor due
    notifies_wakes = True

    def __init__(self, clock: Callable[[], datetime] | None = None, poll_interval: float = 0.02) -> None:
        self._clock = clock or utcnow
        self.poll_interval = poll_interval
        self._lock = threading.RLock()
        #: notified on every change (commit, send, action, creation, destroy): waits re-check on it
        self._changed = threading.Condition(self._lock)
        self._actors: dict[str, rows.ActorRow] = {}
        self._by_key: dict[tuple[str, str], str] = {}
        self._history: dict[str, dict[str, ports.EntryRecord]] = {}
        self._messages: dict[str, ports.MessageRecord] = {}
        self._queue: dict[str, list[str]] = {}  # actor_id -> message ids in send order
        self._seq = itertools.count(1)
        self._created = itertools.count(1)
        #: (name, concurrency group) -> run start instants within the rate window
        self._starts: dict[tuple[str, str], list[datetime]] = {}
        self._wakes: list[str] = []  # actor ids a send made due while released, in order (wait_for_wakes)
        self._wake_cursor = threading.local()  # per listening thread: how many of _wakes it has seen
        self._init_schedules()
        self._init_data_schedules()
        self._init_audit()
        self._init_streams()
        self._init_relay()

    def __repr__(self) -> str:
        return f"<MemoryStore actors={len(self._actors)}>"

    # --- clock ------------------------------------------------------------------------------------

    def now(self) -> datetime:
        """The store's clock (aware UTC datetime)."""
        return self._clock()

    def _row(self, actor_id: str) -> rows.ActorRow:
        row = self._actors.get(actor_id)
        if row is None:
            raise errors.ActorNotFoundError(f"no actor with id {actor_id!r}", actor_id=actor_id)
        return row

    def _holds(self, actor_id: str, token: int) -> rows.ActorRow | None:
        """The lease fence (``storage.orm.lease_fence`` in memory): the live row of ``actor_id`` whose lease
        ``token`` still holds, or None. Caller holds ``self._lock``."""
        row = self._actors.get(actor_id)
        if row is None or row.lease_token != token or row.lease_owner is None:
            return None
        return row

    # --- actors -------------------------------------------------------------------------------------

    def get_or_create_actor(
        self,
        name: str,
        key: list,
        input: Any,
        create_state: Callable[[], Any],
        *,
        due: bool = False,
        trace_context: dict | None = None,
        flow: Callable[[Any], ports.Flow | None] | None = None,
        parent_id: str | None = None,
        start_after: float | None = None,
    ) -> tuple[ports.ActorRecord, bool]:
        """Return ``(record, created)`` for the actor ``(name, key)``, creating it with ``create_state()``.

        ``key`` is a list; ``input`` and the created state must serialize (``SerializationError``).
        ``due=True`` creates it with ``wake_at`` = now (see ``ports.Store.get_or_create_actor``). Atomic:
        the look-up and the insert happen under the store's lock.
        """
        key_text = rows.key_text(key)
        with self._lock:
            existing = self._by_key.get((name, key_text))
            if existing is not None:
                return rows.actor_record(self._actors[existing]), False
            state = create_state()
            flow_controls = None if flow is None else flow(state)
            return self._insert(
                name, key, key_text, input, state, due, trace_context, flow_controls, parent_id, start_after
            )

    def create_actor(
        self,
        name: str,
        key: list,
        input: Any,
        state: Any,
        *,
        due: bool = False,
        trace_context: dict | None = None,
        flow: ports.Flow | None = None,
        parent_id: str | None = None,
        start_after: float | None = None,
    ) -> tuple[ports.ActorRecord, bool]:
        """Insert the actor ``(name, key)`` with ``state``, due now if ``due``; ``(existing, False)`` if it
        exists (nothing written). ``SerializationError`` for an unserializable input or state."""
        key_text = rows.key_text(key)
        with self._lock:
            existing = self._by_key.get((name, key_text))
            if existing is not None:
                return rows.actor_record(self._actors[existing]), False
            return self._insert(
                name, key, key_text, input, state, due, trace_context, flow, parent_id, start_after
            )

    def _insert(
        self,
        name: str,
        key: list,
        key_text: str,
        input: Any,
        state: Any,
        due: bool,
        trace_context: dict | None = None,
        flow: ports.Flow | None = None,
        parent_id: str | None = None,
        start_after: float | None = None,
    ) -> tuple[ports.ActorRecord, bool]:
        """Create the actor row (caller holds ``self._lock`` and checked the key is free)."""
        encoded_input = serde.to_json(input, where="actor input")
        encoded_state = serde.to_json(state, where="actor state")
        now = self.now()
        row = rows.ActorRow(
            # creation order in the id's first 12 hex digits: a listing's keyset on (created_at, actor_id)
            # keeps creation order when the (manual) clock stands still (DESIGN.md section 19)
            actor_id=f"{next(self._created):012x}{uuid.uuid4().hex[12:]}",
            name=name,
            key=serde.to_json(list(key)),
            state=encoded_state,
            input=encoded_input,
            wake_at=(
                now + timedelta(seconds=start_after) if start_after is not None else now if due else None
            ),
            created_at=now,
            updated_at=now,
            trace_context=dict(trace_context) if trace_context else None,
            parent_id=parent_id,
        )
        if flow is not None:
            row.concurrency_key = flow.concurrency_key
            row.concurrency_limit = flow.concurrency_limit
            row.rate_count, row.rate_per = flow.rate_count, flow.rate_per
            row.priority = flow.priority
            if flow.timeout is not None:
                row.deadline_at = now + timedelta(seconds=flow.timeout)
        self._actors[row.actor_id] = row
        self._by_key[(name, key_text)] = row.actor_id
        self._history[row.actor_id] = {}
        self._queue[row.actor_id] = []
        self._changed.notify_all()
        return rows.actor_record(row), True

    def fork_actor(
        self,
        source_id: str,
        name: str,
        key: list,
        input: Any,
        state: Any,
        entries: list[ports.EntryRecord],
        *,
        source_audit: ports.OperatorActionRecord,
        fork_audit: ports.OperatorActionRecord,
        flow: ports.Flow | None = None,
    ) -> ports.ActorRecord:
        """The fork in one critical section (see ``ports.Store.fork_actor``): everything is encoded before
        the first write; ``ActorNotFoundError``, ``ActorAlreadyExistsError``, ``SerializationError``."""
        key_text = rows.key_text(key)
        attributes = fork_copy.copied_attributes(entries)
        audits = (encode_action(source_audit), encode_action(fork_audit))
        serde.to_json(input, where="actor input")
        serde.to_json(state, where="actor state")
        with self._lock:
            self._row(source_id)
            if (name, key_text) in self._by_key:
                raise errors.ActorAlreadyExistsError(
                    f"actor {name!r} with key {key!r} already exists", name=name, key=list(key)
                )
            source_rows = [
                fork_copy.StreamRow(stream_name, item.offset, item.step_key, item.discarded, item)
                for stream_name, stream in self._streams.get(source_id, {}).items()
                for item in stream.rows
            ]
            plan = fork_copy.plan_stream_copy(entries, source_rows)
            copies = [rows.encode_entry(e.copy()) for e in plan.entries]
            record, _ = self._insert(name, key, key_text, input, state, True, None, flow)
            if attributes:
                self._actors[record.actor_id].attributes = dict(attributes)
                record = rows.actor_record(self._actors[record.actor_id])
            now = self.now()
            self._write_history(record.actor_id, copies, [], now)
            self._copy_streams(record.actor_id, plan)
            self._write_audit(source_id, audits[0], now)
            self._write_audit(record.actor_id, audits[1], now)
            return record

    def get_actor(self, actor_id: str) -> ports.ActorRecord:
        """The actor's current record (decoded copy); ``ActorNotFoundError`` if unknown or destroyed."""
        with self._lock:
            return rows.actor_record(self._row(actor_id))

    def find_actor(self, name: str, key: list) -> ports.ActorRecord | None:
        """The actor ``(name, key)`` or None."""
        key_text = rows.key_text(key)
        with self._lock:
            actor_id = self._by_key.get((name, key_text))
            return None if actor_id is None else rows.actor_record(self._actors[actor_id])

    def defer_start(
        self, actor_id: str, input: Any, state: Any, delay: float, max_delay: float | None
    ) -> ports.ActorRecord | None:
        """Push back an unstarted workflow's start, replacing its input (and state unless ``UNSET``); the
        new record, or None when it started or is due (``ports.Store.defer_start``)."""
        encoded_input = serde.to_json(input, where="actor input")
        encoded_state = None if state is ports.UNSET else serde.to_json(state, where="actor state")
        with self._lock:
            row = self._row(actor_id)
            now = self.now()
            if (
                row.workflow_state != ports.PENDING
                or row.lease_owner is not None
                or (row.wake_at is not None and row.wake_at <= now)
            ):
                return None
            wake_at = now + timedelta(seconds=delay)
            if max_delay is not None and row.created_at is not None:
                wake_at = min(wake_at, row.created_at + timedelta(seconds=max_delay))
            row.input = encoded_input
            if encoded_state is not None:
                row.state = encoded_state
            row.wake_at = wake_at
            row.updated_at = now
            self._changed.notify_all()
            return rows.actor_record(row)

    def destroy_actor(self, actor_id: str) -> None:
        """Remove the actor, its history and its messages (a running executor's writes then fail)."""
        with self._lock:
            row = self._row(actor_id)
            del self._actors[actor_id]
            self._by_key.pop((row.name, json.dumps(row.key, sort_keys=True, separators=(",", ":"))), None)
            self._history.pop(actor_id, None)
            self._drop_audit(actor_id)
            self._drop_streams(actor_id)
            for message_id in self._queue.pop(actor_id, []):
                self._messages.pop(message_id, None)
            self._changed.notify_all()

    def list_children(self, actor_id: str) -> list[ports.ActorRecord]:
        """The live actors created from ``actor_id``'s runs, oldest first (``ports.Store.list_children``)."""
        with self._lock:
            return [rows.actor_record(r) for r in self._actors.values() if r.parent_id == actor_id]

    def list_actors(self, name: str | None = None, *, limit: int | None = None) -> list[ports.ActorRecord]:
        """Every actor (of type ``name``, or all), oldest first (creation order), at most ``limit``."""
        with self._lock:
            found = [r for r in self._actors.values() if name is None or r.name == name]
            return [rows.actor_record(r) for r in found[:limit]]

    def actor_counts(self) -> observe.ActorCounts:
        """``observe.ActorCounts`` of the live actors, read in one critical section."""
        with self._lock:
            return observe.count_actors(self._actors.values(), self.now(), ports.FINISHED_STATES)

    # --- leases and the run's reads -------------------------------------------------------------------

    def claim(self, actor_id: str, owner: str, lease_seconds: float) -> int | None:
        """Take the lease if it is free or expired; return the new fencing token, or None."""
        with self._lock:
            row = self._actors.get(actor_id)
            if row is None:
                return None
            now = self.now()
            if rows.lease_live(row, now) or row.paused_at is not None or not self._admit(row, now):
                return None
            self._record_start(row, now)
            return self._take_lease(row, owner, now, lease_seconds)

    def claim_for_operator(self, actor_id: str, owner: str, lease_seconds: float) -> int | None:
        """Take the lease if it is free or expired, whatever the pause and flow limits (see
        ``ports.Store.claim_for_operator``); the new fencing token, or None."""
        with self._lock:
            row, now = self._actors.get(actor_id), self.now()
            if row is None or rows.lease_live(row, now):
                return None
            return self._take_lease(row, owner, now, lease_seconds)

    @staticmethod
    def _take_lease(row: rows.ActorRow, owner: str, now: datetime, lease_seconds: float) -> int:
        """Give the row's lease to ``owner`` until ``now`` + ``lease_seconds``: the fencing token bumped,
        a dead lease's step lock cleared with it. Returns the new token. Caller holds ``self._lock``."""
        row.lease_token += 1
        row.lease_owner = owner
        row.lease_expires_at = now + timedelta(seconds=lease_seconds)
        row.step_lock_until = None
        return row.lease_token

    def claim_and_load(
        self, actor_id: str, owner: str, lease_seconds: float
    ) -> tuple[int, ports.ActorRecord, list[ports.EntryRecord], datetime] | None:
        """``claim`` plus the run's initial reads ``(token, actor, history, now)`` in one critical section
        (nothing can change between the claim and the reads), or None when the lease is held or the actor
        is gone; ``now`` is the clock reading of the claim."""
        with self._lock:
            token = self.claim(actor_id, owner, lease_seconds)
            if token is None:
                return None
            actor, history, now = self.load_for_run(actor_id)
            return token, actor, history, now

    def load_for_run(self, actor_id: str) -> tuple[ports.ActorRecord, list[ports.EntryRecord], datetime]:
        """``(actor, history, now)`` read in one critical section; ``ActorNotFoundError`` if gone."""
        with self._lock:
            row = self._row(actor_id)
            entries = sorted(self._history[actor_id].values(), key=lambda e: e.seq)
            return rows.actor_record(row), [rows.entry_out(e) for e in entries], self.now()

    def renew(self, actor_id: str, token: int, lease_seconds: float) -> bool:
        """Extend the lease held with ``token`` by ``lease_seconds`` from now; False if the fence fails."""
        with self._lock:
            row = self._holds(actor_id, token)
            if row is None:
                return False
            row.lease_expires_at = self.now() + timedelta(seconds=lease_seconds)
            return True

    def handoff(self, actor_id: str, token: int, owner: str, lease_seconds: float) -> int | None:
        """Take over the lease held with ``token``; bumps the token (a second hand-over gets None)."""
        with self._lock:
            row = self._holds(actor_id, token)
            if row is None:
                return None
            row.lease_token += 1
            row.lease_owner = owner
            row.lease_expires_at = self.now() + timedelta(seconds=lease_seconds)
            return row.lease_token

    def release(self, actor_id: str, token: int) -> ports.CommitResult:
        """Give the lease back without changing the workflow: free the lease and the step lock, and make the
        actor due now when a pending message matches its ``waiting_for`` (a send during the run). Fenced:
        ``ok=False`` and nothing written when ``token`` no longer holds the lease."""
        row = self._actors.get(actor_id)
        if row is None:
            return ports.CommitResult(ok=False)
        with row.row_lock, self._lock:
            if self._holds(actor_id, token) is not row:
                return ports.CommitResult(ok=False)
            woken: list[str] = []
            self._settle(row, release=True, now=self.now(), woken=woken)
            self._changed.notify_all()
            return ports.CommitResult(ok=True, wake_at=row.wake_at, woken=woken)

    def next_deadline(self) -> datetime | None:
        """The earliest ``wake_at`` of any unfinished, unpaused actor, or None."""
        with self._lock:
            deadlines = [
                r.wake_at
                for r in self._actors.values()
                if r.wake_at is not None
                and r.workflow_state not in ports.FINISHED_STATES
                and r.paused_at is None
            ]
            return min(deadlines) if deadlines else None

    # --- history and commits ---------------------------------------------------------------------------

    def load_history(self, actor_id: str) -> list[ports.EntryRecord]:
        """Every entry of the actor ordered by ``seq`` (decoded copies); ``ActorNotFoundError`` if unknown."""
        with self._lock:
            self._row(actor_id)
            entries = sorted(self._history[actor_id].values(), key=lambda e: e.seq)
            return [rows.entry_out(e) for e in entries]

    def run_in_commit(
        self, actor_id: str, token: int, body: Callable[[], ports.Commit]
    ) -> ports.CommitResult:
        """An atomic step on the in-memory store: a plain step (DESIGN.md section 13). A lost lease is
        refused before ``body`` runs (``ok=False``); then ``body()`` and ``commit``. The body's own writes
        (ORM rows) are not this store's, so a failed or fenced commit does not roll them back."""
        with self._lock:
            if self._holds(actor_id, token) is None:
                return ports.CommitResult(ok=False)
        return self.commit(actor_id, token, body())

    def commit(self, actor_id: str, token: int, commit: ports.Commit) -> ports.CommitResult:
        """Apply ``commit`` atomically if ``token`` is the actor's current lease token (see class docstring).

        Raises ``SerializationError`` (nothing written) for an unserializable value, and
        ``MessageAlreadyCompletedError``/``LookupError``/``ActorNotFoundError`` (nothing written) for a
        completion of a completed message, a message of another actor or an outbox to an unknown actor.
        """
        row = self._actors.get(actor_id)
        if row is None:
            return ports.CommitResult(ok=False)
        with row.row_lock, self._lock:  # row lock: serialised with run_action on this actor
            if self._holds(actor_id, token) is not row:
                return ports.CommitResult(ok=False)
            c = commit
            # Encode and validate everything before the first write: the commit is all or nothing.
            enc: dict[str, Any] = {}
            for name in ("state", "input", "output", "error"):
                value = getattr(c, name)
                if value is not ports.UNSET:
                    enc[name] = serde.to_json(value, where=f"actor {name}")
            upserts = [rows.encode_entry(e) for e in c.upserts]
            completions = []
            for message_id, response in c.complete_messages:
                message = self._own_message(actor_id, message_id)
                if message.status == ports.MESSAGE_COMPLETED:
                    raise errors.MessageAlreadyCompletedError(message_id=message_id)
                completions.append((message, serde.to_json(response, where="message response")))
            receipts = [self._own_message(actor_id, mid) for mid in c.receive_messages]
            outbox = []
            for target, name, body, completable in c.outbox:
                self._row(target)
                outbox.append((target, name, serde.to_json(body, where=f"queue {name!r} body"), completable))
            relay = self._encode_relay(c.relay)
            audit = encode_action(c.audit) if c.audit is not None else None

            now = self.now()
            self._write_actor(row, c, enc, now)
            self._write_history(actor_id, upserts, c.deletes, now)
            self._write_messages(receipts, completions, now)
            if audit is not None:
                self._write_audit(actor_id, audit, now)
            self._write_relay(actor_id, relay, now)
            woken: list[str] = []
            for target, name, body, completable in outbox:
                if self._deliver(target, name, body, completable, now)[1] and target not in woken:
                    woken.append(target)
            result = ports.CommitResult(ok=True, relayed=bool(relay))
            if isinstance(c.step_lock_until, datetime):
                result.state = serde.from_json(row.state)
            self._settle(row, release=c.release, now=now, woken=woken, defer_until=c.defer_until)
            result.wake_at = row.wake_at
            result.woken = woken
            result.paused = row.paused_at is not None
            self._changed.notify_all()
            return result

    @staticmethod
    def _write_actor(row: rows.ActorRow, c: ports.Commit, encoded: dict[str, Any], now: datetime) -> None:
        for name, value in encoded.items():
            setattr(row, name, value)
        if c.workflow_state is not ports.UNSET:
            row.workflow_state = c.workflow_state
        if c.wake_at is not ports.UNSET:
            row.wake_at = c.wake_at
        if c.waiting_for is not ports.UNSET:
            row.waiting_for = list(c.waiting_for)
        if c.step_lock_until is not ports.UNSET:
            row.step_lock_until = c.step_lock_until
        if c.code_version is not ports.UNSET:
            row.code_version = c.code_version
        if c.awaiting_code_version is not ports.UNSET:
            row.awaiting_code_version = c.awaiting_code_version
        if c.replay_generation is not ports.UNSET:
            row.replay_generation = int(c.replay_generation)
        if isinstance(c.attributes, dict):
            row.attributes = {**row.attributes, **c.attributes}
        if not c.lease_only:
            row.updated_at = now

    def _write_history(
        self, actor_id: str, upserts: list[ports.EntryRecord], deletes: list[str], now: datetime
    ) -> None:
        history = self._history[actor_id]
        for entry in upserts:
            previous = history.get(entry.key)
            if previous is None:
                entry.seq = next(self._seq)
                entry.created_at = entry.created_at or now
            else:
                entry.seq = previous.seq
                entry.created_at = previous.created_at or entry.created_at or now
            history[entry.key] = entry
        for key in deletes:
            history.pop(key, None)

    def _settle(
        self,
        row: rows.ActorRow,
        *,
        release: bool,
        now: datetime,
        woken: list[str],
        defer_until: Any = ports.UNSET,
    ) -> None:
        """The end of the wake rule: a finished actor is never due; a release frees the lease and the step
        lock and makes the actor due now if a pending message matches its ``waiting_for`` (then, with
        ``defer_until``, not before that instant); this actor joins ``woken`` when the release leaves it
        due."""
        row.wake_at = wake.settle(
            workflow_state=row.workflow_state,
            wake_at=row.wake_at,
            waiting_for=row.waiting_for,
            release=release,
            now=now,
            has_matching_message=lambda names: any(
                self._messages[mid].status == ports.MESSAGE_PENDING
                and wake.matches(names, self._messages[mid].name)
                for mid in self._queue[row.actor_id]
            ),
            defer_until=defer_until,
        )
        if not release:
            return
        row.lease_owner = None
        row.lease_expires_at = None
        row.step_lock_until = None
        if wake.due_now(row.wake_at, now) and row.actor_id not in woken:
            woken.append(row.actor_id)
        following = self._next_in_group(row, now)  # a slot freed: wake the next due actor of the group
        if following is not None and following not in woken:
            woken.append(following)
