"""What a lower layer needs of the runtime, the registry, the client, the run's session and the actor context,
typed structurally (DESIGN.md section 15: no import circle, type-only ones included; shared types live in the leaf).

A module low in the engine's layers (the session's parts, the inspector's reads, the definitions) is handed the
``Runtime``, the ``RunSession`` or the ``ActorContext`` built above it. It names them through these Protocols
instead of importing the concrete classes, so the import graph stays a tree even for annotations. Each Protocol
lists only what those lower modules read; the concrete classes satisfy them as they are. Members whose concrete
type lives above this module (an ``ActorDefinition``, the session's ``WriteBuffer`` and ``BodyCounter``) are
typed ``Any``: naming them here would close the circle again.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from . import observe, ports
    from .settings import Settings


class RegistryRole(Protocol):
    """The actor types of a runtime (``definitions.Registry``): ``get(name)`` -> ``ActorDefinition`` (raises
    ``ActorNotFoundError``), ``names()`` -> the registered names, ``name in registry``."""

    def get(self, name: str) -> Any: ...

    def names(self) -> list[str]: ...

    def __contains__(self, name: object) -> bool: ...


class ClientRole(Protocol):
    """A client on a runtime (``client.Client``): ``client.payment_actor`` or ``client["payment_actor"]`` gives
    an ``ActorTypeClient``."""

    def __getitem__(self, name: str) -> Any: ...

    def __getattr__(self, name: str) -> Any: ...


class RuntimeRole(Protocol):
    """The composition root as its lower layers see it (``runtime.Runtime``): the store, the dispatcher, the
    registry, the settings, the observer, this process's lease owner id and ephemeral vars, and the hooks."""

    @property
    def store(self) -> ports.Store: ...

    @property
    def dispatcher(self) -> ports.Dispatcher: ...

    @property
    def registry(self) -> RegistryRole: ...

    @property
    def settings(self) -> Settings: ...

    @property
    def observer(self) -> observe.Observer: ...

    @property
    def owner(self) -> str: ...

    @property
    def vars(self) -> dict[str, Any]: ...

    def broadcast(self, actor_id: str, name: str, args: list | tuple) -> None: ...

    def notify_history(self, actor_id: str) -> None: ...

    def push_stream(self, actor_id: str, name: str, offset: int, value: Any) -> None: ...

    def wake(self, actor_id: str) -> None: ...

    async def call(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any: ...

    #: a commit wrote relay rows since the last relay pass (``relay_soon``; DESIGN.md section 21)
    relay_wanted: bool

    def client(self, parent_id: str | None = None, step: Any = None) -> ClientRole: ...

    def relay_soon(self) -> None: ...


class SessionRole(Protocol):
    """One run of one actor's workflow as the session's parts see it (``session.RunSession``): the heartbeat,
    the step lock, the waits, the step context and the step results. Times are aware UTC datetimes; ``flush``,
    ``flush_pending`` and ``call`` are awaited on the run's loop."""

    @property
    def runtime(self) -> RuntimeRole: ...

    @property
    def store(self) -> ports.Store: ...

    @property
    def settings(self) -> Settings: ...

    @property
    def actor(self) -> ports.ActorRecord: ...

    @property
    def actor_id(self) -> str: ...

    @property
    def token(self) -> int: ...

    @property
    def definition(self) -> Any: ...

    @property
    def writes(self) -> Any: ...

    @property
    def bodies(self) -> Any: ...

    vars: Any
    state: Any

    @property
    def state_changed(self) -> bool: ...

    @property
    def rolling_back(self) -> bool: ...

    @property
    def deadline_at(self) -> datetime | None: ...

    def evict(self) -> None: ...

    def request_destroy(self) -> None: ...

    def mark_state_changed(self) -> None: ...

    def check_deadline(self, now: datetime) -> None: ...

    @property
    def clock_anchored(self) -> bool: ...

    def anchored_now(self) -> datetime | None: ...

    def stamp(self) -> datetime: ...

    async def now(self) -> datetime: ...

    async def flush(self, **fields: Any) -> ports.CommitResult: ...

    async def flush_pending(self) -> None: ...

    async def call(self, fn: Callable[..., Any], *args: Any) -> Any: ...


class ActorContextRole(Protocol):
    """The actor context ``c`` as ``c.cron`` and ``c.schedule`` see it (``actor_context.ActorContext``)."""

    @property
    def runtime(self) -> RuntimeRole: ...

    @property
    def actor_id(self) -> str: ...

    @property
    def definition(self) -> Any: ...
