"""RIVET_WORKFLOWS settings (typed, reloaded by override_settings) and the app's system checks."""

from __future__ import annotations

import pytest
from django.core import checks

from rivet_workflows.checks import check_settings
from rivet_workflows.conf import rivet_settings


def ids(messages):
    return sorted(m.id for m in messages)


def test_defaults_and_dev_mode_follows_debug(settings):
    settings.RIVET_WORKFLOWS = {"REGISTRY": "tests.integration.workflows.registry"}
    settings.DEBUG = False
    assert rivet_settings.LEASE_SECONDS == 30.0
    assert rivet_settings.MAX_PAYLOAD_BYTES == 1_048_576
    assert rivet_settings.DEV_MODE is False
    settings.DEBUG = True
    assert rivet_settings.DEV_MODE is True


def test_override_settings_takes_effect_at_once(settings):
    settings.RIVET_WORKFLOWS = {"REGISTRY": "tests.integration.workflows.registry", "LEASE_SECONDS": 5}
    assert rivet_settings.LEASE_SECONDS == 5.0
    settings.RIVET_WORKFLOWS = {"REGISTRY": "tests.integration.workflows.registry", "LEASE_SECONDS": "7.5"}
    assert rivet_settings.LEASE_SECONDS == 7.5


def test_project_settings_pass_the_checks():
    assert [m for m in check_settings() if m.level >= checks.ERROR] == []


def test_unknown_key_is_an_error(settings):
    settings.RIVET_WORKFLOWS = {"REGISTRY": "tests.integration.workflows.registry", "LEASE_SECOND": 5}
    assert ids(check_settings()) == ["rivet_workflows.E001"]
    with pytest.raises(ValueError, match="LEASE_SECOND"):
        rivet_settings.get()


@pytest.mark.parametrize("path", ["no.such.module.registry", "tests.integration.workflows.approval_run"])
def test_missing_or_wrong_registry_is_an_error(settings, path):
    settings.RIVET_WORKFLOWS = {"REGISTRY": path}
    messages = check_settings()
    assert "rivet_workflows.E002" in ids(messages)
    assert all(m.hint for m in messages)


def test_sqlite_with_a_network_broker_warns(settings):
    if "sqlite3" not in settings.DATABASES["default"]["ENGINE"]:
        pytest.skip("only meaningful on SQLite")
    settings.RIVET_WORKFLOWS = {"REGISTRY": "tests.integration.workflows.registry"}
    settings.CELERY_BROKER_URL = "redis://127.0.0.1:6379/0"
    assert "rivet_workflows.W001" in ids(check_settings())


def test_no_channel_layer_warns(settings):
    settings.RIVET_WORKFLOWS = {"REGISTRY": "tests.integration.workflows.registry"}
    settings.CHANNEL_LAYERS = {}
    assert "rivet_workflows.W002" in ids(check_settings())


def test_a_declared_step_timeout_longer_than_the_lease_warns(settings):
    # a shared channel layer, so W004 (in-memory layer with worker processes) stays out of the way
    settings.CHANNEL_LAYERS = {"default": {"BACKEND": "channels_redis.core.RedisChannelLayer"}}
    settings.RIVET_WORKFLOWS = {"REGISTRY": "tests.integration.workflows.slow_registry", "LEASE_SECONDS": 30}
    assert ids(check_settings()) == ["rivet_workflows.W003"]
    settings.RIVET_WORKFLOWS = {"REGISTRY": "tests.integration.workflows.slow_registry", "LEASE_SECONDS": 120}
    assert ids(check_settings()) == []


def test_code_version_comes_from_the_setting_or_the_environment(settings, monkeypatch):
    monkeypatch.delenv("RIVET_CODE_VERSION", raising=False)
    settings.RIVET_WORKFLOWS = {"REGISTRY": "tests.integration.workflows.registry"}
    assert rivet_settings.CODE_VERSION is None
    monkeypatch.setenv("RIVET_CODE_VERSION", " 2026.12.1 ")
    settings.RIVET_WORKFLOWS = {"REGISTRY": "tests.integration.workflows.registry"}  # reloads
    assert rivet_settings.CODE_VERSION == "2026.12.1"
    settings.RIVET_WORKFLOWS = {"REGISTRY": "tests.integration.workflows.registry", "CODE_VERSION": "abc1234"}
    assert rivet_settings.CODE_VERSION == "abc1234"  # the setting wins
    settings.RIVET_WORKFLOWS = {"REGISTRY": "tests.integration.workflows.registry", "CODE_VERSION": ""}
    assert rivet_settings.CODE_VERSION is None


def test_deploy_check_warns_when_workers_run_without_a_code_version(settings, monkeypatch):
    from rivet_workflows.checks import check_code_version

    monkeypatch.delenv("RIVET_CODE_VERSION", raising=False)
    settings.RIVET_WORKFLOWS = {"REGISTRY": "tests.integration.workflows.registry"}
    assert ids(check_code_version()) == ["rivet_workflows.W007"]
    assert "rivet_workflows.W007" not in ids(check_settings())  # only `manage.py check --deploy`
    monkeypatch.setenv("RIVET_CODE_VERSION", "v2")
    settings.RIVET_WORKFLOWS = {"REGISTRY": "tests.integration.workflows.registry"}
    assert ids(check_code_version()) == []
    settings.RIVET_WORKFLOWS = {
        "REGISTRY": "tests.integration.workflows.registry",
        "DISPATCHER": "rivet_workflows.driver.dispatch.LocalDispatcher",
        "CODE_VERSION": "",
    }
    assert ids(check_code_version()) == []  # no workers: drain() in one process
