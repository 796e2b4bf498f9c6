"""Testing helpers for users' unit tests and ours: the in-memory store, a manual clock, an in-process runtime.

* ``MemoryStore`` (``memory.py``): the in-memory twin of the storage port, every capability of
  ``ports.Store``; ``ManualClock`` moves its time only when told.
* ``make_runtime(registry)``: a ``Runtime`` on a fresh ``MemoryStore`` and an ``InlineDispatcher`` (which
  only records wake-ups; ``dispatch.LocalDispatcher``); ``drain(runtime)`` runs due work to quiescence.
* ``GroupProcess`` (``process.py``): a subprocess in its own process group, killable as a crash.
* ``export_history``/``replay_history``/``ReplayReport`` (``testing/golden.py``): golden histories.

Importing this package does not import Django.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Any

from ..engine.model.definitions import Registry
from ..engine.runtime import executor
from ..engine.runtime.local_dispatch import LocalDispatcher as InlineDispatcher
from ..engine.runtime.runtime import Runtime, Settings
from .clock import ManualClock
from .golden import ReplayReport, export_history, replay_history
from .memory import MemoryStore
from .process import GroupProcess

__all__ = [
    "GroupProcess",
    "InlineDispatcher",
    "ManualClock",
    "MemoryStore",
    "ReplayReport",
    "drain",
    "export_history",
    "make_runtime",
    "replay_history",
]


def make_runtime(
    registry: Registry,
    *,
    store: Any = None,
    dispatcher: Any = None,
    clock: Callable[[], datetime] | None = None,
    broadcaster: Callable[[str, str, list], Any] | None = None,
    **settings: Any,
) -> Runtime:
    """A ``Runtime`` on a fresh ``MemoryStore(clock=clock)`` and ``InlineDispatcher``, bound to ``registry``.

    ``store``/``dispatcher`` replace the defaults; ``broadcaster(actor_id, name, args)`` receives events;
    ``settings`` are ``engine.runtime.Settings`` fields (``lease_seconds=5``...; durations in seconds);
    unknown names raise ``TypeError``.
    """
    config = Settings(**settings)
    if store is None:
        store = MemoryStore(clock=clock, poll_interval=config.poll_interval)
    return Runtime(
        store,
        dispatcher if dispatcher is not None else InlineDispatcher(),
        registry,
        config,
        broadcaster=broadcaster,
    )


def drain(runtime: Runtime, timeout: float = 10.0, **kwargs: Any) -> Any:
    """Run every due actor of ``runtime`` to quiescence (``engine.executor.drain``, DESIGN.md section 9):
    returns its ``DrainSummary``; ``timeout`` in seconds."""
    return executor.drain(runtime, timeout=timeout, **kwargs)
