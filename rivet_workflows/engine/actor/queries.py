"""Queries: read-only handlers that answer from the last committed state without waiting (DESIGN.md section 13).

An action waits while a step holds the actor's step lock (it may change the state the step is changing); a
query never does: it reads the actor's row as last committed (no lock, no transaction of its own) and runs
``fn(c, *args)`` on a read-only context, as Temporal's queries do. Anything that would write (``c.state =``,
``c.state["x"] = ...``, ``c.vars = ...``, ``broadcast``, ``queue.send``, ``destroy``, ``cron``/``schedule``)
raises ``StepOnlyError``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, NoReturn

from ..model import errors, serde
from .actor_context import ActorContext, call_maybe_async

if TYPE_CHECKING:
    from ..model.definitions import ActorDefinition
    from ..model.roles import RuntimeRole


def _refuse(what: str) -> NoReturn:
    raise errors.StepOnlyError(
        f"a query is read-only: {what} is not allowed (use an action, or a step of the workflow, to change "
        "the actor)",
        member=what,
    )


class ReadOnlyDict(dict):
    """A ``dict`` of a query's state whose mutators raise ``StepOnlyError`` (nested values read-only too)."""

    __slots__ = ()

    def _refuse(self, *args: Any, **kwargs: Any) -> NoReturn:
        _refuse("changing c.state")

    __setitem__ = __delitem__ = update = pop = popitem = clear = setdefault = __ior__ = _refuse  # type: ignore[assignment]


class ReadOnlyList(list):
    """A ``list`` of a query's state whose mutators raise ``StepOnlyError``."""

    __slots__ = ()

    def _refuse(self, *args: Any, **kwargs: Any) -> NoReturn:
        _refuse("changing c.state")

    __setitem__ = __delitem__ = append = extend = insert = pop = remove = clear = sort = reverse = _refuse  # type: ignore[assignment]
    __iadd__ = __imul__ = _refuse  # type: ignore[assignment]


def read_only(value: Any) -> Any:
    """A read-only copy of a decoded state value: dicts and lists become ``ReadOnlyDict``/``ReadOnlyList``
    (recursively); sets become frozensets; other values are kept (they are fresh copies already)."""
    if type(value) is dict:
        copy = ReadOnlyDict()
        for k, v in value.items():
            dict.__setitem__(copy, k, read_only(v))
        return copy
    if type(value) is list:
        items = ReadOnlyList()
        list.extend(items, (read_only(v) for v in value))
        return items
    if type(value) is set:
        return frozenset(value)
    return value


class QueryContext(ActorContext):
    """``c`` of a query: ``state`` (the last committed state, read-only), ``vars`` (this process's vars, or
    fresh initial vars when it has none; not kept), ``key``, ``actor_id``, ``name`` and ``client()``."""

    @property
    def state(self) -> Any:
        """The actor's state as last committed (read-only)."""
        return self._state

    @state.setter
    def state(self, value: Any) -> None:
        _refuse("assigning c.state")

    @property
    def vars(self) -> Any:
        """The actor's vars in this process (fresh initial vars, not kept, when it has none)."""
        return self._vars

    @vars.setter
    def vars(self, value: Any) -> None:
        _refuse("assigning c.vars")

    @property
    def queue(self) -> Any:
        """Raises ``StepOnlyError``: a query sends nothing."""
        _refuse("c.queue")

    @queue.setter
    def queue(self, value: Any) -> None:  # ActorContext.__init__ sets it
        pass

    @property
    def cron(self) -> Any:
        """Raises ``StepOnlyError``."""
        _refuse("c.cron")

    @property
    def schedule(self) -> Any:
        """Raises ``StepOnlyError``."""
        _refuse("c.schedule")

    def broadcast(self, name: str, *args: Any) -> None:
        """Raises ``StepOnlyError``."""
        _refuse("c.broadcast()")

    def destroy(self) -> None:
        """Raises ``StepOnlyError``."""
        _refuse("c.destroy()")


def run_query(
    runtime: RuntimeRole,
    definition: ActorDefinition,
    actor_id: str,
    key: list,
    fn: Callable[..., Any],
    args: list,
) -> Any:
    """Run the query ``fn(c, *args)`` on the actor's last committed state and return a serialised copy of
    its result; ``args`` are already round-tripped. Never waits for a running step (one read of the actor's
    row, no lock). Raises ``ActorNotFoundError``, ``StepOnlyError`` for a write, ``SerializationError``/
    ``PayloadTooLargeError`` for the result, or what ``fn`` raised."""
    record = runtime.store.get_actor(actor_id)
    c = QueryContext(runtime, definition, actor_id, key, read_only(record.state))
    vars = runtime.vars.get(actor_id, _NONE)
    c._vars = definition.initial_vars(c) if vars is _NONE else vars
    result = call_maybe_async(fn, c, *args)
    return serde.roundtrip(result, where="query result", max_bytes=runtime.settings.max_payload_bytes)


_NONE: Any = object()
