"""Case C57 in the admin: the trace lists every attempt of a step with its outcome, times and error."""

from __future__ import annotations

import re
from datetime import UTC, datetime

from django.urls import reverse

from rivet_workflows.admin import trace
from rivet_workflows.engine.model import definitions as d
from rivet_workflows.engine.model import ports
from rivet_workflows.engine.run import retry

from .test_trace_details import admin_client_  # noqa: F401 - fixture


def _flaky(step):
    if step.attempt < 3:
        raise ConnectionError(f"connection refused (try {step.attempt})")
    return "paid"


async def pay_run(ctx):
    await ctx.step("charge", _flaky, retry_backoff_base=0.001)


registry = d.setup(use={"payer": d.actor(run=d.workflow(pay_run))})


def test_the_trace_lists_each_attempt_and_the_errors_of_the_retried_ones(admin_client_, rivet):  # noqa: F811
    rivet.configure(REGISTRY="tests.admin.test_trace_attempts.registry")
    handle = rivet.client.payer.get_or_create("p1")
    rivet.drain()
    assert handle.workflow_state() == "completed"
    html = admin_client_.get(
        reverse("admin:rivet_workflows_actor_change", args=[handle.actor_id])
    ).content.decode()
    row = html[html.index('data-key="charge"') :]
    table = row[row.index('class="rivet-attempts"') : row.index("</table>")]
    attempts = re.findall(r'<tr data-attempt="(\d+)" data-outcome="([^"]+)">(.*?)</tr>', table, re.S)
    assert [(n, outcome) for n, outcome, _ in attempts] == [
        ("1", "failed"),
        ("2", "failed"),
        ("3", "completed"),
    ]
    assert "ConnectionError: connection refused (try 1)" in attempts[0][2]
    assert "ConnectionError: connection refused (try 2)" in attempts[1][2]
    assert "ConnectionError" not in attempts[2][2]
    assert len(re.findall(r"\d\d:\d\d:\d\d\.\d{3}", attempts[0][2])) == 2  # started and finished


def test_an_attempt_lost_with_its_worker_shows_worker_lost_and_never_finished():
    started = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)
    data = retry.start_attempt({}, 1, started)
    lost = {
        "name": "WorkerLostError",
        "message": "the executor running step 'charge' was lost during attempt 1",
    }
    data = retry.finish_attempt(data, 1, retry.ATTEMPT_WORKER_LOST, None, lost)
    data = retry.start_attempt(data, 2, started.replace(minute=1))
    entry = ports.EntryRecord(key="charge", location=["charge"], kind="step", data=data, attempts=2)
    entry.status = ports.ENTRY_RUNNING
    rows = trace.attempt_rows(entry)
    assert [(r.attempt, r.outcome, r.finished) for r in rows] == [
        (1, "worker lost", "never finished"),
        (2, "running", ""),
    ]
    assert rows[0].failed and rows[0].error.startswith("WorkerLostError: the executor running step")
