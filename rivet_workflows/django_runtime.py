"""The runtime bound to Django: the store of the default database + the configured dispatcher + the registry."""

from __future__ import annotations

import threading
from typing import Any

from django.core.signals import setting_changed
from django.dispatch import receiver

_lock = threading.Lock()
_runtime: Any = None


def reset_runtime() -> None:
    """Forget the built runtime; the next get_runtime() builds a fresh one from current settings."""
    global _runtime
    with _lock:
        _runtime = None


@receiver(setting_changed)
def _reset_on_change(*, setting: str, **kwargs: Any) -> None:
    """``override_settings(RIVET_WORKFLOWS=...)`` or ``DEBUG`` takes effect at once (DESIGN.md section 9)."""
    if setting in ("RIVET_WORKFLOWS", "DEBUG"):
        reset_runtime()


def get_runtime() -> Any:
    """Return the process-wide ``engine.runtime.Runtime`` built from ``RIVET_WORKFLOWS`` and bind the registry.

    Store: ``storage.store_for()`` (``PostgresStore`` on PostgreSQL, else ``DjangoStore``); dispatcher: ``RIVET_WORKFLOWS['DISPATCHER']`` (Celery by default).
    Raises ImportError if REGISTRY cannot be imported.
    """
    global _runtime
    with _lock:
        if _runtime is None:
            _runtime = build_runtime()
        return _runtime


def build_runtime(*, dispatcher: Any = None, registry: Any = None) -> Any:
    """Build a Runtime (which binds the registry) on ``build_store`` (one database, or the shards of
    ``SHARDS``); arguments override the settings."""
    from django.utils.module_loading import import_string

    from .conf import rivet_settings
    from .engine.runtime import runtime as runtime_mod

    conf = rivet_settings.get()
    if registry is None:
        registry = import_string(conf.REGISTRY)
    if dispatcher is None:
        dispatcher = import_string(conf.DISPATCHER)()
    settings = runtime_mod.Settings(
        lease_seconds=conf.LEASE_SECONDS,
        sweep_interval=conf.SWEEP_INTERVAL,
        max_payload_bytes=conf.MAX_PAYLOAD_BYTES,
        max_key_bytes=conf.MAX_KEY_BYTES,
        live_wait_threshold=conf.LIVE_WAIT_THRESHOLD,
        warm_wait=conf.WARM_WAIT,
        action_timeout=conf.ACTION_TIMEOUT,
        poll_interval=conf.POLL_INTERVAL,
        max_waiting_sends=conf.MAX_WAITING_SENDS,
        step_abandon_seconds=conf.STEP_ABANDON_SECONDS,
        dev_mode=conf.DEV_MODE,
        code_version=conf.CODE_VERSION,
        workflow_failure_types=conf.failure_types(),
    )
    from .realtime import broadcaster

    runtime = runtime_mod.Runtime(
        build_store(conf),
        dispatcher,
        registry,
        settings=settings,
        broadcaster=broadcaster.broadcast,
        on_history_change=broadcaster.history_changed,
        on_stream_item=broadcaster.stream_item,
        observer=build_observer(conf),
        # a commit that wrote relay rows queues the relay task (``CeleryDispatcher.relay``, DESIGN.md 21); a
        # dispatcher without one (``LocalDispatcher``: drain() relays by itself) leaves it to drain and the sweep
        on_relay=getattr(dispatcher, "relay", None),
    )
    return runtime  # Runtime() binds the registry


def build_store(conf: Any) -> Any:
    """The store of ``RIVET_WORKFLOWS`` (``conf``: a ``RivetSettings``): ``storage.store_for(alias)`` of the
    one database (``default``, or the one alias ``SHARDS`` names), or a ``storage.sharded.ShardedStore``
    over every alias when ``SHARDS`` names several (DESIGN.md section 21)."""
    from . import storage

    options = {
        "poll_interval": conf.POLL_INTERVAL,
        "idle_check": conf.CONNECTION_IDLE_CHECK,
        "prepared_statements": conf.PREPARED_STATEMENTS,
    }
    if conf.sharded:
        from .storage.sharded import ShardedStore

        return ShardedStore.build(conf.SHARDS, conf.SHARD_BUCKETS, **options)
    return storage.store_for(conf.shard_aliases()[0], **options)


def build_observer(conf: Any) -> Any:
    """The engine observer of ``RIVET_WORKFLOWS``'s ``METRICS`` (None: when prometheus-client is installed)
    and ``TRACING`` (DESIGN.md section 14): ``engine.observe.combine`` of the ones switched on."""
    from . import tracing
    from .engine.model import observe
    from .metrics import prometheus as metrics

    observers = []
    if conf.TRACING:
        observers.append(tracing.observer())
    if conf.METRICS or (conf.METRICS is None and metrics.available()):
        found = metrics.observer()
        if found is None:
            raise ImportError("RIVET_WORKFLOWS['METRICS'] is on but prometheus-client is not installed")
        observers.append(found)
    return observe.combine(observers)


def client() -> Any:
    """Return a client (``engine.client.Client``) of the registry from settings."""
    return get_runtime().registry.client()


def drain(timeout: float = 10.0) -> Any:
    """Run due work in this process until quiescent or ``timeout`` seconds pass (DESIGN.md section 9).

    Returns the executor's ``DrainSummary(actors_run, steps_executed, still_waiting)``.
    """
    from .engine.runtime import executor

    return executor.drain(get_runtime(), timeout=timeout)
