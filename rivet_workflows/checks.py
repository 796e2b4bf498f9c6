"""System checks of rivet_workflows (ids ``rivet_workflows.E001``..., ``W001``...; DESIGN.md section 10)."""

from __future__ import annotations

import sys
from typing import Any

from django.conf import settings
from django.core import checks


@checks.register(checks.Tags.compatibility)
def check_settings(app_configs: Any = None, **kwargs: Any) -> list[checks.CheckMessage]:
    """Check RIVET_WORKFLOWS, the registry, the database vs the broker, the channel layer and step timeouts.

    E001: RIVET_WORKFLOWS is invalid. E002: REGISTRY cannot be imported or is not a Registry.
    W001: SQLite with a non-embedded broker (real workers on several machines need PostgreSQL).
    W002: no channel layer (broadcasts and live history go nowhere).
    W003: a step timeout longer than LEASE_SECONDS (another worker would take over a live step).
    (W004, the in-memory channel layer with worker processes, is a deploy check: ``check_channel_layer``.)
    W005: SWEEP_INTERVAL >= LEASE_SECONDS (late timers, slow takeover of a dead worker's actors).
    E003: API_AUTH or AUTHORIZE cannot be imported or is not callable (every API request would fail).
    W006: DEV_MODE on while DEBUG is off (the inspector, and with dev_mode_api_auth the actor API, open to
    anonymous callers in what looks like production).
    E004: SHARDS / SHARD_BUCKETS cannot work (``check_shards``).
    (E005, a DISPATCHER that does not import, is ``check_dispatcher``; W008, a shard without this app's
    tables, the database check ``check_shard_tables``.)
    """
    from django.utils.module_loading import import_string

    from .conf import RivetSettings

    errors: list[checks.CheckMessage] = []
    try:
        conf = RivetSettings.load()
    except (ValueError, TypeError) as exc:
        return [
            checks.Error(
                f"RIVET_WORKFLOWS is invalid: {exc}",
                hint="Fix the RIVET_WORKFLOWS dict in settings (see the manual, docs/reference/settings.md).",
                id="rivet_workflows.E001",
            )
        ]

    registry = None
    try:
        registry = import_string(conf.REGISTRY)
    except ImportError as exc:
        errors.append(
            checks.Error(
                f"RIVET_WORKFLOWS['REGISTRY'] = {conf.REGISTRY!r} cannot be imported: {exc}",
                hint="Point REGISTRY at the Registry returned by rivet_workflows.setup(use={...}).",
                id="rivet_workflows.E002",
            )
        )
    if registry is not None and not hasattr(registry, "get"):
        errors.append(
            checks.Error(
                f"RIVET_WORKFLOWS['REGISTRY'] = {conf.REGISTRY!r} is a {type(registry).__name__}, not a Registry",
                hint="Point REGISTRY at the Registry returned by rivet_workflows.setup(use={...}).",
                id="rivet_workflows.E002",
            )
        )

    engine = settings.DATABASES.get("default", {}).get("ENGINE", "")
    broker = str(getattr(settings, "CELERY_BROKER_URL", "") or "")
    if "sqlite3" in engine and broker and not broker.startswith(("filesystem://", "memory://")):
        errors.append(
            checks.Warning(
                "SQLite with a network Celery broker: workers on other machines cannot share a SQLite file.",
                hint="Set DATABASE_URL to a PostgreSQL database when workers run on several machines.",
                id="rivet_workflows.W001",
            )
        )

    if not getattr(settings, "CHANNEL_LAYERS", None):
        errors.append(
            checks.Warning(
                "No channel layer is configured: broadcasts and live history updates are dropped.",
                hint="Set CHANNEL_LAYERS (channels_redis with REDIS_URL in production).",
                id="rivet_workflows.W002",
            )
        )

    if conf.SWEEP_INTERVAL >= conf.LEASE_SECONDS:
        errors.append(
            checks.Warning(
                f"SWEEP_INTERVAL ({conf.SWEEP_INTERVAL:g}s) is not shorter than LEASE_SECONDS "
                f"({conf.LEASE_SECONDS:g}s): timers fire late and a dead worker's actors wait a full sweep.",
                hint="Keep SWEEP_INTERVAL well below LEASE_SECONDS (defaults: 1 s and 30 s).",
                id="rivet_workflows.W005",
            )
        )
    errors.extend(_check_auth(conf))
    errors.extend(_check_step_timeouts(registry, conf.LEASE_SECONDS))
    errors.extend(check_shards(conf.SHARDS, conf.SHARD_BUCKETS))
    return errors


def check_shards(aliases: Any, buckets: int) -> list[checks.CheckMessage]:
    """E004 for a ``SHARDS`` list that cannot work (DESIGN.md section 21): an alias missing from
    ``settings.DATABASES``, an alias named twice, ``SHARD_BUCKETS`` below the number of shards or above
    65536, shards on different database vendors (one store class serves them all). ``aliases``: the
    resolved ``SHARDS`` (a tuple, or None: not sharded, nothing to check)."""
    from .engine.model.shards import MAX_BUCKETS

    if aliases is None:
        return []
    problems = []
    missing = [a for a in aliases if a not in settings.DATABASES]
    if missing:
        problems.append(f"SHARDS names aliases missing from DATABASES: {missing}")
    if len(set(aliases)) != len(aliases):
        problems.append(f"SHARDS names an alias twice: {list(aliases)}")
    engines = {settings.DATABASES[a].get("ENGINE", "") for a in aliases if a in settings.DATABASES}
    if len(engines) > 1:
        problems.append(f"the shards use different database engines: {sorted(engines)}")
    found = [
        checks.Error(
            f"RIVET_WORKFLOWS['SHARDS'] is invalid: {problem}",
            hint="List DATABASES aliases of one vendor; see docs/reference/settings.md (SHARDS).",
            id="rivet_workflows.E004",
        )
        for problem in problems
    ]
    wrong = None
    if buckets < len(aliases):
        wrong = f"{buckets} is below the number of shards ({len(aliases)}): each shard needs a bucket"
    elif buckets > MAX_BUCKETS:
        wrong = f"{buckets} is above {MAX_BUCKETS} (an actor id carries the bucket in 16 bits)"
    if wrong:
        found.append(
            checks.Error(
                f"RIVET_WORKFLOWS['SHARD_BUCKETS'] is invalid: {wrong}",
                hint=f"SHARD_BUCKETS is the number of hash buckets the shards share: from the number of "
                f"shards to {MAX_BUCKETS} (default 256), fixed for the life of the data; see "
                "docs/reference/settings.md (SHARD_BUCKETS).",
                id="rivet_workflows.E004",
            )
        )
    return found


@checks.register(checks.Tags.compatibility)
def check_dispatcher(app_configs: Any = None, **kwargs: Any) -> list[checks.CheckMessage]:
    """E005 when ``RIVET_WORKFLOWS["DISPATCHER"]`` does not import to a class (every client call would fail
    on it). An invalid RIVET_WORKFLOWS is E001's: nothing here then."""
    from django.utils.module_loading import import_string

    from .conf import RivetSettings

    try:
        conf = RivetSettings.load()
    except (ValueError, TypeError):
        return []
    try:
        found = import_string(conf.DISPATCHER)
    except ImportError as exc:
        problem = f"cannot be imported: {exc}"
    else:
        problem = None if isinstance(found, type) else f"is a {type(found).__name__}, not a class"
    if problem is None:
        return []
    return [
        checks.Error(
            f"RIVET_WORKFLOWS['DISPATCHER'] = {conf.DISPATCHER!r} {problem}",
            hint="Give the full dotted path of the dispatcher class: "
            "'rivet_workflows.driver.dispatch.CeleryDispatcher' (the default) or "
            "'rivet_workflows.driver.dispatch.LocalDispatcher'.",
            id="rivet_workflows.E005",
        )
    ]


def _in_migrate() -> bool:
    """True when the checks run inside ``manage.py migrate`` (Django's command, or a project's subclass of
    it): the migrate that creates the tables runs the database checks first, and W008 would tell a new
    project's first ``migrate`` to run itself."""
    from django.core.management.commands.migrate import Command as Migrate

    frame = sys._getframe(1)
    while frame is not None:
        # Django runs a command's checks from BaseCommand.execute (5.2.x and later) or migrate's handle
        if isinstance(frame.f_locals.get("self"), Migrate):
            return True
        frame = frame.f_back
    return False


#: a table every migrated database of this app has (``models.Actor``)
_ACTOR_TABLE = "rivet_workflows_actor"


@checks.register(checks.Tags.database)
def check_shard_tables(
    app_configs: Any = None, databases: Any = None, **kwargs: Any
) -> list[checks.CheckMessage]:
    """W008 for a database holding actors (``SHARDS``, or ``default``) without this app's tables: its
    queries would fail with ``relation "rivet_workflows_actor" does not exist`` (DESIGN.md section 21).
    A database check: run for the aliases ``manage.py check --database <alias>`` (or ``--database
    default --database shard1``) names, never without them, and silent inside ``migrate`` (which runs the
    database checks before it creates the tables this one looks for). A database that cannot be reached is reported
    as such (W008 too)."""
    from django.db import DatabaseError, connections

    from . import sharding

    if not databases or _in_migrate():
        return []
    try:
        holding = sharding.aliases()
    except (ValueError, TypeError):
        return []  # E001
    sharded = " (RIVET_WORKFLOWS['SHARDS'])" if len(holding) > 1 else ""
    found: list[checks.CheckMessage] = []
    for alias in [a for a in holding if a in databases and a in settings.DATABASES]:
        try:
            with connections[alias].cursor() as cursor:
                tables = connections[alias].introspection.table_names(cursor)
        except DatabaseError as exc:
            found.append(
                checks.Warning(
                    f"database {alias!r} (a shard of RIVET_WORKFLOWS['SHARDS']) cannot be reached: {exc}",
                    hint=f"Check DATABASES[{alias!r}] and that its server is up; then run "
                    f"`manage.py migrate --database {alias}`.",
                    id="rivet_workflows.W008",
                )
            )
            continue
        if _ACTOR_TABLE not in tables:
            found.append(
                checks.Warning(
                    f"database {alias!r} holds actors{sharded} but has no rivet_workflows tables (no "
                    f"{_ACTOR_TABLE!r})",
                    hint=f"Run `manage.py migrate --database {alias}`.",
                    id="rivet_workflows.W008",
                )
            )
    return found


def _check_auth(conf: Any) -> list[checks.CheckMessage]:
    """E003 for an API_AUTH/AUTHORIZE path that does not import to a callable; W006 for DEV_MODE without DEBUG."""
    from django.utils.module_loading import import_string

    found: list[checks.CheckMessage] = []
    for key in ("API_AUTH", "AUTHORIZE"):
        path = getattr(conf, key)
        if not path:
            continue
        try:
            target = import_string(path)
        except ImportError as exc:
            problem = f"cannot be imported: {exc}"
        else:
            problem = None if callable(target) else f"is a {type(target).__name__}, not a callable"
        if problem:
            found.append(
                checks.Warning(
                    f"RIVET_WORKFLOWS[{key!r}] = {path!r} {problem}",
                    hint="Give the dotted path of a function (the manual, docs/howto/authorization.md).",
                    id="rivet_workflows.E003",
                )
            )
    if conf.DEV_MODE and not settings.DEBUG:
        found.append(
            checks.Warning(
                "RIVET_WORKFLOWS['DEV_MODE'] is on while DEBUG is off: the inspector endpoints and WebSocket "
                "(and, with dev_mode_api_auth, the actor API) accept anonymous callers.",
                hint="Remove DEV_MODE (it defaults to DEBUG) or set it to False outside development.",
                id="rivet_workflows.W006",
            )
        )
    return found


def _check_step_timeouts(registry: Any, lease_seconds: float) -> list[checks.CheckMessage]:
    """W003 for actors whose ``options["step_timeout"]`` (seconds) exceeds the lease.

    Per-call ``ctx.step(timeout=...)`` values cannot be seen before the code runs; the executor's
    heartbeat keeps the lease alive during them, so only the declared default is checked here.
    """
    out: list[checks.CheckMessage] = []
    if registry is None or not hasattr(registry, "names"):
        return out
    for name in registry.names():
        options = getattr(registry.get(name), "options", None) or {}
        timeout = options.get("step_timeout")
        if isinstance(timeout, int | float) and timeout > lease_seconds:
            out.append(
                checks.Warning(
                    f"Actor {name!r} has a step timeout of {timeout}s, longer than LEASE_SECONDS={lease_seconds}s.",
                    hint="Raise RIVET_WORKFLOWS['LEASE_SECONDS'] or shorten the step timeout.",
                    id="rivet_workflows.W003",
                )
            )
    return out


def in_memory_layer_misses_workers(dispatcher: str | None = None) -> bool:
    """True when the default channel layer is ``InMemoryChannelLayer`` while work runs in separate worker
    processes, so their history pushes and broadcasts never reach this process's WebSocket clients.

    ``dispatcher`` is the dotted path of RIVET_WORKFLOWS["DISPATCHER"] (read from the settings when None).
    Work runs in this process only with ``LocalDispatcher`` or Celery's in-process ``memory://`` broker; any
    other broker (the embedded ``filesystem://`` one included) means worker processes of their own.
    """
    if dispatcher is None:
        from .conf import rivet_settings

        dispatcher = rivet_settings.DISPATCHER
    layers = getattr(settings, "CHANNEL_LAYERS", None) or {}
    backend = str(layers.get("default", {}).get("BACKEND", ""))
    if not backend.endswith("InMemoryChannelLayer"):
        return False
    if str(dispatcher).endswith("LocalDispatcher"):
        return False
    broker = str(getattr(settings, "CELERY_BROKER_URL", "") or "")
    return not broker.startswith("memory://")


@checks.register(checks.Tags.compatibility, deploy=True)
def check_channel_layer(app_configs: Any = None, **kwargs: Any) -> list[checks.CheckMessage]:
    """``manage.py check --deploy``: W004 when the default channel layer is in-memory while workers run in
    processes of their own (``in_memory_layer_misses_workers``): their history pushes and broadcasts never
    reach WebSocket clients. A deploy check, not one every command runs: it is what the manual's
    one-machine setup (SQLite, the filesystem broker, ``InMemoryChannelLayer``) always has, and there the
    admin trace says it polls instead. An invalid RIVET_WORKFLOWS is E001's: nothing here then."""
    from .conf import RivetSettings

    try:
        conf = RivetSettings.load()
    except (ValueError, TypeError):
        return []
    if not in_memory_layer_misses_workers(conf.DISPATCHER):
        return []
    return [
        checks.Warning(
            "In-memory channel layer with Celery worker processes (the filesystem:// broker too): their "
            "history pushes and broadcasts never reach WebSocket clients; the admin trace polls instead.",
            hint="Use channels_redis (REDIS_URL in the example project); or add rivet_workflows.W004 to "
            "SILENCED_SYSTEM_CHECKS if every worker runs inside the web process.",
            id="rivet_workflows.W004",
        )
    ]


@checks.register(checks.Tags.compatibility)
def check_redis_layer_timeout(app_configs: Any = None, **kwargs: Any) -> list[checks.CheckMessage]:
    """W009 when the default channel layer is channels-redis's ``RedisChannelLayer`` and a host of it would
    use redis-py's default socket timeout (5 s since redis-py 8) while the layer waits up to
    ``brpop_timeout`` (5 s) for a message: every WebSocket idle that long ends with ``Timeout reading from
    ...`` and the admin trace falls back to polling (a trial finding). A host given as a dict with
    ``socket_timeout`` (or a URL with ``?socket_timeout=``) above ``brpop_timeout`` passes."""
    from urllib.parse import parse_qs, urlsplit

    layer = (getattr(settings, "CHANNEL_LAYERS", None) or {}).get("default") or {}
    if layer.get("BACKEND") != "channels_redis.core.RedisChannelLayer":
        return []
    try:
        from channels_redis.core import RedisChannelLayer
        from redis import _defaults
    except ImportError:  # redis-py before 8 has no default socket timeout
        return []
    wait = float(RedisChannelLayer.brpop_timeout)
    default = getattr(_defaults, "DEFAULT_SOCKET_TIMEOUT", None)
    found: list[checks.CheckMessage] = []
    for host in (layer.get("CONFIG") or {}).get("hosts") or ["redis://localhost:6379"]:
        if isinstance(host, dict):
            timeout = host.get("socket_timeout", default)
        elif isinstance(host, str):
            given = parse_qs(urlsplit(host).query).get("socket_timeout")
            timeout = float(given[0]) if given else default
        else:
            continue
        if timeout is not None and float(timeout) <= wait:
            found.append(
                checks.Warning(
                    f"CHANNEL_LAYERS['default'] host {host!r} has a socket timeout of {timeout} s, not more "
                    f"than the {wait:g} s channels-redis waits for a message: every WebSocket idle that "
                    'long is closed ("Timeout reading from ...") and the admin trace falls back to polling.',
                    hint='Give the host as a dict: {"address": REDIS_URL, "socket_timeout": 10} '
                    "(docs/reference/live-events.md).",
                    id="rivet_workflows.W009",
                )
            )
    return found


@checks.register(checks.Tags.compatibility, deploy=True)
def check_code_version(app_configs: Any = None, **kwargs: Any) -> list[checks.CheckMessage]:
    """``manage.py check --deploy``: W007 when workers would run without ``CODE_VERSION`` (Celery
    dispatcher, neither ``RIVET_WORKFLOWS["CODE_VERSION"]`` nor ``RIVET_CODE_VERSION`` set): during a
    rolling deploy an old-code worker would then fail runs new-code workers advanced (DESIGN.md section 12).
    """
    from .conf import RivetSettings

    try:
        conf = RivetSettings.load()
    except (ValueError, TypeError):
        return []  # check_settings reports E001
    if conf.CODE_VERSION is not None or not conf.DISPATCHER.endswith("CeleryDispatcher"):
        return []
    return [
        checks.Warning(
            "CODE_VERSION is not set: during a rolling deploy an old-code worker fails the runs that "
            "new-code workers took past a change (HistoryDivergedError) instead of leaving them to them.",
            hint="Set RIVET_CODE_VERSION (a release tag or git sha) in every process's environment, or "
            'RIVET_WORKFLOWS["CODE_VERSION"]; see the manual, docs/howto/deploys.md.',
            id="rivet_workflows.W007",
        )
    ]
