"""System checks added for operations: W004 in-memory channel layer with worker processes,
W005 a sweep interval not shorter than the lease."""

from __future__ import annotations

import io

import pytest
from django.core.management import call_command
from django.core.management.base import SystemCheckError

from rivet_workflows.checks import check_channel_layer, check_dispatcher, check_settings

REGISTRY = "tests.integration.workflows.registry"


def ids(messages) -> list[str]:
    return [m.id for m in messages]


def test_in_memory_layer_with_worker_processes_warns(settings) -> None:
    settings.RIVET_WORKFLOWS = {"REGISTRY": REGISTRY}
    settings.CHANNEL_LAYERS = {"default": {"BACKEND": "channels.layers.InMemoryChannelLayer"}}
    # Celery workers are separate processes with a network broker and with the embedded filesystem one
    for broker in ("redis://127.0.0.1:6379/0", "filesystem://"):
        settings.CELERY_BROKER_URL = broker
        messages = [m for m in check_channel_layer() if m.id == "rivet_workflows.W004"]
        assert len(messages) == 1, broker
        assert "REDIS_URL" in messages[0].hint and "channels_redis" in messages[0].hint
    # work that runs inside the web process reaches its in-memory layer: no warning
    settings.CELERY_BROKER_URL = "memory://"
    assert "rivet_workflows.W004" not in ids(check_channel_layer())
    settings.CELERY_BROKER_URL = "filesystem://"
    settings.RIVET_WORKFLOWS = {
        "REGISTRY": REGISTRY,
        "DISPATCHER": "rivet_workflows.driver.dispatch.LocalDispatcher",
    }
    assert "rivet_workflows.W004" not in ids(check_channel_layer())
    # a shared channel layer carries worker events
    settings.RIVET_WORKFLOWS = {"REGISTRY": REGISTRY}
    settings.CHANNEL_LAYERS = {"default": {"BACKEND": "channels_redis.core.RedisChannelLayer"}}
    assert "rivet_workflows.W004" not in ids(check_channel_layer())


def test_sweep_interval_not_below_the_lease_warns(settings) -> None:
    settings.RIVET_WORKFLOWS = {"REGISTRY": REGISTRY, "LEASE_SECONDS": 5, "SWEEP_INTERVAL": 5}
    messages = [m for m in check_settings() if m.id == "rivet_workflows.W005"]
    assert len(messages) == 1 and "SWEEP_INTERVAL" in messages[0].hint
    settings.RIVET_WORKFLOWS = {"REGISTRY": REGISTRY, "LEASE_SECONDS": 30, "SWEEP_INTERVAL": 1}
    assert "rivet_workflows.W005" not in ids(check_settings())


def _readme_setup(settings) -> None:
    """The manual's settings block for one machine (docs/tutorial/install.md): the in-memory channel layer, Celery on the embedded
    filesystem broker (worker processes of their own)."""
    settings.RIVET_WORKFLOWS = {"REGISTRY": REGISTRY}
    settings.CHANNEL_LAYERS = {"default": {"BACKEND": "channels.layers.InMemoryChannelLayer"}}
    settings.CELERY_BROKER_URL = "filesystem://"
    settings.TASKS = {}  # no Django task backend (this project's needs its workflow in the registry)


# Django 6.1 runs the model checks of a command over every configured alias (databases=None means all of
# them), and the JSONField check asks SQLite's features of each: the test settings' second alias included.
@pytest.mark.django_db(databases=["default", "shard1"])
def test_the_readmes_setup_prints_no_warning_on_commands_but_check_deploy_has_w004(settings) -> None:
    _readme_setup(settings)
    for args, options in ((("rivet", "list"), {"skip_checks": False}), (("check",), {})):
        err = io.StringIO()
        call_command(*args, **options, stdout=io.StringIO(), stderr=err)  # checks run as from manage.py
        assert "W004" not in err.getvalue() and "WARNINGS" not in err.getvalue(), args
    err = io.StringIO()
    call_command("check", deploy=True, stdout=io.StringIO(), stderr=err)
    assert "rivet_workflows.W004" in err.getvalue()


@pytest.mark.django_db
def test_a_new_projects_first_migrate_is_not_told_to_migrate(monkeypatch) -> None:
    """A database without the app's tables gets W008 from ``check --database`` (naming no SHARDS when the
    project has none), but not from the ``migrate`` that creates them (a trial finding: every new project's
    first ``migrate`` printed it)."""
    from django.db import connection

    from rivet_workflows.checks import check_shard_tables

    monkeypatch.setattr(connection.introspection, "table_names", lambda *a, **k: ["django_migrations"])
    found = check_shard_tables(databases=["default"])
    assert [m.id for m in found] == ["rivet_workflows.W008"]
    assert "SHARDS" not in found[0].msg and "migrate --database default" in found[0].hint
    err = io.StringIO()
    call_command("check", databases=["default"], stdout=io.StringIO(), stderr=err)
    assert "rivet_workflows.W008" in err.getvalue()
    err = io.StringIO()
    call_command("migrate", verbosity=0, skip_checks=False, stdout=io.StringIO(), stderr=err)  # as manage.py
    assert "W008" not in err.getvalue()


@pytest.mark.parametrize(
    ("hosts", "warned"),
    [
        (["redis://127.0.0.1:6379/0"], True),  # redis-py 8's default: 5 s
        ([{"address": "redis://127.0.0.1:6379/0"}], True),
        ([{"address": "redis://127.0.0.1:6379/0", "socket_timeout": 5}], True),
        ([{"address": "redis://127.0.0.1:6379/0", "socket_timeout": 10}], False),
        ([{"address": "redis://127.0.0.1:6379/0", "socket_timeout": None}], False),
        (["redis://127.0.0.1:6379/0?socket_timeout=10"], False),
    ],
)
def test_a_redis_layer_that_would_time_out_idle_websockets_is_w009(settings, hosts, warned) -> None:
    """A trial finding: with redis-py 8 (default socket timeout 5 s) channels-redis's 5 s wait for a message
    timed every idle WebSocket out, and the admin trace fell back to polling."""
    from rivet_workflows.checks import check_redis_layer_timeout

    defaults = pytest.importorskip("redis._defaults", reason="redis-py before 8 sets no socket timeout")
    if getattr(defaults, "DEFAULT_SOCKET_TIMEOUT", None) is None:
        pytest.skip("this redis-py sets no default socket timeout")
    settings.CHANNEL_LAYERS = {
        "default": {"BACKEND": "channels_redis.core.RedisChannelLayer", "CONFIG": {"hosts": hosts}}
    }
    found = check_redis_layer_timeout()
    assert [m.id for m in found] == (["rivet_workflows.W009"] if warned else [])
    if warned:
        assert "socket_timeout" in found[0].hint
    settings.CHANNEL_LAYERS = {"default": {"BACKEND": "channels.layers.InMemoryChannelLayer"}}
    assert check_redis_layer_timeout() == []


@pytest.mark.parametrize(
    ("dispatcher", "says"),
    [
        ("LocalDispatcher", "cannot be imported"),
        ("rivet_workflows.driver.dispatch.Nope", "cannot be imported"),
        ("rivet_workflows.driver.dispatch.HINT_PRIORITY", "not a class"),
    ],
)
def test_a_dispatcher_that_does_not_import_is_error_e005(settings, dispatcher, says) -> None:
    settings.RIVET_WORKFLOWS = {"REGISTRY": REGISTRY, "DISPATCHER": dispatcher}
    out, err = io.StringIO(), io.StringIO()
    with pytest.raises(SystemCheckError) as caught:
        call_command("check", stdout=out, stderr=err)
    text = str(caught.value)
    assert "rivet_workflows.E005" in text and repr(dispatcher) in text and says in text
    assert "'rivet_workflows.driver.dispatch.LocalDispatcher'" in text
    assert "'rivet_workflows.driver.dispatch.CeleryDispatcher'" in text
    settings.RIVET_WORKFLOWS = {
        "REGISTRY": REGISTRY,
        "DISPATCHER": "rivet_workflows.driver.dispatch.LocalDispatcher",
    }
    assert "rivet_workflows.E005" not in ids(check_dispatcher())
