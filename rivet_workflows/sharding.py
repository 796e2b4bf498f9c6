"""Which databases the readers outside the store look at (DESIGN.md section 21): the admin, the dashboard,
``manage.py rivet list|check|recover|prune``, the API's helpers and the WebSocket consumer query the models
directly, so they ask here for the shard aliases (``RIVET_WORKFLOWS["SHARDS"]``) and run their query on each,
or on the one alias an actor id names. Unsharded, ``aliases()`` is ``("default",)`` and every query is the
one it was.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any, TypeVar

T = TypeVar("T")


def aliases() -> tuple[str, ...]:
    """The database aliases holding actors: ``SHARDS``, or ``("default",)`` when it is unset."""
    from .conf import rivet_settings

    return rivet_settings.shard_aliases()


def sharded() -> bool:
    """True when ``SHARDS`` names more than one alias."""
    from .conf import rivet_settings

    return rivet_settings.sharded


def alias_for_actor(actor_id: str) -> str:
    """The alias holding the actor ``actor_id`` (its id's bucket; the first alias for an id without one)."""
    from .conf import rivet_settings

    if not rivet_settings.sharded:
        return aliases()[0]
    return rivet_settings.shard_map().alias_for_actor(actor_id)


def first() -> str:
    """The first shard's alias: where the schedules stored as data live (and every actor when unsharded)."""
    return aliases()[0]


def shard_error(alias: str, exc: BaseException) -> BaseException | None:
    """What to raise instead of ``exc``, raised by a query on the shard ``alias``: a
    ``StoreUnavailableError`` naming it (``shard``) for a database that cannot be reached or does not exist
    (Django's ``OperationalError``/``InterfaceError``) or has no tables of this app (the message says
    ``manage.py migrate --database <alias>``); None: raise ``exc`` as it is."""
    from django.db import InterfaceError, OperationalError

    from .engine.model import errors
    from .storage import sharded

    named = sharded.shard_error(alias, exc)
    if named is None and isinstance(exc, (OperationalError, InterfaceError)):
        named = errors.StoreUnavailableError(
            f"shard {alias!r}: the database is unavailable: {type(exc).__name__}: {str(exc).strip()}",
            shard=alias,
        )
    return named


def on(alias: str, query: Callable[[str], Iterable[T]]) -> list[T]:
    """``list(query(alias))``; a failure of that database as ``shard_error`` names it."""
    try:
        return list(query(alias))
    except Exception as exc:
        named = shard_error(alias, exc)
        if named is None:
            raise
        raise named from exc


def each(
    query: Callable[[str], Iterable[T]], *, on_down: Callable[[str, BaseException], None] | None = None
) -> list[T]:
    """``query(alias)`` (an iterable: a queryset, a list) on every shard, concatenated in shard order.

    A shard whose database cannot be reached raises ``StoreUnavailableError`` naming it (``shard_error``);
    with ``on_down`` it is skipped instead and ``on_down(alias, error)`` called (say so to the user)."""
    from .engine.model import errors

    found: list[T] = []
    for alias in aliases():
        try:
            found += on(alias, query)
        except errors.StoreUnavailableError as exc:
            if on_down is None:
                raise
            on_down(alias, exc)
    return found


def total(query: Callable[[str], Any], *, on_down: Callable[[str, BaseException], None] | None = None) -> int:
    """The sum of ``query(alias)`` (a count) over the shards; a down shard as in ``each``."""
    return sum(each(lambda alias: [query(alias)], on_down=on_down))


def children(store: Any, actor_id: str) -> tuple[list[Any], list[str]]:
    """The children of ``actor_id`` (``ports.ActorRecord``, oldest first) on the shards that can be reached
    and the aliases of the shards that cannot (``ShardedStore.reachable_children``; ``[]`` unsharded): an
    actor's page works while another shard is down and says which one it could not read."""
    reachable = getattr(store, "reachable_children", None)
    if reachable is None:
        return store.list_children(actor_id), []
    return reachable(actor_id)


def note_down(request: Any) -> Callable[[str, BaseException], None]:
    """An ``on_down`` for a page: one admin warning message per down shard and request, saying what the
    page leaves out."""

    def note(alias: str, exc: BaseException) -> None:
        noted = request.__dict__.setdefault("_rivet_down_shards", set())
        if alias in noted:
            return
        noted.add(alias)
        from django.contrib import messages

        messages.warning(
            request,
            f"Shard {alias!r} is unavailable: its actors are left out of these lists and counts ({exc}).",
        )

    return note
