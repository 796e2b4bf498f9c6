"""Shared fixtures of the inspector test suites (api, admin, realtime, browser)."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import override_settings

from tests.api import registry as test_registry

BASE = {
    "REGISTRY": "tests.api.registry.registry",
    "DISPATCHER": "rivet_workflows.driver.dispatch.LocalDispatcher",
    "POLL_INTERVAL": 0.01,
    "LEASE_SECONDS": 5,
}


def api_user(django_user_model: Any, username: str = "alice", *codenames: str, **fields: Any) -> Any:
    """A user holding ``rivet_workflows.<codename>`` for each of ``codenames`` (default: ``use_actor_api``,
    the permission the actor API needs); ``fields`` go to ``create_user`` (``is_staff=True``...)."""
    from django.contrib.auth.models import Permission

    user = django_user_model.objects.create_user(username, password="pw", **fields)
    for codename in codenames or ("use_actor_api",):
        user.user_permissions.add(
            Permission.objects.get(codename=codename, content_type__app_label="rivet_workflows")
        )
    return django_user_model.objects.get(pk=user.pk)  # fresh: no cached permissions


class Rivet:
    """Test helper: the runtime of the current settings, a client, drain, and settings switches."""

    def __init__(self) -> None:
        self._override: Any = None
        self.configure()

    def configure(self, **options: Any) -> None:
        """Apply ``RIVET_WORKFLOWS = BASE | options`` (resets the runtime)."""
        if self._override is not None:
            self._override.disable()
        self._override = override_settings(RIVET_WORKFLOWS={**BASE, "DEV_MODE": True, **options})
        self._override.enable()

    def close(self) -> None:
        if self._override is not None:
            self._override.disable()
            self._override = None

    @property
    def runtime(self) -> Any:
        from rivet_workflows.django_runtime import get_runtime

        return get_runtime()

    @property
    def client(self) -> Any:
        return self.runtime.registry.client()

    def drain(self, timeout: float = 5.0) -> Any:
        from rivet_workflows.engine.runtime import executor

        return executor.drain(self.runtime, timeout=timeout)

    def failed_order(self, key: str = "o1") -> Any:
        """An ``order`` actor whose ``charge`` step failed (exhausted); FLAGS is reset to unbroken after."""
        test_registry.FLAGS["broken"] = True
        try:
            handle = self.client.order.get_or_create(key)
            self.drain()
        finally:
            test_registry.FLAGS["broken"] = False
        assert handle.workflow_state() == "failed"
        return handle


@pytest.fixture
def rivet(transactional_db: Any) -> Any:
    """A ``Rivet`` helper on the test registry (dev mode on; ``rivet.configure(DEV_MODE=False, ...)``)."""
    test_registry.FLAGS["broken"] = False
    helper = Rivet()
    yield helper
    helper.close()
    test_registry.FLAGS["broken"] = False
