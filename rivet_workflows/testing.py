"""In-memory store, inline dispatcher and helpers for unit tests (the reference implementation of ports.Store).

``MemoryStore`` behaves like the Django store: values are kept as ``serde.to_json`` output (so an
unserializable value fails here too, and callers never share mutable objects with the store), every
executor write is fenced by the lease token, and the wake rules of ``ports`` are applied inside the same
critical section as the write. Importing this module does not import Django.
"""

from __future__ import annotations

import dataclasses
import itertools
import json
import threading
import time as _time
import uuid
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

from .engine import errors, ports, serde
from .engine.definitions import Registry
from .engine.memory_cron import MemoryCronMixin
from .engine.runtime import Runtime, Settings
from .golden import ReplayReport, export_history, replay_history

__all__ = [
    "GroupProcess",
    "InlineDispatcher",
    "ManualClock",
    "MemoryStore",
    "ReplayReport",
    "drain",
    "export_history",
    "make_runtime",
    "replay_history",
]


def _utcnow() -> datetime:
    return datetime.now(UTC)


class ManualClock:
    """A clock for ``MemoryStore(clock=...)`` that moves only when told: ``clock.advance(seconds)``.

    Calling it returns the current aware UTC datetime. ``start`` defaults to the real current time.
    """

    def __init__(self, start: datetime | None = None) -> None:
        self._now = start or _utcnow()
        self._lock = threading.Lock()

    def __call__(self) -> datetime:
        with self._lock:
            return self._now

    def advance(self, seconds: float | timedelta) -> datetime:
        """Move forward by ``seconds`` (float or timedelta) and return the new time."""
        delta = seconds if isinstance(seconds, timedelta) else timedelta(seconds=seconds)
        with self._lock:
            self._now += delta
            return self._now

    def set(self, when: datetime) -> None:
        """Jump to ``when`` (an aware datetime)."""
        with self._lock:
            self._now = when


@dataclasses.dataclass
class _ActorRow:
    """One actor as stored: value columns hold ``serde.to_json`` output."""

    actor_id: str
    name: str
    key: list  # encoded
    state: Any
    input: Any
    output: Any = None
    error: Any = None
    workflow_state: str = ports.PENDING
    wake_at: datetime | None = None
    waiting_for: list[str] = dataclasses.field(default_factory=list)
    created_at: datetime | None = None
    updated_at: datetime | None = None
    lease_owner: str | None = None
    lease_expires_at: datetime | None = None
    lease_token: int = 0
    step_lock_until: datetime | None = None
    row_lock: threading.RLock = dataclasses.field(default_factory=threading.RLock, repr=False)


def _matches(waiting_for: list[str], name: str) -> bool:
    return "*" in waiting_for or name in waiting_for


class MemoryStore(MemoryCronMixin, ports.BaseStore):
    """Thread-safe in-memory ``ports.Store`` (see the ``ports`` module docstring for the invariants).

    ``clock`` is a callable returning an aware UTC datetime (default: the real clock; see ``ManualClock``).
    ``poll_interval`` (seconds) is how often ``run_action`` re-checks a held step lock.

    Behaviour the Django store matches:

    * ``get_or_create_actor``/``create_actor`` create at most one actor per ``(name, key)``
      (``create_state()`` is called only when creating), with ``workflow_state="pending"`` and
      ``wake_at`` now (``due=True``) or None; ``run_action(..., make_due=True)`` makes an actor due after
      ``on_create``.
    * ``claim`` succeeds only when the lease is free or expired; it increments ``lease_token``, clears a
      dead step lock and keeps ``wake_at``. ``claim_due`` claims due actors ordered by ``wake_at``.
    * ``commit`` with a stale token changes nothing and returns ``ok=False``; otherwise everything in the
      ``Commit`` applies atomically (values are encoded before anything is written, so a
      ``SerializationError`` leaves the store untouched). New entries get an increasing ``seq``; an
      upsert of an existing key keeps its ``seq`` and ``created_at``. A finished ``workflow_state`` forces
      ``wake_at=None``. ``release`` frees the lease and the step lock, then sets ``wake_at=now`` if a
      pending message matches ``waiting_for`` (``"*"`` matches every queue).
    * ``send`` (and outbox delivery) sets ``wake_at=now`` on an unfinished target that waits on the queue
      name or is leased.
    * ``destroy_actor`` removes the actor, its history and messages: later ``get_actor``/``send`` raise
      ``ActorNotFoundError``, ``claim`` returns None, ``commit`` returns ``ok=False``, the key is free.
    * ``get_message`` of an unknown id raises ``LookupError``.
    """

    #: every method is quick and thread-safe: the executor calls it without a thread hop
    inline_calls = True

    def __init__(self, clock: Callable[[], datetime] | None = None, poll_interval: float = 0.02) -> None:
        self._clock = clock or _utcnow
        self.poll_interval = poll_interval
        self._lock = threading.RLock()
        self._changed = threading.Condition(self._lock)
        self._actors: dict[str, _ActorRow] = {}
        self._by_key: dict[tuple[str, str], str] = {}
        self._history: dict[str, dict[str, ports.EntryRecord]] = {}
        self._messages: dict[str, ports.MessageRecord] = {}
        self._queue: dict[str, list[str]] = {}  # actor_id -> message ids in send order
        self._seq = itertools.count(1)

    # --- clock ------------------------------------------------------------------------------------

    def now(self) -> datetime:
        """The store's clock (aware UTC datetime)."""
        return self._clock()

    # --- encoding helpers ---------------------------------------------------------------------------

    @staticmethod
    def _key_text(key: list) -> str:
        return json.dumps(serde.to_json(list(key), where="actor key"), sort_keys=True, separators=(",", ":"))

    def _record(self, row: _ActorRow) -> ports.ActorRecord:
        return ports.ActorRecord(
            actor_id=row.actor_id,
            name=row.name,
            key=serde.from_json(row.key),
            state=serde.from_json(row.state),
            input=serde.from_json(row.input),
            output=serde.from_json(row.output),
            error=serde.from_json(row.error),
            workflow_state=row.workflow_state,
            wake_at=row.wake_at,
            waiting_for=list(row.waiting_for),
            created_at=row.created_at,
            updated_at=row.updated_at,
            destroyed=False,
            lease_owner=row.lease_owner,
            lease_expires_at=row.lease_expires_at,
            lease_token=row.lease_token,
        )

    @staticmethod
    def _entry_out(entry: ports.EntryRecord) -> ports.EntryRecord:
        return dataclasses.replace(
            entry,
            location=serde.from_json(entry.location),
            data=serde.from_json(entry.data),
            error=serde.from_json(entry.error),
            rollback_error=serde.from_json(entry.rollback_error),
        )

    @staticmethod
    def _message_out(message: ports.MessageRecord) -> ports.MessageRecord:
        return dataclasses.replace(
            message, body=serde.from_json(message.body), response=serde.from_json(message.response)
        )

    def _row(self, actor_id: str) -> _ActorRow:
        row = self._actors.get(actor_id)
        if row is None:
            raise errors.ActorNotFoundError(f"no actor with id {actor_id!r}", actor_id=actor_id)
        return row

    def _lease_live(self, row: _ActorRow, now: datetime) -> bool:
        return row.lease_owner is not None and row.lease_expires_at is not None and row.lease_expires_at > now

    # --- actors -------------------------------------------------------------------------------------

    def get_or_create_actor(
        self, name: str, key: list, input: Any, create_state: Callable[[], Any], *, due: bool = False
    ) -> tuple[ports.ActorRecord, bool]:
        """Return ``(record, created)`` for the actor ``(name, key)``, creating it with ``create_state()``.

        ``key`` is a list; ``input`` and the created state must serialize (``SerializationError``).
        ``due=True`` creates it with ``wake_at`` = now (see ``ports.Store.get_or_create_actor``).
        """
        key_text = self._key_text(key)
        with self._lock:
            existing = self._by_key.get((name, key_text))
            if existing is not None:
                return self._record(self._actors[existing]), False
            return self._insert(name, key, key_text, input, create_state(), due)

    def create_actor(
        self, name: str, key: list, input: Any, state: Any, *, due: bool = False
    ) -> tuple[ports.ActorRecord, bool]:
        """Insert the actor ``(name, key)`` with ``state``, due now if ``due``; ``(existing, False)`` if it
        exists (nothing written). ``SerializationError`` for an unserializable input or state."""
        key_text = self._key_text(key)
        with self._lock:
            existing = self._by_key.get((name, key_text))
            if existing is not None:
                return self._record(self._actors[existing]), False
            return self._insert(name, key, key_text, input, state, due)

    def _insert(
        self, name: str, key: list, key_text: str, input: Any, state: Any, due: bool
    ) -> tuple[ports.ActorRecord, bool]:
        """Create the actor row (caller holds ``self._lock`` and checked the key is free)."""
        encoded_input = serde.to_json(input, where="actor input")
        encoded_state = serde.to_json(state, where="actor state")
        now = self.now()
        row = _ActorRow(
            actor_id=uuid.uuid4().hex,
            name=name,
            key=serde.to_json(list(key)),
            state=encoded_state,
            input=encoded_input,
            wake_at=now if due else None,
            created_at=now,
            updated_at=now,
        )
        self._actors[row.actor_id] = row
        self._by_key[(name, key_text)] = row.actor_id
        self._history[row.actor_id] = {}
        self._queue[row.actor_id] = []
        if due:
            self._changed.notify_all()
        return self._record(row), True

    def get_actor(self, actor_id: str) -> ports.ActorRecord:
        """The actor's current record (decoded copy); ``ActorNotFoundError`` if unknown or destroyed."""
        with self._lock:
            return self._record(self._row(actor_id))

    def find_actor(self, name: str, key: list) -> ports.ActorRecord | None:
        """The actor ``(name, key)`` or None."""
        key_text = self._key_text(key)
        with self._lock:
            actor_id = self._by_key.get((name, key_text))
            return None if actor_id is None else self._record(self._actors[actor_id])

    def destroy_actor(self, actor_id: str) -> None:
        """Remove the actor, its history and its messages (a running executor's writes then fail)."""
        with self._lock:
            row = self._row(actor_id)
            del self._actors[actor_id]
            self._by_key.pop((row.name, json.dumps(row.key, sort_keys=True, separators=(",", ":"))), None)
            self._history.pop(actor_id, None)
            for message_id in self._queue.pop(actor_id, []):
                self._messages.pop(message_id, None)
            self._changed.notify_all()

    def list_actors(self, name: str | None = None, *, limit: int | None = None) -> list[ports.ActorRecord]:
        """Every actor (of type ``name``, or all), oldest first, at most ``limit``."""
        with self._lock:
            rows = [r for r in self._actors.values() if name is None or r.name == name]
            return [self._record(r) for r in rows[:limit]]

    # --- leases -------------------------------------------------------------------------------------

    def claim(self, actor_id: str, owner: str, lease_seconds: float) -> int | None:
        """Take the lease if it is free or expired; return the new fencing token, or None."""
        with self._lock:
            row = self._actors.get(actor_id)
            if row is None:
                return None
            now = self.now()
            if self._lease_live(row, now):
                return None
            row.lease_token += 1
            row.lease_owner = owner
            row.lease_expires_at = now + timedelta(seconds=lease_seconds)
            row.step_lock_until = None  # a step lock of a dead lease is dead too
            return row.lease_token

    def claim_due(self, owner: str, limit: int, lease_seconds: float) -> list[tuple[str, int]]:
        """Claim up to ``limit`` due actors (``wake_at <= now``, lease free or expired), earliest first."""
        with self._lock:
            now = self.now()
            due = sorted(
                (
                    r
                    for r in self._actors.values()
                    if r.wake_at is not None and r.wake_at <= now and not self._lease_live(r, now)
                ),
                key=lambda r: (r.wake_at, r.created_at, r.actor_id),
            )
            claimed = []
            for row in due[: max(limit, 0)]:
                token = self.claim(row.actor_id, owner, lease_seconds)
                if token is not None:
                    claimed.append((row.actor_id, token))
            return claimed

    def renew(self, actor_id: str, token: int, lease_seconds: float) -> bool:
        """Extend the lease held with ``token`` by ``lease_seconds`` from now; False if the fence fails."""
        with self._lock:
            row = self._actors.get(actor_id)
            if row is None or row.lease_token != token or row.lease_owner is None:
                return False
            row.lease_expires_at = self.now() + timedelta(seconds=lease_seconds)
            return True

    def handoff(self, actor_id: str, token: int, owner: str, lease_seconds: float) -> int | None:
        """Take over the lease held with ``token``; bumps the token (a second hand-over gets None)."""
        with self._lock:
            row = self._actors.get(actor_id)
            if row is None or row.lease_token != token or row.lease_owner is None:
                return None
            row.lease_token += 1
            row.lease_owner = owner
            row.lease_expires_at = self.now() + timedelta(seconds=lease_seconds)
            return row.lease_token

    def next_deadline(self) -> datetime | None:
        """The earliest ``wake_at`` of any unfinished actor, or None."""
        with self._lock:
            deadlines = [
                r.wake_at
                for r in self._actors.values()
                if r.wake_at is not None and r.workflow_state not in ports.FINISHED_STATES
            ]
            return min(deadlines) if deadlines else None

    # --- history ------------------------------------------------------------------------------------

    def load_history(self, actor_id: str) -> list[ports.EntryRecord]:
        """Every entry of the actor ordered by ``seq`` (decoded copies); ``ActorNotFoundError`` if unknown."""
        with self._lock:
            self._row(actor_id)
            entries = sorted(self._history[actor_id].values(), key=lambda e: e.seq)
            return [self._entry_out(e) for e in entries]

    def _encode_entry(self, entry: ports.EntryRecord) -> ports.EntryRecord:
        where = f"history entry {entry.key!r}"
        return dataclasses.replace(
            entry,
            location=serde.to_json(list(entry.location), where=where),
            data=serde.to_json(dict(entry.data), where=f"{where} data"),
            error=serde.to_json(entry.error, where=f"{where} error"),
            rollback_error=serde.to_json(entry.rollback_error, where=f"{where} rollback error"),
        )

    def commit(self, actor_id: str, token: int, commit: ports.Commit) -> ports.CommitResult:
        """Apply ``commit`` atomically if ``token`` is the actor's current lease token (see class docstring).

        Raises ``SerializationError`` (nothing written) for an unserializable value, and
        ``MessageAlreadyCompletedError`` (nothing written) when completing a completed message.
        """
        row = self._actors.get(actor_id)
        if row is None:
            return ports.CommitResult(ok=False)
        with row.row_lock, self._lock:  # row lock: serialised with run_action on this actor
            if self._actors.get(actor_id) is not row or row.lease_token != token or row.lease_owner is None:
                return ports.CommitResult(ok=False)
            # Encode and validate everything before the first write: the commit is all or nothing.
            c = commit
            enc: dict[str, Any] = {}
            for field in ("state", "input", "output", "error"):
                value = getattr(c, field)
                if value is not ports.UNSET:
                    enc[field] = serde.to_json(value, where=f"actor {field}")
            upserts = [self._encode_entry(e) for e in c.upserts]
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

            now = self.now()
            for field, value in enc.items():
                setattr(row, field, value)
            if c.workflow_state is not ports.UNSET:
                row.workflow_state = c.workflow_state
            if c.wake_at is not ports.UNSET:
                row.wake_at = c.wake_at
            if c.waiting_for is not ports.UNSET:
                row.waiting_for = list(c.waiting_for)
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
            for key in c.deletes:
                history.pop(key, None)
            for message in receipts:
                if message.status == ports.MESSAGE_PENDING:
                    message.status = ports.MESSAGE_RECEIVED
            for message, response in completions:
                message.status = ports.MESSAGE_COMPLETED
                message.response = response
                message.completed_at = now
            woken: list[str] = []
            for target, name, body, completable in outbox:
                if self._send_locked(target, name, body, completable, now)[1]:
                    woken.append(target)
            result = ports.CommitResult(ok=True)
            if c.step_lock_until is not ports.UNSET:
                row.step_lock_until = c.step_lock_until
                if c.step_lock_until is not None:
                    result.state = serde.from_json(row.state)
            if row.workflow_state in ports.FINISHED_STATES:
                row.wake_at = None
            if c.release:
                row.lease_owner = None
                row.lease_expires_at = None
                row.step_lock_until = None
                if row.workflow_state not in ports.FINISHED_STATES and (
                    row.wake_at is None or row.wake_at > now
                ):
                    if any(
                        self._messages[mid].status == ports.MESSAGE_PENDING
                        and _matches(row.waiting_for, self._messages[mid].name)
                        for mid in self._queue[actor_id]
                    ):
                        row.wake_at = now
                if row.wake_at is not None and row.wake_at <= now:
                    woken.append(actor_id)
            row.updated_at = now
            result.wake_at = row.wake_at
            result.woken = list(dict.fromkeys(woken))
            self._changed.notify_all()
            return result

    # --- queues -------------------------------------------------------------------------------------

    def _own_message(self, actor_id: str, message_id: str) -> ports.MessageRecord:
        message = self._messages.get(message_id)
        if message is None or message.actor_id != actor_id:
            raise LookupError(f"actor {actor_id} has no queue message {message_id!r}")
        return message

    def _send_locked(
        self, actor_id: str, name: str, body: Any, completable: bool, now: datetime
    ) -> tuple[ports.MessageRecord, bool]:
        row = self._row(actor_id)
        message = ports.MessageRecord(
            id=uuid.uuid4().hex,
            actor_id=actor_id,
            name=name,
            body=body,
            created_at=now,
            completable=completable,
        )
        self._messages[message.id] = message
        self._queue[actor_id].append(message.id)
        due = False
        if row.workflow_state not in ports.FINISHED_STATES and (
            _matches(row.waiting_for, name) or row.lease_owner is not None
        ):
            row.wake_at = now
            due = True
        return message, due

    def send(self, actor_id: str, name: str, body: Any, completable: bool = False) -> ports.MessageRecord:
        """Store a message for ``actor_id`` on queue ``name`` and apply the wake rule (see class docstring).

        Raises ``ActorNotFoundError`` and ``SerializationError``. Returns the stored message (a copy).
        """
        encoded = serde.to_json(body, where=f"queue {name!r} body")
        with self._lock:
            message, _ = self._send_locked(actor_id, name, encoded, completable, self.now())
            self._changed.notify_all()
            return self._message_out(message)

    def pending_messages(
        self, actor_id: str, names: list[str] | None, limit: int
    ) -> list[ports.MessageRecord]:
        """Up to ``limit`` pending messages of the actor, oldest first, on ``names`` (None or ``"*"``: any)."""
        with self._lock:
            self._row(actor_id)
            out = []
            for message_id in self._queue[actor_id]:
                message = self._messages[message_id]
                if message.status != ports.MESSAGE_PENDING:
                    continue
                if names is not None and not _matches(list(names), message.name):
                    continue
                out.append(self._message_out(message))
                if len(out) >= limit:
                    break
            return out

    def get_message(self, message_id: str) -> ports.MessageRecord:
        """The message ``message_id`` (a copy); ``LookupError`` if unknown."""
        with self._lock:
            message = self._messages.get(message_id)
            if message is None:
                raise LookupError(f"no queue message {message_id!r}")
            return self._message_out(message)

    def complete_message(self, message_id: str, response: Any) -> None:
        """Mark the message completed with ``response``; ``MessageAlreadyCompletedError`` the second time."""
        encoded = serde.to_json(response, where="message response")
        with self._lock:
            message = self._messages.get(message_id)
            if message is None:
                raise LookupError(f"no queue message {message_id!r}")
            if message.status == ports.MESSAGE_COMPLETED:
                raise errors.MessageAlreadyCompletedError(message_id=message_id)
            message.status = ports.MESSAGE_COMPLETED
            message.response = encoded
            message.completed_at = self.now()
            self._changed.notify_all()

    # --- actions ------------------------------------------------------------------------------------

    def _step_lock_live(self, row: _ActorRow, now: datetime) -> bool:
        return row.step_lock_until is not None and row.step_lock_until > now and self._lease_live(row, now)

    def run_action(
        self, actor_id: str, fn: Callable[[Any], Any], timeout: float, *, make_due: bool = False
    ) -> tuple[Any, Any]:
        """Run ``fn(state)`` under the actor's row lock once no live step lock is held; save and return
        ``(result, state)``. ``make_due=True`` also sets ``wake_at`` to now in the same write (unless it is
        earlier, the workflow is finished or ``fn`` destroyed the actor).

        Waits (re-checking every ``poll_interval`` seconds, or at once when a commit lands) for at most
        ``timeout`` seconds, then raises ``WorkflowInFlightError``. ``ActorNotFoundError`` for an unknown
        actor; ``SerializationError`` (state not saved) if ``fn`` leaves an unserializable state. An
        exception from ``fn`` propagates and the state is not saved.
        """
        deadline = _time.monotonic() + timeout
        while True:
            with self._lock:
                row = self._row(actor_id)
            row.row_lock.acquire()
            try:
                with self._lock:
                    if self._actors.get(actor_id) is not row:
                        raise errors.ActorNotFoundError(f"no actor with id {actor_id!r}", actor_id=actor_id)
                    busy = self._step_lock_live(row, self.now())
                    state = None if busy else serde.from_json(row.state)
                if not busy:
                    result = fn(state)
                    encoded = serde.to_json(state, where="actor state")
                    with self._lock:
                        if self._actors.get(actor_id) is row:  # not destroyed by the action itself
                            now = self.now()
                            row.state = encoded
                            row.updated_at = now
                            if (
                                make_due
                                and row.workflow_state not in ports.FINISHED_STATES
                                and (row.wake_at is None or row.wake_at > now)
                            ):
                                row.wake_at = now
                        self._changed.notify_all()
                    return result, serde.from_json(encoded)
            finally:
                row.row_lock.release()
            remaining = deadline - _time.monotonic()
            if remaining <= 0:
                raise errors.WorkflowInFlightError(
                    f"actor {actor_id} is running a step; the action gave up after {timeout} s",
                    actor_id=actor_id,
                    timeout=timeout,
                )
            with self._changed:
                self._changed.wait(min(self.poll_interval, remaining))


class InlineDispatcher:
    """A ``ports.Dispatcher`` that only records wake-ups (``woken``); ``drain`` does the running."""

    def __init__(self) -> None:
        self.woken: list[str] = []
        self._lock = threading.Lock()

    def wake(self, actor_id: str) -> None:
        """Record that ``actor_id`` has work."""
        with self._lock:
            self.woken.append(actor_id)


def make_runtime(
    registry: Registry,
    *,
    store: Any = None,
    dispatcher: Any = None,
    clock: Callable[[], datetime] | None = None,
    broadcaster: Callable[[str, str, list], Any] | None = None,
    **settings: Any,
) -> Runtime:
    """A ``Runtime`` on a fresh ``MemoryStore(clock=clock)`` and ``InlineDispatcher``, bound to ``registry``.

    ``settings`` are ``Settings`` fields (``lease_seconds=5``...); unknown names raise ``TypeError``.
    """
    config = Settings(**settings)
    if store is None:
        store = MemoryStore(clock=clock, poll_interval=config.poll_interval)
    return Runtime(
        store,
        dispatcher if dispatcher is not None else InlineDispatcher(),
        registry,
        config,
        broadcaster=broadcaster,
    )


def drain(runtime: Runtime, timeout: float = 10.0, **kwargs: Any) -> Any:
    """Run every due actor of ``runtime`` to quiescence (``engine.executor.drain``, DESIGN.md section 9)."""
    from .engine import executor

    return executor.drain(runtime, timeout=timeout, **kwargs)


class GroupProcess:
    """A subprocess in its own process group, its output in a log file: what the demo and the system tests
    use to run Celery workers (and beat, Redis) that they can SIGKILL as a crash would.

    ``cmd`` is the argument list, ``env`` the whole environment, ``log_path`` the file that receives stdout
    and stderr, ``cwd`` the working directory. ``kill()`` sends SIGKILL to the whole group (a worker's
    beat or pool children go with it), ``stop(grace)`` SIGTERM then SIGKILL after ``grace`` seconds.
    """

    def __init__(
        self, name: str, cmd: list[str], *, env: dict[str, str], log_path: Any, cwd: Any = None
    ) -> None:
        import subprocess

        self.name = name
        self.log_path = log_path
        self._log = open(log_path, "w")  # noqa: SIM115 - closed in kill()/stop()
        self.proc = subprocess.Popen(
            cmd, cwd=cwd, env=env, stdout=self._log, stderr=subprocess.STDOUT, start_new_session=True
        )

    @property
    def pid(self) -> int:
        """The process id (also the process group id)."""
        return self.proc.pid

    def alive(self) -> bool:
        """True while the process has not exited."""
        return self.proc.poll() is None

    def kill(self, timeout: float = 15.0) -> None:
        """SIGKILL the process group and reap the process (waits up to ``timeout`` seconds)."""
        import os
        import signal

        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.proc.wait(timeout=timeout)
        if not self._log.closed:
            self._log.close()

    def stop(self, grace: float = 5.0) -> None:
        """SIGTERM the process group (a Celery warm shutdown), then SIGKILL after ``grace`` seconds."""
        import os
        import signal
        import subprocess

        if self.alive():
            try:
                os.killpg(self.proc.pid, signal.SIGTERM)
                self.proc.wait(timeout=grace)
            except (ProcessLookupError, subprocess.TimeoutExpired):
                pass
        self.kill()

    def tail(self, lines: int = 30) -> str:
        """The last ``lines`` lines of the log ("" if it cannot be read)."""
        try:
            with open(self.log_path, errors="replace") as f:
                return "\n".join(f.read().splitlines()[-lines:])
        except OSError:
            return ""
