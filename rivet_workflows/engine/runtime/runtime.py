"""The runtime: one store, one dispatcher, one registry and the engine settings, shared by client and executor."""

from __future__ import annotations

import logging
import os
import socket
import uuid
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ..actor import bridge
from ..client.client import Client
from ..model import errors, observe, ports
from ..model.settings import Settings

if TYPE_CHECKING:
    from ..model.definitions import Registry

logger = logging.getLogger("rivet_workflows")


class Runtime:
    """Store + dispatcher + registry + settings, plus the realtime hooks (DESIGN.md sections 5, 7).

        ``store`` implements ``ports.Store``; ``dispatcher`` implements ``ports.Dispatcher``; ``broadcaster`` is
        ``broadcaster(actor_id, name, args_list)`` (None: broadcasts are dropped); ``on_history_change`` is
        ``on_history_change(actor_id)``; ``on_stream_item(actor_id, stream, offset, value_json)`` (None:
        stream items are not pushed); ``observer`` an ``observe.Observer`` (tracing and metrics, DESIGN.md section 14;
    None: no-op); ``on_relay()``: a commit wrote relay rows (``relay_soon``; None: nothing but the flag).
    Creating a runtime binds ``registry`` to it. ``owner`` identifies this
        process in leases (``host:pid:random``); ``vars`` holds each actor's ephemeral vars in this process.
    """

    def __init__(
        self,
        store: ports.Store,
        dispatcher: ports.Dispatcher,
        registry: Registry,
        settings: Settings | None = None,
        broadcaster: Callable[[str, str, list], Any] | None = None,
        on_history_change: Callable[[str], Any] | None = None,
        observer: observe.Observer | None = None,
        on_stream_item: Callable[[str, str, int, Any], Any] | None = None,
        on_relay: Callable[[], Any] | None = None,
    ) -> None:
        self.store = store
        self.dispatcher = dispatcher
        self.registry = registry
        self.settings = settings if settings is not None else Settings()
        self.broadcaster = broadcaster
        self.on_history_change = on_history_change
        #: ``on_stream_item(actor_id, stream, offset, value_json)``: a stream item was written (WebSocket push)
        self.on_stream_item = on_stream_item
        #: ``on_relay()``: a commit wrote relay rows (``relay_soon``); None: ``drain`` and the sweep relay them
        self.on_relay = on_relay
        #: set by ``relay_soon``; ``drain`` clears it when it runs a relay pass
        self.relay_wanted = False
        #: tracing and metrics hooks (``engine.observe``; the default does nothing)
        self.observer = observer if observer is not None else observe.Observer()
        self.owner = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
        #: process-local ephemeral vars by actor_id (ENGINE-SEMANTICS.md section 10): the executor sets
        #: them after create_vars + on_wake and drops them after on_sleep; actions reuse them.
        self.vars: dict[str, Any] = {}
        registry.bind(self)

    def broadcast(self, actor_id: str, name: str, args: list | tuple) -> None:
        """Send event ``name`` with ``args`` to the actor's subscribers; errors are logged, never raised."""
        if self.broadcaster is None:
            return
        try:
            self.broadcaster(actor_id, name, list(args))
        except Exception:  # realtime is best effort: a broken channel layer must not fail a step
            logger.exception("broadcast of %r for actor %s failed", name, actor_id)

    def notify_history(self, actor_id: str) -> None:
        """Tell listeners (the admin trace) that what a trace page shows changed: the history, the workflow
        state or the lease (a run's release, a repair, a cancel); errors are logged."""
        if self.on_history_change is None:
            return
        try:
            self.on_history_change(actor_id)
        except Exception:
            logger.exception("history-change notification for actor %s failed", actor_id)

    def push_stream(self, actor_id: str, name: str, offset: int, value: Any) -> None:
        """Tell the actor's subscribers that item ``offset`` (``value`` in ``serde.to_json`` form) of the
        stream ``name`` was written (DESIGN.md section 17); errors are logged, never raised."""
        if self.on_stream_item is None:
            return
        try:
            self.on_stream_item(actor_id, name, offset, value)
        except Exception:
            logger.exception("stream push of %r for actor %s failed", name, actor_id)

    def wake(self, actor_id: str) -> None:
        """Hand ``actor_id`` to the dispatcher; a failing dispatcher is logged (the sweep catches up)."""
        try:
            self.dispatcher.wake(actor_id)
        except Exception:
            logger.exception("dispatcher failed to wake actor %s; the periodic sweep will", actor_id)

    async def call(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        """Call a sync store function from async code on the thread that owns the DB connection.

        A data error of the database (``errors.is_data_error``) is raised as ``StoreRejectedError`` (cause: the
        original); ``StoreUnavailableError`` (a store that translated a dropped connection) and any other
        exception that is not a domain error of the store (see ``errors.STORE_DOMAIN_ERRORS``) as the
        ``StoreUnavailable`` signal.
        """
        try:
            return await bridge.call(fn, *args, **kwargs)
        except errors.StoreUnavailableError as exc:  # the store translated its own failure
            raise errors.StoreUnavailable(str(exc)) from exc
        except Exception as exc:
            if errors.is_data_error(exc):
                raise errors.StoreRejectedError(
                    f"the store refused a write: {type(exc).__name__}: {exc}"
                ) from exc
            if isinstance(exc, errors.STORE_DOMAIN_ERRORS):
                raise
            raise errors.StoreUnavailable(f"{type(exc).__name__}: {exc}") from exc

    def client(self, parent_id: str | None = None, step: Any = None) -> Client:
        """A ``Client`` on this runtime; ``parent_id``: the actor whose run uses it (its creations record
        it as their parent, ``Client``); ``step``: the step context whose body uses it (``step.client()``:
        its sends to actors on another shard commit with the step)."""
        return Client(self, parent_id, step)

    def relay_soon(self) -> None:
        """A commit wrote relay rows (``CommitResult.relayed``): have the relay deliver them soon
        (DESIGN.md section 21). Sets ``relay_wanted`` (``drain`` runs a relay pass then) and calls
        ``on_relay()`` (the Django runtime queues the ``rivet_workflows.relay`` task); its errors are logged
        (the sweep relays what is left)."""
        self.relay_wanted = True
        if self.on_relay is None:
            return
        try:
            self.on_relay()
        except Exception:
            logger.exception("could not have the relay run; the periodic sweep will")

    def __repr__(self) -> str:
        return f"<Runtime store={type(self.store).__name__} registry={self.registry.names()}>"
