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


def each(query: Callable[[str], Iterable[T]]) -> list[T]:
    """``query(alias)`` (an iterable: a queryset, a list) on every shard, concatenated in shard order."""
    return [row for alias in aliases() for row in query(alias)]


def total(query: Callable[[str], Any]) -> int:
    """The sum of ``query(alias)`` (a count) over the shards."""
    return sum(query(alias) for alias in aliases())
