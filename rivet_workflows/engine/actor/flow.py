"""The flow controls recorded on a new actor: its ``ports.Flow`` from the type's definition (DESIGN.md 12)."""

from __future__ import annotations

import copy
from typing import TYPE_CHECKING, Any

from ..model import ports
from .actor_context import ActorContext

if TYPE_CHECKING:
    from ..model.definitions import ActorDefinition
    from ..model.roles import RuntimeRole


def flow_of(runtime: RuntimeRole, definition: ActorDefinition, key: list, state: Any) -> ports.Flow | None:
    """The ``ports.Flow`` recorded on a new actor of ``definition`` (None when the type has no flow control).

    ``Concurrency.key(c)`` and a callable ``priority(c)`` are called once, here, on an actor context with the new actor's ``key`` and initial
    ``state`` (no actor id yet); its value's text is the concurrency group (``str(value)``; None -> ``""``).
    A rate limit without a keyed concurrency limits the whole type (group ``""``). DESIGN.md section 12.
    """
    if not definition.has_flow:
        return None
    concurrency, rate = definition.concurrency, definition.rate_limit

    def context() -> ActorContext:
        return ActorContext(runtime, definition, "", key, copy.deepcopy(state))

    group: str | None = None
    if concurrency is not None or rate is not None:
        group = ""
        if concurrency is not None and concurrency.key is not None:
            value = concurrency.key(context())
            group = "" if value is None else str(value)
    priority = definition.priority
    if callable(priority):
        priority = priority(context())
        if isinstance(priority, bool) or not isinstance(priority, int):
            raise TypeError(f"priority(c) of {definition.name!r} must return an int, got {priority!r}")
    return ports.Flow(
        concurrency_key=group,
        concurrency_limit=None if concurrency is None else concurrency.limit,
        rate_count=None if rate is None else rate.count,
        rate_per=None if rate is None else rate.per,
        priority=priority,
        timeout=definition.timeout,
    )
