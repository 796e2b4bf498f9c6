"""Rolling deploys in the operator's tools (case C65): ``rivet check`` and the admin show the runs that wait
for a worker of another code version, and a worker of the wrong version leaves such a run untouched."""

from __future__ import annotations

import io

import pytest
from django.core.management import CommandError, call_command
from django.urls import reverse

from rivet_workflows import django_runtime, models
from rivet_workflows.engine.model import ports

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def deploy(settings):
    """``deploy("v2", "2")``: the registry tests.ops.registries.v2 with CODE_VERSION "2"."""

    def switch(registry: str, version: str | None):
        settings.RIVET_WORKFLOWS = {
            "REGISTRY": f"tests.ops.registries.{registry}",
            "DISPATCHER": "rivet_workflows.driver.dispatch.LocalDispatcher",
            "LIVE_WAIT_THRESHOLD": 0.0,
            "POLL_INTERVAL": 0.01,
            "CODE_VERSION": version,
        }
        django_runtime.reset_runtime()
        return django_runtime.get_runtime()

    yield switch
    django_runtime.reset_runtime()


def _check(*args: str) -> tuple[str, CommandError | None]:
    out = io.StringIO()
    try:
        call_command("rivet", "check", *args, stdout=out)
    except CommandError as exc:
        return out.getvalue(), exc
    return out.getvalue(), None


def test_check_and_admin_show_a_run_waiting_for_another_code_version(deploy, client, django_user_model):
    runtime = deploy("v2", "2")  # the new code ("check" replaced "validate") on the new workers
    assert runtime.settings.code_version == "2"
    handle = django_runtime.client().flow.get_or_create("order-1")
    django_runtime.drain(timeout=2)
    assert handle.workflow_state() == ports.SLEEPING
    row = models.Actor.objects.get(pk=handle.actor_id)
    assert row.code_version == "2"
    assert set(models.HistoryEntry.objects.values_list("code_version", flat=True)) == {"2"}

    deploy("v1", "1")  # an old worker still running during the deploy
    report, error = _check()
    assert error is not None and handle.actor_id in report
    assert "on entries of code version '2'" in report
    assert "1 workflow diverges only on entries another code version wrote" in report
    before = list(models.HistoryEntry.objects.values_list("key", "status", "data", "code_version"))
    handle.send("go", 1)
    django_runtime.drain(timeout=0.5)
    row = models.Actor.objects.get(pk=handle.actor_id)
    assert (row.workflow_state, row.awaiting_code_version, row.error) == (ports.SLEEPING, "2", None)
    assert row.wake_at is not None and row.lease_owner is None
    assert list(models.HistoryEntry.objects.values_list("key", "status", "data", "code_version")) == before

    client.force_login(django_user_model.objects.create_superuser("root", password="pw"))
    listing = reverse("admin:rivet_workflows_actor_changelist")
    text = client.get(listing, {"awaiting_code_version": "*"}).content.decode()
    assert "order-1" in text and "code version 2" in text and "waiting for code version" in text
    assert "order-1" not in client.get(listing, {"awaiting_code_version": "9"}).content.decode()
    page = client.get(reverse("admin:rivet_workflows_actor_change", args=[handle.actor_id])).content.decode()
    assert "waiting for a worker of code version <code>2</code>" in page

    deploy("v2", "2")  # the deploy finished: the new code runs it
    report, error = _check()
    assert error is None and "waiting for code version '2'" in report
    assert "1 workflow waits for a worker of another code version: 2" in report
    handle.send("go", 2)  # a later send wakes it at once (the left run's backoff does not hold it)
    django_runtime.drain(timeout=2)
    row = models.Actor.objects.get(pk=handle.actor_id)
    assert (row.workflow_state, row.awaiting_code_version) == (ports.COMPLETED, None)
    assert handle.state() == {"validated": True, "finished": True}
