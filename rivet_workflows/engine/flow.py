"""The flow controls recorded on a new actor: its ``ports.Flow`` from the type's definition (DESIGN.md 12)."""

from __future__ import annotations

import copy
from typing import TYPE_CHECKING, Any

from . import ports
from .actor_context import ActorContext

if TYPE_CHECKING:
    from .definitions import ActorDefinition
    from .roles import RuntimeRole


def flow_of(runtime: RuntimeRole, definition: ActorDefinition, key: list, state: Any) -> ports.Flow | None:
    """The ``ports.Flow`` recorded on a new actor of ``definition`` (None when the type has no flow control).

    ``Concurrency.key(c)`` is called once, here, on an actor context with the new actor's ``key`` and initial
    ``state`` (no actor id yet); its value's text is the concurrency group (``str(value)``; None -> ``""``).
    A rate limit without a keyed concurrency limits the whole type (group ``""``). DESIGN.md section 12.
    """
    if not definition.has_flow:
        return None
    concurrency, rate = definition.concurrency, definition.rate_limit
    group: str | None = None
    if concurrency is not None or rate is not None:
        group = ""
        if concurrency is not None and concurrency.key is not None:
            c = ActorContext(runtime, definition, "", key, copy.deepcopy(state))
            value = concurrency.key(c)
            group = "" if value is None else str(value)
    return ports.Flow(
        concurrency_key=group,
        concurrency_limit=None if concurrency is None else concurrency.limit,
        rate_count=None if rate is None else rate.count,
        rate_per=None if rate is None else rate.per,
        priority=definition.priority,
        timeout=definition.timeout,
    )
