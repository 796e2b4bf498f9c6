"""The relay: delivers the messages steps sent to actors on another shard (DESIGN.md section 21).

A step's send to an actor whose shard is not its own is committed with the step as a relay row on the
sender's shard (``Commit.relay``, written by the store in the commit's transaction). ``relay_once`` reads
each shard's pending rows in id order, sends each to its target's shard with the deduplication id
``relay:{alias}:{row id}`` (unique per target actor there: a second delivery of the same row stores
nothing) and then marks the rows delivered on the sender's shard. So:

* exactly once: a crash (or a racing relay) between the target's commit and the mark re-sends the row on
  the next pass, and the target stores nothing the second time;
* in order per (sender, target): rows of one target are sent in id order, and when its shard cannot be
  reached (a database error) every later row for it waits for a later pass (``deferred``);
* nothing is lost: a row leaves the pending set only when delivered, or when the target refused it for
  good (its workflow is completed or cancelled, the actor is gone): then it is marked ``failed`` with the
  error, logged at ERROR and kept for an operator to see.

A row of kind ``create`` (a step body's ``get_or_create`` of an actor on another shard, ``RelayCreate``) is
delivered through the runtime's client (``deliver_create``: the same ``create_state``, flow, ``on_create``,
parent link and due wake as a direct ``get_or_create``), idempotently: an actor that exists is kept. It
precedes the rows sent after it to the same target, so they find the actor. A create that fails for any
reason but an unreachable database (an unknown type, ``on_create`` raising, a key held under another id)
is failed for good and logged; the later sends to that target then fail at delivery too.

Driven by the Celery task ``rivet_workflows.relay`` (queued after a commit that wrote relay rows:
``Runtime.relay_soon``), by every sweep when sharded (leftovers after a crash) and by ``drain()``. Pure
engine code.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from ..model import errors, ports

if TYPE_CHECKING:
    from ..model.roles import RuntimeRole

logger = logging.getLogger("rivet_workflows")

#: rows read per shard and page
DEFAULT_LIMIT = 500


@dataclass
class RelayReport:
    """What one ``relay_once`` pass did: rows ``delivered`` (sent, or found sent already, and marked),
    ``failed`` (refused for good by the target, marked failed), ``deferred`` (left pending for a later pass:
    the target's shard could not be reached, or an earlier row for the same target could not), ``woken``
    (target actor ids handed to ``wake``, each once) and ``unreachable`` (source aliases whose own rows could
    not be read or marked this pass)."""

    delivered: int = 0
    failed: int = 0
    deferred: int = 0
    woken: list[str] = field(default_factory=list)
    unreachable: list[str] = field(default_factory=list)


def relay_dedup_id(source_alias: str, row_id: int) -> str:
    """The deduplication id a relay row is delivered with: ``"relay:{source_alias}:{row_id}"``."""
    return f"relay:{source_alias}:{row_id}"


def refused_for_good(exc: BaseException) -> bool:
    """True when a delivery failed because the target refused the message (the actor is gone, its workflow
    is completed or cancelled, the body is not storable there): trying again changes nothing. False for a
    failure of the target's database itself (``StoreUnavailableError``, a driver's error): a later pass
    tries again."""
    if isinstance(exc, errors.StoreUnavailableError):
        return False
    return isinstance(exc, errors.STORE_DOMAIN_ERRORS) or errors.is_data_error(exc)


def relay_once(
    source_stores: Mapping[str, ports.Store],
    store_for_actor: Callable[[str], ports.Store],
    limit: int = DEFAULT_LIMIT,
    *,
    wake: Callable[[str], None] | None = None,
    create: Callable[[ports.RelayRecord], None] | None = None,
) -> RelayReport:
    """One relay pass over every shard's pending rows (see the module docstring).

    ``source_stores``: shard alias -> that shard's store (``Store.relay_sources()``); the alias is part of
    each row's deduplication id, so keep it stable. ``store_for_actor(actor_id)``: the store holding the
    target actor (a sharded store routes by itself: ``lambda _id: store``). ``limit``: rows read per page
    (>= 1); a shard's pages are read, each past the last, until one is short. ``wake(actor_id)``: called
    once per target the delivery made due (its ``wake_at`` has come and no live lease is held), e.g.
    ``Runtime.wake``; None: nobody is told (the sweep finds them). ``create(row)``: creates the actor of a
    row of kind ``create`` (``deliver_create`` bound to a runtime); None: such rows wait (deferred).

    Never raises for a delivery or a shard that cannot be reached: an unreachable source is reported in
    ``unreachable`` and logged, its rows wait. ``ValueError`` for ``limit`` < 1. Safe to run from several
    processes at once (a row two relays send is stored once on the target).
    """
    if not isinstance(limit, int) or limit < 1:
        raise ValueError(f"limit must be an int >= 1, not {limit!r}")
    report = RelayReport()
    for alias, source in source_stores.items():
        try:
            _relay_source(alias, source, store_for_actor, limit, wake, create, report)
        except Exception as exc:  # the source shard itself: its rows stay pending for the next pass
            logger.warning("relay: shard %r could not be read or marked (%s); its rows wait", alias, exc)
            report.unreachable.append(alias)
    return report


def _relay_source(
    alias: str,
    source: ports.Store,
    store_for_actor: Callable[[str], ports.Store],
    limit: int,
    wake: Callable[[str], None] | None,
    create: Callable[[ports.RelayRecord], None] | None,
    report: RelayReport,
) -> None:
    """Deliver the pending rows of one source shard, page by page, in id order (a page past the last one
    read: rows deferred for a target that is down never hold the others back)."""
    blocked: set[str] = set()  # targets whose earlier row could not be delivered this pass
    after = 0
    while True:
        rows = source.relay_pending(limit, after=after)
        delivered: list[int] = []
        deferred = 0
        for row in rows:
            if row.target_actor_id in blocked:
                deferred += 1
                continue
            creating = row.kind == ports.RELAY_CREATE
            outcome = _create(row, create) if creating else _deliver(alias, row, store_for_actor)
            error = outcome.error
            if error is None:  # sent (or found sent): marked with the page
                delivered.append(row.id)
                if not creating:  # a create hands a new workflow to the dispatcher itself
                    _hand_over(row.target_actor_id, store_for_actor, wake, report, outcome.hint)
                continue
            if outcome.permanent:
                logger.error(
                    "relay: %s %s of actor %s to actor %s (%s %r) refused for good: %s",
                    "create" if creating else "message",
                    row.id,
                    row.source_actor_id,
                    row.target_actor_id,
                    "type" if creating else "queue",
                    row.name,
                    error,
                )
                source.relay_mark_failed(row.id, error, True)
                report.failed += 1
                continue
            logger.warning(
                "relay: actor %s cannot be reached (%s); its messages from shard %r wait",
                row.target_actor_id,
                error,
                alias,
            )
            blocked.add(row.target_actor_id)
            deferred += 1
            try:
                source.relay_mark_failed(row.id, error, False)
            except Exception:  # counting the attempt is best effort; the row stays pending either way
                logger.debug("relay: could not count the attempt of row %s", row.id, exc_info=True)
        source.relay_mark_delivered(delivered)
        report.delivered += len(delivered)
        report.deferred += deferred
        if len(rows) < limit:
            return
        after = rows[-1].id


@dataclass
class _Outcome:
    """A delivery's outcome: ``error`` None when stored (or stored before), with the store's dispatcher
    ``hint`` (``send_and_check``); else the error's text and whether the target refused it for good."""

    hint: bool | None = None
    error: str | None = None
    permanent: bool = False


def _deliver(alias: str, row: ports.RelayRecord, store_for_actor: Callable[[str], ports.Store]) -> _Outcome:
    """Send ``row`` to its target's store with its deduplication id (``relay_dedup_id``)."""
    try:
        target = store_for_actor(row.target_actor_id)
        _message, hint = target.send_and_check(
            row.target_actor_id,
            row.name,
            row.body,
            row.completable,
            dedup_id=relay_dedup_id(alias, row.id),
        )
    except Exception as exc:
        return _Outcome(error=f"{type(exc).__name__}: {exc}", permanent=refused_for_good(exc))
    return _Outcome(hint=hint)


def _create(row: ports.RelayRecord, create: Callable[[ports.RelayRecord], None] | None) -> _Outcome:
    """Create the actor of the ``create`` row ``row`` with ``create``; failed for good unless the database
    could not be reached (``StoreUnavailableError``, a driver's ``OperationalError``/``InterfaceError``)."""
    if create is None:
        return _Outcome(error="no runtime to create actors in this relay pass; a worker's relay will")
    try:
        create(row)
    except Exception as exc:
        unreachable = isinstance(exc, errors.StoreUnavailableError) or any(
            cls.__name__ in ("OperationalError", "InterfaceError") for cls in type(exc).__mro__
        )
        return _Outcome(error=f"{type(exc).__name__}: {exc}", permanent=not unreachable)
    return _Outcome()


def deliver_create(runtime: RuntimeRole, row: ports.RelayRecord) -> None:
    """Create the actor a relay row of kind ``create`` names through ``runtime``'s client, as the step
    body's ``get_or_create(key, input)`` would have directly: ``row.name`` is the type, ``row.body``
    ``{"key": [...], "input": ...}``, ``row.source_actor_id`` the parent. An actor that exists already is
    kept (a row delivered twice creates once). ``ActorAlreadyExistsError`` when the key is held by an
    actor of another id (made before sharding) than the one the step was given (``row.target_actor_id``);
    what ``get_or_create`` raises (an unknown type, ``on_create``'s error, ``StoreUnavailableError``)."""
    body = row.body if isinstance(row.body, dict) else {}
    types = runtime.client(parent_id=row.source_actor_id)[row.name]
    handle = types.get_or_create(body.get("key"), body.get("input"))
    if handle.actor_id != row.target_actor_id:
        raise errors.ActorAlreadyExistsError(
            f"actor {row.name!r} with key {handle.key!r} is {handle.actor_id}, not {row.target_actor_id}",
            name=row.name,
            key=handle.key,
        )


def _hand_over(
    actor_id: str,
    store_for_actor: Callable[[str], ports.Store],
    wake: Callable[[str], None] | None,
    report: RelayReport,
    hint: bool | None,
) -> None:
    """Call ``wake(actor_id)`` (once per pass) when the delivery made the target due: the store's hint, or,
    when it gave none, the target's ``wake_at`` has come and no live lease is held (``delivery.wake_if_due``)."""
    if wake is None or actor_id in report.woken:
        return
    if hint is None:
        try:
            store = store_for_actor(actor_id)
            record = store.get_actor(actor_id)
            now = store.now()
        except Exception:  # gone meanwhile, or the shard went away: the sweep finds it
            return
        leased = (
            record.lease_owner is not None
            and record.lease_expires_at is not None
            and record.lease_expires_at > now
        )
        hint = record.wake_at is not None and record.wake_at <= now and not leased
    if hint:
        report.woken.append(actor_id)
        try:
            wake(actor_id)
        except Exception:  # a hint only: the sweep catches up
            logger.exception("relay: waking actor %s failed; the sweep will", actor_id)


def relay_runtime(runtime: RuntimeRole, limit: int = DEFAULT_LIMIT) -> RelayReport:
    """One ``relay_once`` pass for a runtime: the sources are ``runtime.store.relay_sources()`` (one entry
    per shard), each row is delivered through ``runtime.store`` (a sharded store routes the send by the
    target's id), creates go through ``deliver_create`` and targets made due are handed to
    ``runtime.wake``. Clears ``runtime.relay_wanted`` first
    (a commit relaying meanwhile sets it again). What the Celery task ``rivet_workflows.relay``, the sweep
    and ``drain`` run."""
    runtime.relay_wanted = False
    store = runtime.store
    return relay_once(
        store.relay_sources(),
        lambda _actor_id: store,
        limit,
        wake=runtime.wake,
        create=lambda row: deliver_create(runtime, row),
    )
