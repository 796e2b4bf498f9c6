"""A Django task enqueued on WorkflowBackend runs on a real Celery worker and survives a SIGKILL of that
worker mid-task: another worker takes it over once the lease expires (docs/howto/django-tasks.md)."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.system

REGISTRY = "tests.contrib.registry.registry"


@pytest.fixture
def tasks_on(settings, cluster):
    """The test process enqueues on the tests' registry; its wake-ups are only recorded, so the cluster's
    sweep hands each task to a worker (workers run the same registry)."""
    from rivet_workflows import django_runtime

    settings.RIVET_WORKFLOWS = {
        "REGISTRY": REGISTRY,
        "DISPATCHER": "rivet_workflows.driver.dispatch.LocalDispatcher",
    }
    cluster.env["RIVET_REGISTRY"] = REGISTRY
    django_runtime.reset_runtime()
    yield cluster
    django_runtime.reset_runtime()


def test_a_task_survives_a_worker_killed_mid_run(tasks_on, tmp_path):
    from tests.contrib import tasks

    try:
        from django.tasks import TaskResultStatus
    except ImportError:
        from django_tasks import TaskResultStatus

    cluster = tasks_on
    log = tmp_path / "tasks.log"
    log.touch()
    first = cluster.start_worker(concurrency=2, RIVET_TASK_LOG=str(log))
    result = tasks.slow_logged.enqueue("report", 2.5)
    cluster.wait_for(lambda: "start report" in log.read_text(), timeout=60, what="the task to start")
    result.refresh()
    assert result.status == TaskResultStatus.RUNNING and result.attempts == 1 and result.started_at
    first.kill()  # SIGKILL of its whole process group, mid-task

    cluster.start_worker(concurrency=2, RIVET_TASK_LOG=str(log))

    def finished():
        result.refresh()
        return result.is_finished

    cluster.wait_for(finished, timeout=90, what="the task to finish on the second worker")
    assert result.status == TaskResultStatus.SUCCESSFUL and result.return_value == "report"
    lines = log.read_text().splitlines()
    starts = [line for line in lines if line.startswith("start report")]
    ends = [line for line in lines if line.startswith("end report")]
    assert len(starts) == 2 and len(ends) == 1, lines  # the killed attempt never ended; the retry did
    assert starts[0].split()[-1] != ends[0].split()[-1]  # on another worker process
    assert result.attempts == 2
