"""rivet_workflows.contrib.django_tasks.WorkflowBackend: Django's Tasks framework (django.tasks on Django
6, the django-tasks backport on 5.2) with every task a durable one-step workflow (docs/howto/django-tasks.md).

Runs on SQLite and, with DATABASE_URL, on PostgreSQL; work runs with the in-process drain or eager Celery
(tests/system/test_django_tasks_worker.py runs it on real worker processes).
"""

from __future__ import annotations

from datetime import timedelta

import pytest
from asgiref.sync import async_to_sync
from django.db import transaction
from django.urls import reverse
from django.utils import timezone

from rivet_workflows import models
from rivet_workflows.contrib import django_tasks as backend_module
from tests.contrib import tasks
from tests.contrib.conftest import tasks_setting

try:  # Django 6
    from django.tasks import TaskResultStatus, task_backends
    from django.tasks.exceptions import InvalidTask, TaskResultDoesNotExist, TaskResultMismatch
except ImportError:  # Django 5.2 + backport
    from django_tasks import TaskResultStatus, task_backends
    from django_tasks.exceptions import InvalidTaskError as InvalidTask
    from django_tasks.exceptions import TaskResultDoesNotExist, TaskResultMismatch

pytestmark = pytest.mark.django_db(transaction=True)


def default_backend():
    return task_backends["default"]


def test_the_configured_backend_is_the_workflow_backend(rivet_tasks):
    backend = default_backend()
    assert type(backend).__name__ == "WorkflowBackend"
    assert backend.supports_defer and backend.supports_async_task
    assert backend.supports_get_result and backend.supports_priority


def test_an_enqueued_task_is_a_workflow_that_runs_and_returns_its_value(rivet_tasks):
    result = tasks.add.enqueue(2, b=3)
    assert result.status == TaskResultStatus.READY and not result.is_finished
    assert result.args == [2] and result.kwargs == {"b": 3} and result.backend == "default"
    actor = models.Actor.objects.get(pk=result.id)  # the task result's id is its actor's id
    assert actor.name == "django_task" and actor.workflow_state == "pending"
    assert tasks.CALLS["add", 2, 3] == 0  # nothing runs before a worker (here: the drain) takes it

    rivet_tasks.drain(timeout=5)

    assert tasks.CALLS["add", 2, 3] == 1
    result.refresh()
    assert result.status == TaskResultStatus.SUCCESSFUL and result.is_finished
    assert result.return_value == {"sum": 5} and result.errors == [] and result.attempts == 1
    assert result.enqueued_at <= result.started_at <= result.finished_at
    fetched = tasks.add.get_result(result.id)
    assert fetched.status == TaskResultStatus.SUCCESSFUL and fetched.return_value == {"sum": 5}
    assert fetched.task.func is tasks.add.func and fetched.args == [2] and fetched.kwargs == {"b": 3}


def test_a_task_shows_in_the_admin_trace_like_any_run(rivet_tasks, admin_client):
    result = tasks.add.enqueue(1, 1)
    rivet_tasks.drain(timeout=5)
    html = admin_client.get(reverse("admin:rivet_workflows_actor_change", args=[result.id])).content.decode()
    assert "django_task" in html and "tests.contrib.tasks.add" in html
    assert ">add<" in html or "add</" in html  # the task's step, named after the function


def test_a_failing_task_is_retried_then_failed_with_its_error(rivet_tasks, settings):
    settings.TASKS = tasks_setting(MAX_RETRIES=2)
    result = tasks.fail.enqueue("no stock")
    rivet_tasks.drain(timeout=5)

    assert tasks.CALLS["fail", "no stock"] == 3  # the first attempt and two retries
    result.refresh()
    assert result.status == TaskResultStatus.FAILED and result.is_finished and result.attempts == 3
    with pytest.raises(ValueError):
        result.return_value  # noqa: B018 (Django: a failed task has no return value)
    [error] = result.errors
    assert error.exception_class_path == "tests.contrib.tasks.Boom"
    assert error.exception_class is tasks.Boom
    assert "no stock" in error.traceback and "raise Boom(message)" in error.traceback
    assert models.Actor.objects.get(pk=result.id).workflow_state == "failed"


def test_a_builtin_exception_resolves_to_its_class(rivet_tasks, settings):
    settings.TASKS = tasks_setting(MAX_RETRIES=0)
    result = tasks.flaky.enqueue("always", 99)
    rivet_tasks.drain(timeout=5)
    result.refresh()
    assert result.status == TaskResultStatus.FAILED and result.attempts == 1
    assert result.errors[0].exception_class_path == "builtins.ValueError"
    assert result.errors[0].exception_class is ValueError


def test_a_flaky_task_succeeds_on_a_retry(rivet_tasks):
    result = tasks.flaky.enqueue("twice", 2)
    rivet_tasks.drain(timeout=5)
    result.refresh()
    assert result.status == TaskResultStatus.SUCCESSFUL and result.return_value == 3
    assert result.attempts == 3 and result.errors == []


def test_a_task_that_takes_its_context_sees_its_attempt_and_id(rivet_tasks):
    result = tasks.which_attempt.enqueue("ctx", 1)
    rivet_tasks.drain(timeout=5)
    result.refresh()
    assert result.status == TaskResultStatus.SUCCESSFUL
    assert result.return_value == {"attempt": 2, "id": result.id}
    assert tasks.CALLS["which_attempt status", TaskResultStatus.RUNNING] == 2


def test_an_async_task_function_runs(rivet_tasks):
    result = tasks.async_double.enqueue(21)
    rivet_tasks.drain(timeout=5)
    result.refresh()
    assert result.status == TaskResultStatus.SUCCESSFUL and result.return_value == 42


def test_aenqueue_and_aget_result(rivet_tasks):
    async def enqueue():
        return await tasks.add.aenqueue(5, 6)

    result = async_to_sync(enqueue)()  # as in a Django async view: the ORM stays on this thread
    rivet_tasks.drain(timeout=5)

    async def read():
        fetched = await tasks.add.aget_result(result.id)
        await result.arefresh()
        return fetched

    fetched = async_to_sync(read)()
    assert fetched.return_value == result.return_value == {"sum": 11}


def test_run_after_is_a_durable_sleep(rivet_tasks):
    run_after = timezone.now() + timedelta(seconds=1.5)
    result = tasks.add.using(run_after=run_after).enqueue(4, 4)
    rivet_tasks.drain(timeout=0.3)
    result.refresh()
    assert result.status == TaskResultStatus.READY and tasks.CALLS["add", 4, 4] == 0
    actor = models.Actor.objects.get(pk=result.id)
    assert (
        actor.workflow_state == "sleeping" and actor.wake_at == run_after
    )  # the deadline is in the database

    rivet_tasks.drain(timeout=5)
    result.refresh()
    assert result.status == TaskResultStatus.SUCCESSFUL and result.started_at >= run_after
    assert tasks.add.using(run_after=run_after).get_result(result.id).task.run_after == run_after


def test_priority_is_the_actor_priority_and_the_queue_its_concurrency_group(rivet_tasks, settings):
    settings.TASKS = tasks_setting(ACTOR="one_per_queue_task")
    urgent = tasks.add.using(priority=50, queue_name="emails").enqueue(1, 2)
    report = tasks.add.using(priority=-10, queue_name="reports").enqueue(3, 4)
    rows = {a.actor_id: a for a in models.Actor.objects.all()}
    assert (rows[urgent.id].priority, rows[urgent.id].concurrency_key) == (50, "emails")
    assert (rows[report.id].priority, rows[report.id].concurrency_key) == (-10, "reports")
    assert rows[urgent.id].concurrency_limit == 1
    fetched = tasks.add.get_result(urgent.id)
    assert fetched.task.priority == 50 and fetched.task.queue_name == "emails"
    rivet_tasks.drain(timeout=5)
    for result in (urgent, report):
        result.refresh()
        assert result.status == TaskResultStatus.SUCCESSFUL


def test_higher_priority_tasks_run_first(rivet_tasks):
    low = [tasks.add.using(priority=-5).enqueue(i, 0) for i in range(3)]
    high = tasks.add.using(priority=90).enqueue(100, 0)
    rows = models.Actor.objects.order_by("-priority", "created_at").values_list("actor_id", flat=True)
    assert list(rows)[0] == high.id and len(low) == 3
    rivet_tasks.drain(timeout=5)
    first = min([tasks.add.get_result(r.id) for r in [*low, high]], key=lambda r: r.started_at)
    assert first.id == high.id


def test_enqueue_inside_a_rolled_back_transaction_leaves_nothing(eager_celery_tasks):
    with pytest.raises(RuntimeError), transaction.atomic():
        result = tasks.add.enqueue(7, 8)
        assert models.Actor.objects.filter(pk=result.id).exists()  # written in the caller's transaction
        raise RuntimeError("the view failed")
    assert not models.Actor.objects.exists()
    assert tasks.CALLS["add", 7, 8] == 0
    with pytest.raises(TaskResultDoesNotExist):
        tasks.add.get_result(result.id)


def test_enqueue_inside_a_transaction_takes_effect_on_commit(eager_celery_tasks):
    with transaction.atomic():
        result = tasks.add.enqueue(7, 9)
        assert tasks.CALLS["add", 7, 9] == 0  # the worker is woken only when the transaction commits
    assert tasks.CALLS["add", 7, 9] == 1
    result.refresh()
    assert result.status == TaskResultStatus.SUCCESSFUL and result.return_value == {"sum": 16}


def test_bad_tasks_and_arguments_are_refused_before_anything_is_written(rivet_tasks):
    with pytest.raises(InvalidTask, match="Queue"):
        tasks.add.using(queue_name="nope").enqueue(1, 2)
    with pytest.raises(InvalidTask, match="priority"):
        tasks.add.using(priority=500)
    with pytest.raises(InvalidTask, match="aware"):
        tasks.add.using(run_after=timezone.now().replace(tzinfo=None)).enqueue(1, 2)
    with pytest.raises(TypeError):
        tasks.add.enqueue(object(), 2)  # not JSON
    assert not models.Actor.objects.exists()


def test_unknown_results_and_results_of_another_task(rivet_tasks):
    with pytest.raises(TaskResultDoesNotExist):
        tasks.add.get_result("0" * 32)
    with pytest.raises(TaskResultDoesNotExist):
        default_backend().get_result("")
    other = tasks.fail.enqueue("x")
    with pytest.raises(TaskResultMismatch):
        tasks.add.get_result(other.id)
    # an actor of another type is no task result
    from rivet_workflows import django_runtime

    registry_actor = models.Actor.objects.create(
        name="something_else",
        key=["k"],
        key_text='["k"]',
        created_at=timezone.now(),
        updated_at=timezone.now(),
    )
    assert django_runtime.get_runtime()
    with pytest.raises(TaskResultDoesNotExist):
        default_backend().get_result(registry_actor.actor_id)


def test_bad_options_are_a_configuration_error(rivet_tasks, settings):
    from django.core.exceptions import ImproperlyConfigured

    for options in ({"MAX_RETRIES": -1}, {"TIMEOUT": "long"}, {"ACTOR": "not a name"}, {"RETRIES": 3}):
        settings.TASKS = tasks_setting(**options)
        with pytest.raises(ImproperlyConfigured):
            default_backend().supports_defer  # noqa: B018 (the backend is built on first use)


def test_the_check_names_a_registry_without_the_task_workflow(rivet_tasks, settings):
    settings.TASKS = tasks_setting(ACTOR="missing_task")
    messages = default_backend().check()
    assert [m.id for m in messages] == ["rivet_workflows.E101"]
    assert "missing_task" in messages[0].msg and "django_task" in messages[0].hint
    settings.TASKS = tasks_setting()
    assert default_backend().check() == []
    assert backend_module.DEFAULT_ACTOR == "django_task"
