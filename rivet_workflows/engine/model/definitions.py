"""Actor and workflow definitions, queue/event declarations, the registry and loop results (DESIGN.md section 2)."""

from __future__ import annotations

import copy
import inspect
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import timedelta
from types import SimpleNamespace
from typing import TYPE_CHECKING, Any

from . import errors

if TYPE_CHECKING:
    from .roles import ClientRole, RuntimeRole


# --- declarations ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class QueueDefinition:
    """A declared queue (``queue()``). ``description`` is free text shown by the inspector."""

    description: str | None = None


@dataclass(frozen=True)
class EventDefinition:
    """A declared broadcast event (``event()``). ``description`` is free text shown by the inspector."""

    description: str | None = None


def queue(description: str | None = None) -> QueueDefinition:
    """Declare a queue for ``actor(queues={"name": queue()})`` (spec: "Queues").

    Once an actor declares any queue, sending to an undeclared name raises ``QueueNotFoundError``.
    """
    return QueueDefinition(description)


def event(description: str | None = None) -> EventDefinition:
    """Declare a broadcast event for ``actor(events={"name": event()})`` (spec: error hook example)."""
    return EventDefinition(description)


# --- flow controls (DESIGN.md section 12) -----------------------------------------------------------


@dataclass(frozen=True)
class Concurrency:
    """``actor(concurrency=Concurrency(limit, key))``: at most ``limit`` actors of the type hold a lease at
    once across all workers; with ``key`` (``key(c) -> str``, evaluated once when the actor is created, on
    an actor context with ``c.key``, ``c.name`` and the initial ``c.state``) at most ``limit`` per key value.
    ``concurrency=N`` is ``Concurrency(N)``. ``ValueError`` for a limit below 1."""

    limit: int
    key: Callable[[Any], Any] | None = None

    def __post_init__(self) -> None:
        if isinstance(self.limit, bool) or not isinstance(self.limit, int) or self.limit < 1:
            raise ValueError(f"concurrency limit must be an int >= 1, got {self.limit!r}")
        if self.key is not None and not callable(self.key):
            raise TypeError("Concurrency key must be a callable key(c)")


@dataclass(frozen=True)
class RateLimit:
    """``actor(rate_limit=RateLimit(count, per))``: at most ``count`` runs of the type start in any window
    of ``per`` seconds (float or timedelta), per key value when the type's ``Concurrency`` has a key.
    ``ValueError`` for a count below 1 or a window that is not positive."""

    count: int
    per: float

    def __post_init__(self) -> None:
        if isinstance(self.count, bool) or not isinstance(self.count, int) or self.count < 1:
            raise ValueError(f"rate limit count must be an int >= 1, got {self.count!r}")
        per = self.per.total_seconds() if isinstance(self.per, timedelta) else self.per
        if isinstance(per, bool) or not isinstance(per, (int, float)) or per <= 0:
            raise ValueError(f"rate limit window must be positive seconds, got {self.per!r}")
        object.__setattr__(self, "per", float(per))


def _seconds(value: Any, label: str) -> float | None:
    if value is None:
        return None
    seconds = value.total_seconds() if isinstance(value, timedelta) else value
    if isinstance(seconds, bool) or not isinstance(seconds, (int, float)) or seconds <= 0:
        raise ValueError(f"{label} must be positive seconds (float or timedelta), got {value!r}")
    return float(seconds)


# --- loops ----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class LoopContinue:
    """Result of a loop body that wants another iteration, carrying the next ``state``."""

    state: Any = None


@dataclass(frozen=True)
class LoopBreak:
    """Result of a loop body that ends the loop; ``value`` becomes the result of ``ctx.loop``."""

    value: Any = None


class Loop:
    """Constructors for loop body results (ENGINE-SEMANTICS.md section 4)."""

    @staticmethod
    def continue_(state: Any = None) -> LoopContinue:
        """Run another iteration with ``state`` (for a stateless loop, leave it None)."""
        return LoopContinue(state)

    @staticmethod
    def break_(value: Any = None) -> LoopBreak:
        """Stop the loop; ``ctx.loop`` returns ``value``."""
        return LoopBreak(value)


# --- workflow handler and actor definition ----------------------------------------------------------


class WorkflowHandler:
    """A workflow run function with its error hook, used as ``actor(run=...)``.

    ``fn`` is ``async def run(ctx)`` (the workflow context); ``on_error`` is ``on_error(c, event)`` (sync or
    async) receiving an ``ActorContext`` and a ``WorkflowErrorEvent`` dict (ENGINE-SEMANTICS.md section 8).
    """

    __slots__ = ("fn", "on_error")

    def __init__(self, fn: Callable[..., Any], on_error: Callable[..., Any] | None = None) -> None:
        if not callable(fn):
            raise TypeError(f"workflow run function must be callable, got {type(fn).__name__}")
        if on_error is not None and not callable(on_error):
            raise TypeError(f"on_error must be callable, got {type(on_error).__name__}")
        self.fn = fn
        self.on_error = on_error

    def __repr__(self) -> str:
        return f"WorkflowHandler({getattr(self.fn, '__qualname__', self.fn)!r})"


def arity(fn: Callable[..., Any]) -> int:
    """Number of positional parameters ``fn`` accepts (a large number for ``*args``)."""
    try:
        params = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):  # builtins without a signature
        return 1
    count = 0
    for p in params:
        if p.kind is inspect.Parameter.VAR_POSITIONAL:
            return 99
        if p.kind in (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD):
            count += 1
    return count


def _declarations(value: Any, kind: type, label: str) -> dict[str, Any]:
    if value is None:
        return {}
    if isinstance(value, Mapping):
        out = {}
        for name, decl in value.items():
            if not isinstance(name, str) or not name:
                raise ValueError(f"{label} names must be non-empty strings, got {name!r}")
            out[name] = decl if decl is not None else kind()
        return out
    if isinstance(value, (list, tuple, set, frozenset)):
        return {name: kind() for name in value}
    raise TypeError(f"{label} must be a dict of name -> {label[:-1]}() or a list of names")


@dataclass(eq=False)
class ActorDefinition:
    """What ``actor(...)`` / ``workflow(run=...)`` return (DESIGN.md section 2).

    Fields: ``state``/``vars`` initial values (deep-copied per actor), ``create_state(input)`` or
    ``create_state(info, input)`` (``info`` has ``.name`` and ``.key``), ``create_vars()`` or
    ``create_vars(c)``, ``queues``/``events`` (dict name -> declaration), ``actions`` (dict name ->
    ``fn(c, *args)``, sync or async), ``queries`` (dict name -> ``fn(c, *args)``, read-only), hooks
    ``on_create(c[, input])``, ``on_wake(c)``, ``on_sleep(c)``, ``on_destroy(c)``, ``run`` (a
    ``WorkflowHandler`` or None), ``options`` (dict), ``name`` (set by ``setup``; None before), and the flow
    controls ``concurrency`` (``Concurrency``), ``rate_limit`` (``RateLimit``), ``priority`` (int, or
    ``priority(c) -> int`` evaluated once per new actor) and
    ``timeout`` (seconds from creation, float; DESIGN.md 12); ``parent_close`` (``"abandon"`` or
    ``"cancel"``: what becomes of an actor of the type when the workflow of the actor that created it
    fails or is cancelled; DESIGN.md section 20).
    """

    state: Any = None
    create_state: Callable[..., Any] | None = None
    vars: Any = None
    create_vars: Callable[..., Any] | None = None
    queues: dict[str, QueueDefinition] = field(default_factory=dict)
    events: dict[str, EventDefinition] = field(default_factory=dict)
    actions: dict[str, Callable[..., Any]] = field(default_factory=dict)
    queries: dict[str, Callable[..., Any]] = field(default_factory=dict)
    on_create: Callable[..., Any] | None = None
    on_wake: Callable[..., Any] | None = None
    on_sleep: Callable[..., Any] | None = None
    on_destroy: Callable[..., Any] | None = None
    run: WorkflowHandler | None = None
    options: dict[str, Any] = field(default_factory=dict)
    name: str | None = None
    concurrency: Concurrency | None = None
    rate_limit: RateLimit | None = None
    priority: int | Callable[[Any], int] = 0
    timeout: float | None = None
    parent_close: str = "abandon"

    @property
    def has_workflow(self) -> bool:
        """True when the actor has a run handler (it is created due and driven by the executor)."""
        return self.run is not None

    def initial_state(self, input: Any = None, *, key: list | None = None) -> Any:
        """A fresh initial state: ``create_state`` called with ``input`` (or ``(info, input)``), else a deep
        copy of ``state`` (None when neither is given)."""
        if self.create_state is not None:
            if arity(self.create_state) >= 2:
                info = SimpleNamespace(name=self.name, key=list(key or []))
                return self.create_state(info, input)
            if arity(self.create_state) == 1:
                return self.create_state(input)
            return self.create_state()
        return copy.deepcopy(self.state)

    def initial_vars(self, c: Any = None) -> Any:
        """Fresh ephemeral vars: ``create_vars(c)`` (or ``create_vars()``), else a deep copy of ``vars``."""
        if self.create_vars is not None:
            return self.create_vars(c) if arity(self.create_vars) >= 1 else self.create_vars()
        return copy.deepcopy(self.vars)

    def get_action(self, name: str) -> Callable[..., Any]:
        """The action ``name``; raises ``ActionNotFoundError`` (metadata ``actor``, ``action``)."""
        try:
            return self.actions[name]
        except KeyError:
            raise errors.ActionNotFoundError(
                f"actor {self.name!r} has no action {name!r}", actor=self.name, action=name
            ) from None

    @property
    def has_flow(self) -> bool:
        """True when the type has a flow control that must be recorded on its actors' rows."""
        return bool(self.concurrency or self.rate_limit or self.priority or self.timeout)

    def get_query(self, name: str) -> Callable[..., Any]:
        """The query ``name``; raises ``QueryNotFoundError`` (metadata ``actor``, ``query``)."""
        try:
            return self.queries[name]
        except (KeyError, TypeError):
            raise errors.QueryNotFoundError(
                f"actor {self.name!r} has no query {name!r}", actor=self.name, query=str(name)
            ) from None

    def check_queue(self, name: str) -> None:
        """Raise ``QueueNotFoundError`` if the actor declares queues and ``name`` is not one of them, and
        ``NoWorkflowError`` if the actor has no workflow to receive the message (no run function)."""
        if not isinstance(name, str) or not name:
            raise errors.QueueNotFoundError(f"invalid queue name {name!r}", actor=self.name, queue=str(name))
        if self.run is None:
            raise errors.NoWorkflowError(
                f"actor type {self.name!r} has no workflow (no run function): nothing would ever receive "
                f"a message on queue {name!r}; call an action instead",
                actor=self.name,
                queue=name,
            )
        if self.queues and name not in self.queues:
            raise errors.QueueNotFoundError(
                f"actor {self.name!r} declares no queue {name!r} (declared: {sorted(self.queues)})",
                actor=self.name,
                queue=name,
            )

    def __repr__(self) -> str:
        return f"<ActorDefinition {self.name or '(unregistered)'}>"


def actor(
    *,
    state: Any = None,
    create_state: Callable[..., Any] | None = None,
    vars: Any = None,
    create_vars: Callable[..., Any] | None = None,
    queues: Mapping[str, QueueDefinition] | list[str] | None = None,
    events: Mapping[str, EventDefinition] | list[str] | None = None,
    actions: Mapping[str, Callable[..., Any]] | None = None,
    on_create: Callable[..., Any] | None = None,
    on_wake: Callable[..., Any] | None = None,
    on_sleep: Callable[..., Any] | None = None,
    on_destroy: Callable[..., Any] | None = None,
    run: WorkflowHandler | Callable[..., Any] | None = None,
    options: Mapping[str, Any] | None = None,
    queries: Mapping[str, Callable[..., Any]] | None = None,
    concurrency: int | Concurrency | None = None,
    rate_limit: RateLimit | None = None,
    priority: int | Callable[[Any], int] = 0,
    timeout: float | timedelta | None = None,
    parent_close: str = "abandon",
) -> ActorDefinition:
    """Define an actor type (DESIGN.md section 2, ENGINE-SEMANTICS.md section 10).

    ``run`` is a ``WorkflowHandler`` (from ``workflow(fn)``) or a bare ``async def run(ctx)`` (wrapped).
    ``queries`` maps names to read-only handlers ``fn(c, *args)``: they read the last committed state and
    vars without waiting for a running step (``handle.query``; DESIGN.md section 13).
    Flow controls (DESIGN.md section 12), enforced by the store when an actor is claimed:
    ``concurrency`` (an int N or ``Concurrency(limit, key)``: at most N actors of the type, or per key
    value, hold a lease at once), ``rate_limit`` (``RateLimit(count, per)``: at most ``count`` run starts
    per ``per`` seconds), ``priority`` (int, default 0: among due actors higher is claimed first; or
    ``priority(c) -> int``, evaluated once when an actor is created, like ``Concurrency.key``) and
    ``timeout`` (seconds or timedelta from the actor's creation: the workflow then fails with
    ``WorkflowTimeoutError``, also while it sleeps or waits). ``parent_close`` (DESIGN.md section 20):
    ``"abandon"`` (default) leaves an actor of this type running when the workflow of the actor whose run
    created it (its parent) fails or is cancelled; ``"cancel"`` cancels its workflow then (audited).
    ``ValueError``/``TypeError`` for bad values.
    Giving both ``state`` and ``create_state`` (or ``vars`` and ``create_vars``) raises ``ValueError``;
    a non-callable action, query or hook raises ``TypeError``.
    """
    if state is not None and create_state is not None:
        raise ValueError("give either state or create_state, not both")
    if vars is not None and create_vars is not None:
        raise ValueError("give either vars or create_vars, not both")
    action_map = dict(actions or {})
    query_map = dict(queries or {})
    for what, handlers in (("action", action_map), ("query", query_map)):
        for name, fn in handlers.items():
            if not isinstance(name, str) or not name:
                raise ValueError(f"{what} names must be non-empty strings, got {name!r}")
            if not callable(fn):
                raise TypeError(f"{what} {name!r} must be callable")
    for label, hook in (
        ("create_state", create_state),
        ("create_vars", create_vars),
        ("on_create", on_create),
        ("on_wake", on_wake),
        ("on_sleep", on_sleep),
        ("on_destroy", on_destroy),
    ):
        if hook is not None and not callable(hook):
            raise TypeError(f"{label} must be callable")
    if run is not None and not isinstance(run, WorkflowHandler):
        run = WorkflowHandler(run)
    if concurrency is not None and not isinstance(concurrency, Concurrency):
        concurrency = Concurrency(concurrency)
    if rate_limit is not None and not isinstance(rate_limit, RateLimit):
        raise TypeError("rate_limit must be RateLimit(count, per)")
    if not callable(priority) and (isinstance(priority, bool) or not isinstance(priority, int)):
        raise TypeError(f"priority must be an int or a callable priority(c) -> int, got {priority!r}")
    if parent_close not in PARENT_CLOSE:
        raise ValueError(f"parent_close must be one of {PARENT_CLOSE}, got {parent_close!r}")
    return ActorDefinition(
        state=state,
        create_state=create_state,
        vars=vars,
        create_vars=create_vars,
        queues=_declarations(queues, QueueDefinition, "queues"),
        events=_declarations(events, EventDefinition, "events"),
        actions=action_map,
        queries=query_map,
        on_create=on_create,
        on_wake=on_wake,
        on_sleep=on_sleep,
        on_destroy=on_destroy,
        run=run,
        options=dict(options or {}),
        concurrency=concurrency,
        rate_limit=rate_limit,
        priority=priority,
        timeout=_seconds(timeout, "timeout"),
        parent_close=parent_close,
    )


#: the values of ``actor(parent_close=)``: leave the child running, or cancel it with its parent
PARENT_CLOSE = ("abandon", "cancel")


def workflow(
    fn: Callable[..., Any] | None = None,
    *,
    run: Callable[..., Any] | None = None,
    on_error: Callable[..., Any] | None = None,
    **actor_options: Any,
) -> Any:
    """Both spellings of ``workflow`` (DESIGN.md section 2).

    * ``workflow(fn, on_error=None)`` -> ``WorkflowHandler`` for ``actor(run=...)`` (rivetkit form); also
      usable as a decorator, bare (``@workflow``) or with options (``@workflow(on_error=hook)``).
    * ``workflow(run=fn, on_error=None, **actor_options)`` -> ``ActorDefinition`` (``@rivet-dev/workflows``
      form); ``actor_options`` are the keyword arguments of :func:`actor`.

    Raises ``TypeError`` when both ``fn`` and ``run`` are given, or actor options come with ``fn``.
    """
    if fn is not None:
        if run is not None or actor_options:
            raise TypeError("workflow(fn) takes only on_error=; use workflow(run=fn, ...) to define an actor")
        return WorkflowHandler(fn, on_error)
    if run is None:
        if actor_options:
            raise TypeError("workflow(...) needs run= to define an actor")

        def decorator(f: Callable[..., Any]) -> WorkflowHandler:
            return WorkflowHandler(f, on_error)

        return decorator
    if isinstance(run, WorkflowHandler):
        handler = run if on_error is None else WorkflowHandler(run.fn, on_error)
    else:
        handler = WorkflowHandler(run, on_error)
    return actor(run=handler, **actor_options)


# --- registry -------------------------------------------------------------------------------------


class Registry:
    """The set of actor types of an application, by name (``setup(use={...})``).

    ``registry.get(name)`` returns the ``ActorDefinition`` (``ActorNotFoundError`` otherwise). A registry
    is bound to one ``Runtime`` (store + dispatcher + settings) with ``bind``; ``client()`` needs that.
    """

    def __init__(self, definitions: Mapping[str, ActorDefinition]) -> None:
        self._definitions: dict[str, ActorDefinition] = {}
        for name, definition in definitions.items():
            if not isinstance(name, str) or not name.isidentifier():
                raise ValueError(f"actor names must be Python identifiers, got {name!r}")
            if not isinstance(definition, ActorDefinition):
                raise TypeError(f"{name!r} is not an actor definition (use actor(...) or workflow(run=...))")
            if definition.name not in (None, name):
                definition = copy.copy(definition)  # one definition registered under two names
            definition.name = name
            self._definitions[name] = definition
        self._runtime: RuntimeRole | None = None

    def get(self, name: str) -> ActorDefinition:
        """The definition registered as ``name``; raises ``ActorNotFoundError`` (metadata ``name``)."""
        try:
            return self._definitions[name]
        except (KeyError, TypeError):
            raise errors.ActorNotFoundError(f"no actor type named {name!r}", name=name) from None

    def names(self) -> list[str]:
        """Registered actor names, in registration order."""
        return list(self._definitions)

    def items(self) -> list[tuple[str, ActorDefinition]]:
        """``(name, definition)`` pairs in registration order."""
        return list(self._definitions.items())

    def __contains__(self, name: object) -> bool:
        return name in self._definitions

    def __iter__(self) -> Iterator[str]:
        return iter(self._definitions)

    def __len__(self) -> int:
        return len(self._definitions)

    def bind(self, runtime: RuntimeRole) -> Registry:
        """Attach ``runtime`` (replacing any earlier one) and return the registry."""
        self._runtime = runtime
        return self

    @property
    def runtime(self) -> RuntimeRole:
        """The bound runtime; ``RuntimeError`` if none is bound yet."""
        if self._runtime is None:
            raise RuntimeError(
                "this registry is not bound to a runtime: use rivet_workflows.testing.make_runtime(registry) "
                "in tests, or list it in settings.RIVET_WORKFLOWS['REGISTRY'] under Django"
            )
        return self._runtime

    @property
    def is_bound(self) -> bool:
        """True once ``bind`` was called."""
        return self._runtime is not None

    def client(self) -> ClientRole:
        """A client on the bound runtime (DESIGN.md section 2, "Client")."""
        return self.runtime.client()

    def __repr__(self) -> str:
        return f"<Registry {self.names()}>"


def setup(*, use: Mapping[str, ActorDefinition]) -> Registry:
    """Build the ``Registry`` of actor types: ``setup(use={"payment_actor": payment_actor})``.

    Sets each definition's ``name``. Raises ``ValueError`` for a name that is not a Python identifier (names
    are client attributes) and ``TypeError`` for a value that is not an ``ActorDefinition``.
    """
    return Registry(use)
