"""Durable sleeps and queue waits, and ``ctx.queue`` (ENGINE-SEMANTICS.md section 5)."""

from __future__ import annotations

from collections.abc import Awaitable
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from ...model import errors, ports
from ...model.settings import to_offset
from ..history import check_name
from ..results import QueueMessage

if TYPE_CHECKING:
    from ..session import RunSession
    from .scope import WorkflowContextRole

SLEEP_PENDING = "pending"
SLEEP_COMPLETED = "completed"
#: a queue wait's deadline that lost: the messages came first (ENGINE-SEMANTICS.md section 1)
SLEEP_INTERRUPTED = "interrupted"
ANY_QUEUE = "*"


def sleep_offset(name: Any, duration: float | timedelta, what: str = "sleep") -> float:
    """``duration`` (seconds or timedelta) as the float offset of a deadline from now, for the ``what``
    named ``name``: zero or negative is a deadline already passed (``settings.to_offset``). ``TypeError``
    for another type; ``CriticalError`` naming it for NaN, an infinity or an offset no date holds."""
    try:
        return to_offset(duration)
    except ValueError as exc:
        raise errors.CriticalError(f"{what} {name!r}: {exc}", location=str(name)) from None


def deadline_after(name: Any, now: datetime, seconds: float, what: str = "sleep") -> datetime:
    """``now + seconds``; ``CriticalError`` naming the ``what`` when the instant is past the calendar."""
    try:
        return now + timedelta(seconds=seconds)
    except OverflowError:
        raise errors.CriticalError(
            f"{what} {name!r}: a deadline {seconds:g} seconds from now is beyond the calendar",
            location=str(name),
        ) from None


async def run_sleep(
    ctx: WorkflowContextRole,
    key: str,
    name: str,
    *,
    seconds: float | None = None,
    until: datetime | None = None,
) -> None:
    """Sleep entry at ``key``: record the deadline at first execution, then wait (live or durable)."""
    session = ctx._session
    history = session.history
    entry = history.visit(key, "sleep", name)
    now = await session.now()
    if entry is None:
        if session.rolling_back:
            raise errors.RollbackStop()
        history.check_scope(ctx._scope, before=key, before_kind="sleep")
        if until is not None:
            deadline = until if until.tzinfo is not None else until.replace(tzinfo=UTC)
        else:
            deadline = deadline_after(name, now, seconds or 0.0)
        entry = history.new(key, "sleep", {"deadline": deadline, "state": SLEEP_PENDING}, now=now)
        entry.status = ports.ENTRY_PENDING
    elif entry.data.get("state") == SLEEP_COMPLETED:
        return None
    else:
        deadline = entry.data["deadline"]
    if session.rolling_back:
        raise errors.RollbackStop()
    if deadline > now:
        await session.wait(deadline)
    entry.data = {**entry.data, "state": SLEEP_COMPLETED}
    entry.status = ports.ENTRY_COMPLETED
    entry.completed_at = session.stamp()
    session.writes.record(entry)
    return None


def _names(names: Any) -> list[str] | None:
    if names is None:
        return None
    if isinstance(names, str):
        return [names]
    out = list(names)
    if not out or not all(isinstance(n, str) and n for n in out):
        raise ValueError(f"names must be a queue name or a non-empty list of queue names, got {names!r}")
    return out


def _check_no_open_completable(session: RunSession) -> None:
    for entry in session.history.entries.values():
        data = entry.data
        if entry.kind == "message" and data.get("completable") and not data.get("completed"):
            raise errors.RivetWorkflowsError(
                f"cannot receive the next completable message: message {data.get('id')} received at "
                f"{entry.key!r} was not completed yet (call msg.complete(response) first)",
                message_id=data.get("id"),
                location=entry.key,
            )


async def run_next_batch(
    ctx: WorkflowContextRole,
    key: str,
    name: str,
    names: Any,
    count: int,
    timeout: float | None,
    completable: bool,
) -> list[QueueMessage]:
    """Queue wait at ``key``: entries ``key:deadline`` (with a timeout), ``key:count`` and ``key:0..n-1``.

    Returns the recorded messages on replay; otherwise takes up to ``count`` pending messages (FIFO,
    filtered by ``names``), records and marks them received in one commit. Returns ``[]`` once the timeout
    passed (recorded as count 0); otherwise waits (live or durable).
    """
    session = ctx._session
    history = session.history
    queue_names = _names(names)
    if queue_names:
        for queue_name in queue_names:  # a typo would wait forever: QueueNotFoundError fails the workflow
            session.definition.check_queue(queue_name)
    count_key, deadline_key = f"{key}:count", f"{key}:deadline"
    deadline_entry = history.visit(deadline_key, "sleep", name) if timeout is not None else None
    count_entry = history.visit(count_key, "message", name)
    if count_entry is not None:
        received = []
        for i in range(int(count_entry.data.get("count", 0))):
            entry = history.visit(f"{key}:{i}", "message", name)
            if entry is None:
                raise history.diverged(
                    errors.HistoryDivergedError(
                        f"queue wait {key!r} recorded {count_entry.data.get('count')} messages but entry {i} "
                        "is missing",
                        location=key,
                    )
                )
            received.append(QueueMessage(session, entry))
        return received

    if session.rolling_back:
        raise errors.RollbackStop()
    history.check_scope(ctx._scope, before=key, before_kind="message")
    # Without a timeout the clock only stamps the entries: the anchored clock (no round trip) will do.
    now = (timeout is None and session.anchored_now()) or await session.now()
    deadline: datetime | None = None
    if timeout is not None:
        if deadline_entry is None:
            deadline = deadline_after(name, now, timeout, "queue wait")
            deadline_entry = history.new(
                deadline_key, "sleep", {"deadline": deadline, "state": SLEEP_PENDING}, now=now
            )
        else:
            deadline = deadline_entry.data["deadline"]

    async def fetch() -> list[ports.MessageRecord]:
        writes = session.writes
        records = await session.call(
            session.store.pending_messages, session.actor_id, queue_names, count + writes.taken_count
        )
        return [r for r in records if not writes.is_taken(r.id)][:count]

    async def available() -> bool:
        return bool(await fetch())

    while True:
        records = await fetch()
        now = (deadline is None and session.anchored_now()) or await session.now()
        if records or (deadline is not None and now >= deadline):
            break
        await session.wait(deadline, frozenset(queue_names or [ANY_QUEUE]), check=available)

    if records and completable:
        _check_no_open_completable(session)
    if deadline_entry is not None:  # the deadline fired, or lost to the messages (interrupted)
        state = SLEEP_INTERRUPTED if records else SLEEP_COMPLETED
        deadline_entry.data = {**deadline_entry.data, "state": state}
        deadline_entry.status = ports.ENTRY_COMPLETED
        deadline_entry.completed_at = now
        session.writes.record(deadline_entry)
    count_entry = history.new(count_key, "message", {"count": len(records), "names": queue_names}, now=now)
    count_entry.status, count_entry.completed_at = ports.ENTRY_COMPLETED, now
    received = []
    for i, record in enumerate(records):
        entry = history.new(
            f"{key}:{i}",
            "message",
            {
                "id": record.id,
                "name": record.name,
                "body": record.body,
                "created_at": record.created_at,
                "completable": bool(completable),
                "completed": False,
            },
            now=now,
        )
        entry.status = ports.MESSAGE_RECEIVED
        if record.encoded_body is not None:  # the body as stored: the entry writes it, not a new encoding
            entry.reused = {"body": record.encoded_body}
        received.append(QueueMessage(session, entry))
        session.writes.receive(record.id)
        session.runtime.observer.message_received(session.actor, record.name, record.trace_context)
    # Receiving and recording commit together, in the run's next commit: the one that starts the next
    # step (before its body runs), a wait's, or the run's last. Until then the messages stay pending in
    # the store, so a run that dies first leaves them to be received again by the next run.
    return received


class WorkflowQueue:
    """``ctx.queue``: receive messages sent to this actor (ENGINE-SEMANTICS.md section 5).

    ``name`` is the history entry name; ``names`` filters queue names (None: any queue).
    """

    def __init__(self, ctx: WorkflowContextRole) -> None:
        self._ctx = ctx

    def next_batch(
        self,
        name: str,
        names: Any = None,
        *,
        count: int = 1,
        timeout: float | timedelta | None = None,
        completable: bool = False,
    ) -> Awaitable[list[QueueMessage]]:
        """Wait for 1..``count`` messages (returns what is available without waiting for ``count``);
        ``timeout`` in seconds or timedelta; returns ``[]`` when it passes first."""
        check_name(name, "queue wait")
        if not isinstance(count, int) or isinstance(count, bool) or count < 1:
            raise ValueError(f"count must be an int >= 1, got {count!r}")
        seconds = None if timeout is None else sleep_offset(name, timeout, "queue wait")
        ctx = self._ctx
        return ctx._run(
            name, "queue wait", lambda key: run_next_batch(ctx, key, name, names, count, seconds, completable)
        )

    def next(
        self,
        name: str,
        names: Any = None,
        *,
        timeout: float | timedelta | None = None,
        completable: bool = False,
    ) -> Awaitable[QueueMessage]:
        """Wait for one message; raises ``QueueWaitTimeoutError`` when ``timeout`` passes first."""
        batch = self.next_batch(name, names, count=1, timeout=timeout, completable=completable)

        async def one() -> QueueMessage:
            messages = await batch
            if not messages:
                raise errors.QueueWaitTimeoutError(
                    f"queue wait {name!r} timed out after {timeout} s with no message", name=name
                )
            return messages[0]

        return one()

    def __repr__(self) -> str:
        return f"<WorkflowQueue of {self._ctx!r}>"
