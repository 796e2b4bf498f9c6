"""Typed settings of rivet_workflows, read from ``settings.RIVET_WORKFLOWS`` (DESIGN.md section 10).

``rivet_settings`` is the one object to read; it reloads when ``override_settings`` changes
``RIVET_WORKFLOWS`` or ``DEBUG`` (the ``setting_changed`` signal), and so does the bound runtime.
"""

from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass
from typing import Any

from django.conf import settings as django_settings
from django.core.signals import setting_changed
from django.dispatch import receiver

#: keys of RIVET_WORKFLOWS that are read with their defaults (DEV_MODE defaults to settings.DEBUG)
DEFAULTS: dict[str, Any] = {
    "REGISTRY": "project.registry.registry",
    "INSPECTOR_TOKEN": None,
    "DEV_MODE": None,
    "LEASE_SECONDS": 30.0,
    "SWEEP_INTERVAL": 1.0,
    "SWEEP_BATCH": 100,
    "MAX_PAYLOAD_BYTES": 1_048_576,
    "MAX_KEY_BYTES": 1024,
    "MAX_BODY_BYTES": 2_097_152,
    "LIVE_WAIT_THRESHOLD": 0.5,
    "WARM_WAIT": 0.25,
    "WORKER_CONCURRENCY": 1,
    "ACTION_TIMEOUT": 60.0,
    "POLL_INTERVAL": 0.02,
    "MAX_WAITING_SENDS": 64,
    "STEP_ABANDON_SECONDS": 30.0,
    "CONNECTION_IDLE_CHECK": 1.0,
    "PREPARED_STATEMENTS": True,
    "DISPATCHER": "rivet_workflows.driver.dispatch.CeleryDispatcher",
    "API_AUTH": None,
    "API_TOKEN": None,
    "AUTHORIZE": None,
    "CODE_VERSION": None,
    "WORKFLOW_FAILURE_TYPES": ("rivet_workflows.WorkflowFailure",),
    "METRICS": None,
    "TRACING": True,
    "TRACE_URL": None,
    "SHARDS": None,
    "SHARD_BUCKETS": 256,
}

#: the environment variable CODE_VERSION defaults to (DESIGN.md section 12, rolling deploys)
CODE_VERSION_ENV = "RIVET_CODE_VERSION"


@dataclass(frozen=True)
class RivetSettings:
    """The resolved settings. Durations are seconds (float), sizes bytes (int).

    REGISTRY: dotted path of the ``Registry`` built by ``setup(use={...})``.
    INSPECTOR_TOKEN: bearer token of the inspector endpoints outside dev mode (None = no token access).
    DEV_MODE: inspector open without auth; defaults to ``settings.DEBUG``.
    LEASE_SECONDS: executor lease length; a crashed executor's actor is taken over after this.
    SWEEP_INTERVAL: period of the ``rivet_workflows.sweep`` beat task.
    SWEEP_BATCH: most actors one sweep claims.
    MAX_PAYLOAD_BYTES: largest serialized value (step output, state, queue body).
    MAX_KEY_BYTES: largest serialized actor key (keys are indexed; PostgreSQL caps an index row at ~2.7 kB).
    MAX_BODY_BYTES: largest HTTP request body accepted by the API.
    LIVE_WAIT_THRESHOLD: waits shorter than this are done in memory by the running executor.
    WARM_WAIT: how long a Celery worker's run that reaches a queue wait with no message keeps its lease and
        listens for a send (PostgreSQL LISTEN/NOTIFY) before it releases the actor; 0 disables it. A send
        in the window is received by the same run without a broker round trip; the worker is held for at
        most this long per wait (on other databases the run releases at once).
    WORKER_CONCURRENCY: how many actors one Celery worker process runs at once, each on its own thread,
        database connection and lease (1: the pool the worker command line chooses, unchanged; above 1
        the worker runs a thread pool of that size). Also the number of threads (at least 4) that run
        the near timers and the heard wakes of the process (``tasks.LocalRuns``).
    ACTION_TIMEOUT: how long an action waits for a running step to release the actor.
    POLL_INTERVAL: polling period of waits on the database (action lock; send(wait=True) starts at it and
        backs off to engine.client.MAX_SEND_POLL_SECONDS).
    MAX_WAITING_SENDS: how many sends with ``wait`` one process runs at once; one more is refused before it
        touches the database (``TooManyWaitingSendsError``, HTTP 429 with ``Retry-After``). A waiting send
        holds no database connection while it waits (docs/howto/calling.md).
    STEP_ABANDON_SECONDS: after a step's ``timeout`` its body is cancelled (async: the task; sync:
        ``step.cancelled`` set); its retry waits until the body returned, at most this long, then the
        attempt is logged as abandoned and the retry may run beside it.
    CONNECTION_IDLE_CHECK: a store call that finds its thread's database connection idle for longer than
        this checks it first (one round trip) and reconnects when the server closed it (an idle timeout,
        PgBouncer, a failover), so a long step does not lose its commit; 0 checks before every call.
    PREPARED_STATEMENTS: on PostgreSQL the store's own statements (a step's commit, the claim, the history
        load, a send) are prepared once per connection and reused, so the server does not plan them again
        for every step (the application's ORM queries are untouched). Set False behind PgBouncer in
        transaction pooling mode older than 1.21, which does not keep prepared statements.
    DISPATCHER: dotted path of the Dispatcher class (``CeleryDispatcher`` or ``LocalDispatcher``).
    API_AUTH: dotted path of the authentication callable of the actor/action/queue API endpoints,
        ``auth(request)`` returning the caller (a principal) or None for a 401 (None:
        ``rivet_workflows.api.auth.default_api_auth``: ``Authorization: Bearer <API_TOKEN>`` or a logged-in
        Django user). What a principal may then do is ``rivet_workflows.access.allowed_operations`` (the
        manual's authorization table): a Django user needs the ``rivet_workflows.use_actor_api``
        permission.
    API_TOKEN: bearer token of the actor/action/queue endpoints (None = no token access).
    AUTHORIZE: dotted path of the project hook ``authorize(request, actor_name, operation, actor_id) ->
        bool`` asked about every operation on an actor the role rule allowed: HTTP API, admin and
        WebSocket (docs/howto/authorization.md); falsy refuses it (403 / close code 4403). Operations:
        ``access.OPERATIONS``. None: no hook.
    CODE_VERSION: the name of the code this process runs (a release tag, a git sha), default the
        environment variable ``RIVET_CODE_VERSION``, else None (unversioned). Every write of a run records
        it; during a rolling deploy a worker whose replay diverges on entries written by another code
        version leaves the run unchanged and due for a worker of that version instead of failing it
        (DESIGN.md section 12). None (or "") keeps every divergence a failure.
    WORKFLOW_FAILURE_TYPES: dotted paths of the exception classes that fail a workflow when workflow code
        raises them outside a step body (rollback handlers run, the run is over); any other exception there is
        a code error and suspends the run until it is retried (DESIGN.md section 16, docs/explanation/failures.md).
        Default ``("rivet_workflows.WorkflowFailure",)``; what the engine raises on purpose
        (a step's failure, timeouts, JoinError, RaceError, a divergence) always fails.
        ``("builtins.Exception",)`` restores the spec's rule: every exception fails.
    METRICS: count steps, finished workflows, wake lateness and lease takeovers for Prometheus
        (``rivet_workflows.metrics``); None (default): when prometheus-client is installed.
    TRACING: report runs, step attempts, sends and creations as OpenTelemetry spans
        (``rivet_workflows.tracing``; a no-op until the project configures an OpenTelemetry SDK).
    TRACE_URL: link of a trace id in the admin, a template with ``{trace_id}``, e.g.
        ``"http://jaeger:16686/trace/{trace_id}"`` (None: the id is shown without a link).
    SHARDS: the database aliases (of ``settings.DATABASES``) the actors are spread over, e.g.
        ``["default", "shard1"]`` (DESIGN.md section 21): an actor's shard is fixed at creation by a stable
        hash of (type, key) and carried in its id; add ``rivet_workflows.routers.ShardRouter`` to
        ``DATABASE_ROUTERS`` and run ``migrate --database ALIAS`` for each. None (default) or one alias:
        not sharded, every actor on that one database (``default`` when None).
    SHARD_BUCKETS: how many hash buckets map onto the shards (contiguous ranges), at least the number of
        shards and at most 65536; fixed for the life of the data (an actor's id carries its bucket).
    """

    REGISTRY: str
    INSPECTOR_TOKEN: str | None
    DEV_MODE: bool
    LEASE_SECONDS: float
    SWEEP_INTERVAL: float
    SWEEP_BATCH: int
    MAX_PAYLOAD_BYTES: int
    MAX_KEY_BYTES: int
    MAX_BODY_BYTES: int
    LIVE_WAIT_THRESHOLD: float
    WARM_WAIT: float
    WORKER_CONCURRENCY: int
    ACTION_TIMEOUT: float
    POLL_INTERVAL: float
    STEP_ABANDON_SECONDS: float
    CONNECTION_IDLE_CHECK: float
    DISPATCHER: str
    PREPARED_STATEMENTS: bool = True
    MAX_WAITING_SENDS: int = 64
    API_AUTH: str | None = None
    API_TOKEN: str | None = None
    AUTHORIZE: str | None = None
    CODE_VERSION: str | None = None
    WORKFLOW_FAILURE_TYPES: tuple[str, ...] = ("rivet_workflows.WorkflowFailure",)
    METRICS: bool | None = None
    TRACING: bool = True
    TRACE_URL: str | None = None
    SHARDS: tuple[str, ...] | None = None
    SHARD_BUCKETS: int = 256

    @property
    def sharded(self) -> bool:
        """True when ``SHARDS`` names more than one alias (a ``storage.sharded.ShardedStore`` is built)."""
        return self.SHARDS is not None and len(self.SHARDS) > 1

    def shard_aliases(self) -> tuple[str, ...]:
        """The aliases holding actors: ``SHARDS``, or ``("default",)`` when it is None."""
        return self.SHARDS or ("default",)

    def shard_map(self) -> Any:
        """The ``engine.model.shards.ShardMap`` of ``SHARDS`` and ``SHARD_BUCKETS`` (one alias when unset)."""
        from .engine.model.shards import ShardMap

        return ShardMap(self.shard_aliases(), self.SHARD_BUCKETS)

    @classmethod
    def load(cls) -> RivetSettings:
        """Read ``settings.RIVET_WORKFLOWS`` over DEFAULTS. Raises ValueError naming an unknown key."""
        user = dict(getattr(django_settings, "RIVET_WORKFLOWS", None) or {})
        unknown = set(user) - set(DEFAULTS)
        if unknown:
            raise ValueError(
                f"RIVET_WORKFLOWS has unknown keys: {sorted(unknown)}; known: {sorted(DEFAULTS)}"
            )
        values = {**DEFAULTS, **user}
        if values["DEV_MODE"] is None:
            values["DEV_MODE"] = bool(django_settings.DEBUG)
        types = {f.name: f.type for f in dataclasses.fields(cls)}
        for name in (
            "LEASE_SECONDS",
            "SWEEP_INTERVAL",
            "LIVE_WAIT_THRESHOLD",
            "WARM_WAIT",
            "ACTION_TIMEOUT",
            "POLL_INTERVAL",
            "STEP_ABANDON_SECONDS",
            "CONNECTION_IDLE_CHECK",
        ):
            values[name] = float(values[name])
        for name in (
            "SWEEP_BATCH",
            "WORKER_CONCURRENCY",
            "MAX_PAYLOAD_BYTES",
            "MAX_KEY_BYTES",
            "MAX_BODY_BYTES",
            "MAX_WAITING_SENDS",
        ):
            values[name] = int(values[name])
        values["DEV_MODE"] = bool(values["DEV_MODE"])
        if values["CODE_VERSION"] is None:
            values["CODE_VERSION"] = os.environ.get(CODE_VERSION_ENV)
        version = values["CODE_VERSION"]
        values["CODE_VERSION"] = (str(version).strip() or None) if version is not None else None
        values["WORKFLOW_FAILURE_TYPES"] = _failure_paths(values["WORKFLOW_FAILURE_TYPES"])
        values["METRICS"] = None if values["METRICS"] is None else bool(values["METRICS"])
        values["TRACING"] = bool(values["TRACING"])
        values["PREPARED_STATEMENTS"] = bool(values["PREPARED_STATEMENTS"])
        values["SHARDS"] = _shard_aliases(values["SHARDS"])
        values["SHARD_BUCKETS"] = _shard_buckets(values["SHARD_BUCKETS"])
        loaded = cls(**{name: values[name] for name in types})
        loaded.failure_types()  # a path that does not import, or names no exception class, fails here
        return loaded

    def failure_types(self) -> tuple[type[BaseException], ...]:
        """``WORKFLOW_FAILURE_TYPES`` imported: the exception classes. ``ValueError`` naming a path that
        does not import or is not an exception class."""
        from django.utils.module_loading import import_string

        classes = []
        for path in self.WORKFLOW_FAILURE_TYPES:
            try:
                found = import_string(path)
            except ImportError as exc:
                raise ValueError(
                    f"RIVET_WORKFLOWS['WORKFLOW_FAILURE_TYPES']: cannot import {path!r}: {exc}"
                ) from exc
            if not (isinstance(found, type) and issubclass(found, BaseException)):
                raise ValueError(
                    f"RIVET_WORKFLOWS['WORKFLOW_FAILURE_TYPES']: {path!r} is not an exception class"
                )
            classes.append(found)
        return tuple(classes)


def _failure_paths(value: Any) -> tuple[str, ...]:
    """``WORKFLOW_FAILURE_TYPES`` as a tuple of dotted paths (one str is one path); ``ValueError`` else."""
    if isinstance(value, str):
        value = (value,)
    if not isinstance(value, (list, tuple)) or not all(isinstance(v, str) and v for v in value):
        raise ValueError(
            "RIVET_WORKFLOWS['WORKFLOW_FAILURE_TYPES'] must be a tuple of dotted paths of exception classes, "
            f"e.g. ('rivet_workflows.WorkflowFailure',); got {value!r}"
        )
    return tuple(value)


def _shard_aliases(value: Any) -> tuple[str, ...] | None:
    """``SHARDS`` as a tuple of alias names (None stays None); ``ValueError`` for anything else."""
    if value is None:
        return None
    if isinstance(value, str) or not isinstance(value, (list, tuple)) or not value:
        raise ValueError(
            f"RIVET_WORKFLOWS['SHARDS'] must be a non-empty list of database aliases, e.g. "
            f"['default', 'shard1'], or None; got {value!r}"
        )
    if not all(isinstance(v, str) and v for v in value):
        raise ValueError(f"RIVET_WORKFLOWS['SHARDS']: every alias is a non-empty str, got {value!r}")
    return tuple(value)


def _shard_buckets(value: Any) -> int:
    """``SHARD_BUCKETS`` as given: an int (not a bool: no float, str or None is coerced, a bucket count
    read wrong would move every actor); ``ValueError`` naming the setting else. Its range is checked by
    ``checks.check_shards`` (E004)."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(
            f"RIVET_WORKFLOWS['SHARD_BUCKETS'] must be an int (the number of hash buckets, e.g. 256), "
            f"got {value!r} ({type(value).__name__})"
        )
    return value


class _LazySettings:
    """Attribute access to the current ``RivetSettings`` (loaded on first use, reset on setting_changed)."""

    _cached: RivetSettings | None = None

    def get(self) -> RivetSettings:
        """Return the current RivetSettings, loading them if needed."""
        if self._cached is None:
            self._cached = RivetSettings.load()
        return self._cached

    def reload(self) -> None:
        """Forget the cached settings; the next access reads Django settings again."""
        self._cached = None

    def __getattr__(self, name: str) -> Any:
        return getattr(self.get(), name)


#: the settings object the app reads: ``rivet_settings.LEASE_SECONDS``
rivet_settings = _LazySettings()


@receiver(setting_changed)
def _reload_on_change(*, setting: str, **kwargs: Any) -> None:
    if setting in ("RIVET_WORKFLOWS", "DEBUG"):
        rivet_settings.reload()  # django_runtime resets its runtime on the same signal
