"""Operating many runs: search attributes, listing actors by filter with keyset pages, bulk actions by filter.

DESIGN.md section 19, docs/howto/operating-many-runs.md. Attributes are a flat dict of JSON scalars per actor,
merged by each ``ctx.set_attributes``/``step.set_attributes``; a filter (``ports.ActorFilter``) selects actors
by type, shown state, attribute equality and creation/update time; pages are ordered by ``(created_at,
actor_id)`` and continued by an opaque cursor naming the last row seen, so a listing that goes on while
actors are created neither skips nor repeats one (new actors sort after every existing one).
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any

from ..actor import audit
from ..model import errors, ports
from ..model.attributes import check_attributes
from . import bulk, repairs

if TYPE_CHECKING:
    from ..model.roles import RuntimeRole

#: the largest page ``list_actors`` returns
MAX_LIMIT = 1000
#: how many actors a bulk action reads per page (one short query each; every actor is its own transaction)
BATCH = 200
#: the actions ``bulk`` takes: those of ``engine.bulk`` plus ``replay`` (replay the whole workflow)
BULK_ACTIONS = ("recover", "cancel", "pause", "resume", "retry", "replay")


# --- filters ------------------------------------------------------------------------------------------


def make_filter(
    name: str | None = None,
    state: str | None = None,
    attributes: Mapping[str, Any] | None = None,
    created_after: datetime | None = None,
    created_before: datetime | None = None,
    updated_after: datetime | None = None,
    updated_before: datetime | None = None,
) -> ports.ActorFilter:
    """A checked ``ports.ActorFilter``: ``state`` one of ``FILTER_STATES`` (the states an ``ActorRecord``
    shows), attributes as ``check_attributes``, times aware datetimes. ``InvalidFilterError`` (a
    ``ValueError``) otherwise."""
    if state is not None and state not in FILTER_STATES:
        raise errors.InvalidFilterError(
            f"unknown state {state!r}; one of: {', '.join(FILTER_STATES)}", field="state"
        )
    for label, when in (
        ("created_after", created_after),
        ("created_before", created_before),
        ("updated_after", updated_after),
        ("updated_before", updated_before),
    ):
        if when is not None and (not isinstance(when, datetime) or when.tzinfo is None):
            raise errors.InvalidFilterError(f"{label} must be an aware datetime, got {when!r}", field=label)
    return ports.ActorFilter(
        name=name or None,
        state=state,
        attributes=check_attributes(attributes, where="attributes filter") if attributes else None,
        created_after=created_after,
        created_before=created_before,
        updated_after=updated_after,
        updated_before=updated_before,
    )


#: the states a filter takes: every state an ``ActorRecord`` shows
FILTER_STATES = (
    ports.PENDING,
    ports.RUNNING,
    ports.SLEEPING,
    ports.ROLLING_BACK,
    ports.PAUSED,
    ports.SUSPENDED,
    ports.COMPLETED,
    ports.FAILED,
    ports.CANCELLED,
)


def after_key(record: ports.ActorRecord) -> tuple[datetime, str]:
    """The keyset position of ``record``: ``(created_at, actor_id)``."""
    assert record.created_at is not None
    return record.created_at, record.actor_id


# --- cursors ------------------------------------------------------------------------------------------


def encode_cursor(position: tuple[datetime, str]) -> str:
    """The opaque cursor of a keyset position (url-safe base64 of ``[created_at ISO, actor_id]``)."""
    created_at, actor_id = position
    text = json.dumps([created_at.isoformat(), actor_id], separators=(",", ":"))
    return base64.urlsafe_b64encode(text.encode()).decode().rstrip("=")


def decode_cursor(cursor: str) -> tuple[datetime, str]:
    """The keyset position of a cursor ``encode_cursor`` made; ``InvalidFilterError`` for anything else."""
    try:
        text = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)).decode()
        created_at, actor_id = json.loads(text)
        when = datetime.fromisoformat(created_at)
        if when.tzinfo is None or not isinstance(actor_id, str):
            raise ValueError(cursor)
    except (ValueError, TypeError, binascii.Error, UnicodeDecodeError):
        raise errors.InvalidFilterError(f"not a cursor of this listing: {cursor!r}", field="cursor") from None
    return when, actor_id


# --- listing ------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ActorSummary:
    """One actor of a listing: id, type, key, shown workflow state, attributes, created and updated (UTC)."""

    actor_id: str
    name: str
    key: list
    workflow_state: str
    attributes: dict
    created_at: datetime | None
    updated_at: datetime | None

    @classmethod
    def of(cls, record: ports.ActorRecord) -> ActorSummary:
        """The summary of an ``ActorRecord``."""
        return cls(
            record.actor_id,
            record.name,
            list(record.key),
            record.workflow_state,
            dict(record.attributes or {}),
            record.created_at,
            record.updated_at,
        )


@dataclass(frozen=True)
class ActorPage:
    """One page of ``list_actors``: ``items`` (``ActorSummary``, oldest first) and ``next_cursor`` (pass it
    as ``cursor=`` for the next page; None when this page is the last one)."""

    items: list[ActorSummary]
    next_cursor: str | None


def list_actors(
    runtime: RuntimeRole,
    query: ports.ActorFilter,
    *,
    limit: int = 100,
    cursor: str | None = None,
    newest_first: bool = False,
) -> ActorPage:
    """Up to ``limit`` (1..``MAX_LIMIT``) actors ``query`` selects, oldest first (``newest_first``: newest
    first, as the HTTP listing), after ``cursor`` (a page's ``next_cursor`` in the same order).

    One indexed query of the store (``Store.find_actors``): one row more than ``limit`` is read to know
    whether a next page exists. ``InvalidFilterError`` for a bad limit or cursor."""
    if not isinstance(limit, int) or isinstance(limit, bool) or not 1 <= limit <= MAX_LIMIT:
        raise errors.InvalidFilterError(
            f"limit must be an int in 1..{MAX_LIMIT}, got {limit!r}", field="limit"
        )
    after = decode_cursor(cursor) if cursor else None
    found = runtime.store.find_actors(query, limit=limit + 1, after=after, newest_first=newest_first)
    page = found[:limit]
    more = len(found) > limit
    return ActorPage(
        [ActorSummary.of(r) for r in page], encode_cursor(after_key(page[-1])) if more and page else None
    )


def iter_actors(
    runtime: RuntimeRole, query: ports.ActorFilter, *, batch: int = BATCH
) -> Iterator[ports.ActorRecord]:
    """Every actor ``query`` selects, read ``batch`` rows at a time by keyset (no long-held lock or cursor)."""
    after: tuple[datetime, str] | None = None
    while True:
        found = runtime.store.find_actors(query, limit=batch, after=after)
        yield from found
        if len(found) < batch:
            return
        after = after_key(found[-1])


# --- bulk by filter -----------------------------------------------------------------------------------


@dataclass
class BulkResult:
    """What ``bulk`` did: ``matched`` (actors the filter selected), ``changed`` (the action changed them; in
    a dry run: would change), ``unchanged`` (nothing to do, or refused: see ``refused``), ``actor_ids``
    (those changed, or that would change), ``refused`` (``{actor_id: reason}`` of the refusals)."""

    matched: int = 0
    changed: int = 0
    unchanged: int = 0
    actor_ids: list[str] = field(default_factory=list)
    refused: dict[str, str] = field(default_factory=dict)


def would_change(runtime: RuntimeRole, action: str, record: ports.ActorRecord, now: datetime) -> str | None:
    """None when ``action`` would change ``record`` (a dry run's prediction), else why not. Reads the history
    for ``recover`` and ``replay`` (the repairs' refusal predicate); writes nothing."""
    state = record.workflow_state
    if action in ("recover", "replay"):
        entries = runtime.store.load_history(record.actor_id)
        operation = repairs.RECOVER if action == "recover" else repairs.REPLAY
        refused = repairs.refusal(runtime, record, entries, operation, None, now=now)
        return None if refused is None else repairs.reason(refused)
    if action == "cancel":
        return None if state not in ports.FINISHED_STATES else f"the workflow is {state} already"
    if action == "pause":
        return (
            None if state not in ports.HALTED_STATES and state != ports.PAUSED else f"the workflow is {state}"
        )
    if action == "resume":
        return None if state == ports.PAUSED else "not paused"
    return None if state == ports.SUSPENDED else f"the workflow is {state}, not suspended"  # retry


def bulk_by_filter(
    runtime: RuntimeRole,
    action: str,
    query: ports.ActorFilter,
    *,
    who: str = audit.PYTHON,
    reason: str | None = None,
    dry_run: bool = False,
    batch: int = BATCH,
    progress: Callable[[int], None] | None = None,
    check: Callable[[str], None] | None = None,
) -> BulkResult:
    """Do ``action`` (one of ``BULK_ACTIONS``) to every actor ``query`` selects: the engine call of its own
    button per actor (``engine.bulk.act_on``: an audit row ``bulk_<action>`` per changed actor, one actor's
    refusal or error never stops the rest), reading ``batch`` actors at a time by keyset, so no lock is held
    on more than one actor at once. ``dry_run``: writes nothing and reports what would change
    (``would_change``). ``progress(n)`` is called after each actor with the number done so far.
    ``InvalidFilterError`` (a ``ValueError``) for an unknown action, or a filter that selects every actor
    (none of name, state, attributes or a time: say which actors), before anything is read."""
    if action not in BULK_ACTIONS:
        raise errors.InvalidFilterError(
            f"unknown bulk action {action!r}; one of: {', '.join(BULK_ACTIONS)}", field="action"
        )
    chosen = (query.name, query.state, query.attributes, query.created_after, query.created_before)
    if all(part is None for part in (*chosen, query.updated_after, query.updated_before)):
        raise errors.InvalidFilterError(
            "a bulk action needs a filter (name, state, attributes, createdAfter/createdBefore): an empty "
            "one would act on every actor of every type",
            field="filter",
        )
    if not dry_run:
        audit.action_record("-", audit.named(action, True), who, reason)  # a bad who: refused up front
    result = BulkResult()
    now = runtime.store.now()
    for record in iter_actors(runtime, query, batch=batch):
        result.matched += 1
        actor_id = record.actor_id
        if dry_run:
            try:
                if check is not None:
                    check(actor_id)
                why = would_change(runtime, action, record, now)
            except errors.RivetWorkflowsError as exc:
                why = repairs.reason(exc)
                result.refused[actor_id] = why
            if why is None:
                result.changed += 1
                result.actor_ids.append(actor_id)
            else:
                result.unchanged += 1
        else:
            outcome = bulk.act_on(runtime, action, actor_id, who=who, reason=reason, check=check)
            if outcome.outcome == bulk.CHANGED:
                result.changed += 1
                result.actor_ids.append(actor_id)
            else:
                result.unchanged += 1
                if outcome.outcome == bulk.REFUSED:
                    result.refused[actor_id] = outcome.reason
        if progress is not None:
            progress(result.matched)
    return result


def count(runtime: RuntimeRole, query: ports.ActorFilter) -> int:
    """How many actors ``query`` selects (``Store.count_actors``: one query), for a progress bar's total."""
    return runtime.store.count_actors(query)
