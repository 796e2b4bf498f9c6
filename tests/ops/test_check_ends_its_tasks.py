"""``rivet check`` ends every task its dry run started: a run inside a join prints no asyncio traceback."""

from __future__ import annotations

import gc
import io
import logging

import pytest
from django.core.management import call_command

from rivet_workflows import django_runtime
from rivet_workflows.engine.model import ports

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def fanout(settings):
    settings.RIVET_WORKFLOWS = {
        "REGISTRY": "tests.ops.join_registry.registry",
        "DISPATCHER": "rivet_workflows.driver.dispatch.LocalDispatcher",
        "LIVE_WAIT_THRESHOLD": 0.0,
        "POLL_INTERVAL": 0.01,
    }
    django_runtime.reset_runtime()
    yield django_runtime.client().fanout
    django_runtime.reset_runtime()


def test_check_of_a_run_inside_a_join_prints_no_task_traceback(fanout, capsys, caplog):
    handle = fanout.get_or_create("order-1")
    django_runtime.drain(timeout=2)
    assert handle.workflow_state() == ports.SLEEPING
    # both branches can move on: the dry run replays each up to its next step, where it stops
    handle.send("qa", 1)
    handle.send("qb", 2)
    out = io.StringIO()
    with caplog.at_level(logging.DEBUG):
        call_command("rivet", "check", stdout=out)  # exit code 0: no CommandError
        gc.collect()  # an unretrieved task exception is reported when the task is collected
    report = out.getvalue()
    assert f'ok       fanout ["order-1"] {handle.actor_id} [sleeping]' in report
    assert "checked 1 in-flight workflow: 0 problems" in report
    stderr = capsys.readouterr().err
    assert "Traceback" not in stderr and "never retrieved" not in stderr
    assert not [r for r in caplog.records if "never retrieved" in r.getMessage()]
    assert not [r for r in caplog.records if r.name == "asyncio" and r.levelno >= logging.ERROR]

    # the run itself goes on as recorded
    django_runtime.drain(timeout=2)
    assert handle.workflow_state() == ports.COMPLETED
