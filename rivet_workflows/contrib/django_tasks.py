"""A durable backend for Django's Tasks framework (docs/howto/django-tasks.md).

``django.tasks`` on Django 6 and the ``django_tasks`` backport on Django 5.2 (``pip install
"rivet-workflows[tasks]"``) read the same ``TASKS`` setting; the same class serves both::

    TASKS = {"default": {"BACKEND": "rivet_workflows.contrib.django_tasks.WorkflowBackend",
                         "QUEUES": ["default", "emails"], "OPTIONS": {"MAX_RETRIES": 3}}}

and the registry lists the task workflow once: ``setup(use={**actors, "django_task": django_task})``.

Each ``task.enqueue(*args, **kwargs)`` creates a one-step workflow actor of that type (its actor id is the
``TaskResult.id``): a durable sleep until ``run_after`` when it is set, then the task function in a step
with retries. ``priority`` is the actor's priority and ``queue_name`` its concurrency group
(``task_workflow(concurrency=N)``: at most N tasks of each queue run at once). ``get_result(id)`` and
``result.refresh()`` read the actor: READY (created, deferred or waiting for a retry), RUNNING, SUCCESSFUL
(with the return value) or FAILED (with the task's errors). Inside ``transaction.atomic()`` the actor is
created in the caller's transaction and its wake-up is sent on commit: a rollback leaves nothing.
"""

from __future__ import annotations

import inspect
import secrets
from datetime import timedelta
from typing import Any

from django.core import checks
from django.utils import timezone
from django.utils.module_loading import import_string

from .. import django_runtime
from ..engine.model import ports
from ..engine.model.definitions import ActorDefinition, Concurrency, RateLimit, workflow
from ..engine.model.errors import ActorNotFoundError

try:  # Django 6: the Tasks framework is part of Django
    from django.tasks import base as tasks_base
    from django.tasks import exceptions as tasks_exceptions
    from django.tasks import signals as tasks_signals
    from django.tasks.backends.base import BaseTaskBackend
    from django.utils.json import normalize_json

    InvalidTask = tasks_exceptions.InvalidTask
    InvalidTaskBackend = tasks_exceptions.InvalidTaskBackend
except ImportError:  # Django 5.2: the django-tasks backport
    try:
        from django_tasks import base as tasks_base
        from django_tasks import exceptions as tasks_exceptions
        from django_tasks import signals as tasks_signals
        from django_tasks.backends.base import BaseTaskBackend
        from django_tasks.utils import normalize_json
    except ImportError as exc:
        raise ImportError(
            "rivet_workflows.contrib.django_tasks needs Django 6's django.tasks or, on Django 5.2, the "
            'django-tasks backport: pip install "rivet-workflows[tasks]"'
        ) from exc
    InvalidTask = tasks_exceptions.InvalidTaskError
    InvalidTaskBackend = tasks_exceptions.InvalidTaskBackendError

TaskResultStatus = tasks_base.TaskResultStatus
TaskResultDoesNotExist = tasks_exceptions.TaskResultDoesNotExist

#: the registry name of the task workflow (OPTIONS["ACTOR"] changes it)
DEFAULT_ACTOR = "django_task"
#: the name of the durable sleep until ``run_after`` in each task's history
RUN_AFTER_SLEEP = "run_after"

#: OPTIONS of the backend and their defaults: the task step's retries (``ctx.step``'s ``max_retries``,
#: backoff in seconds) and its timeout (seconds; None: none, a task may run as long as it needs)
DEFAULT_OPTIONS: dict[str, Any] = {
    "ACTOR": DEFAULT_ACTOR,
    "MAX_RETRIES": 3,
    "RETRY_BACKOFF_BASE": 1.0,
    "RETRY_BACKOFF_MAX": 300.0,
    "TIMEOUT": None,
}

#: workflow states of a task's actor -> the task's status (a sleeping actor waits for run_after or a retry)
STATUS_OF_STATE = {
    ports.PENDING: TaskResultStatus.READY,
    ports.SLEEPING: TaskResultStatus.READY,
    ports.PAUSED: TaskResultStatus.READY,
    ports.RUNNING: TaskResultStatus.RUNNING,
    ports.ROLLING_BACK: TaskResultStatus.RUNNING,
    ports.COMPLETED: TaskResultStatus.SUCCESSFUL,
    ports.FAILED: TaskResultStatus.FAILED,
    ports.CANCELLED: TaskResultStatus.FAILED,
}


# --- the task workflow ---------------------------------------------------------------------------------


def _task_state(spec: dict) -> dict:
    """The actor state of a task (what the admin shows beside the input): its path, queue and priority."""
    return {"task": spec["task"], "queue_name": spec["queue_name"], "priority": spec["priority"]}


def _queue_name(c: Any) -> str:
    return c.state["queue_name"]


def _priority(c: Any) -> int:
    return c.state["priority"]


def load_task(path: str) -> Any:
    """The ``Task`` at the dotted ``path`` (a module-level function decorated with ``@task``).

    Raises ``InvalidTask`` when the path imports nothing or something that is not a task."""
    try:
        task = import_string(path)
    except ImportError as exc:
        raise InvalidTask(f"the task {path!r} cannot be imported: {exc}") from exc
    if not isinstance(task, tasks_base.Task):
        raise InvalidTask(f"{path!r} is not a task (decorate the function with @task)")
    return task


def _mark_exception(exc: BaseException) -> None:
    """Record the exception's importable class path on it: its stored error then carries it (in its
    metadata), which ``TaskError.exception_class_path`` needs (the stored name is the bare class name)."""
    try:
        exc.exception_class_path = f"{type(exc).__module__}.{type(exc).__qualname__}"
    except (AttributeError, TypeError):  # an exception type with __slots__: the bare name is kept
        pass


def _task_body(spec: dict, actor_id: str) -> Any:
    """The step body that calls the task function once (sync or async, as the function is)."""

    def arguments(step: Any) -> tuple[list, dict]:
        args = list(spec["args"])
        if spec["takes_context"]:
            result = _running_result(spec, actor_id, step.attempt)
            args.insert(0, tasks_base.TaskContext(task_result=result))
        return args, dict(spec["kwargs"])

    func = load_task(spec["task"]).func
    if inspect.iscoroutinefunction(func):

        async def run_async(step: Any) -> Any:
            args, kwargs = arguments(step)
            try:
                return normalize_json(await func(*args, **kwargs))
            except Exception as exc:
                _mark_exception(exc)
                raise

        return run_async

    def run_sync(step: Any) -> Any:
        args, kwargs = arguments(step)
        try:
            return normalize_json(func(*args, **kwargs))
        except Exception as exc:
            _mark_exception(exc)
            raise

    return run_sync


async def run_task(ctx: Any) -> Any:
    """The run of a task workflow: sleep until ``run_after`` (if set), then the task in one retried step;
    the workflow's output is the task's return value (normalized to JSON)."""
    spec = ctx.input
    if spec["run_after"] is not None:
        await ctx.sleep_until(RUN_AFTER_SLEEP, spec["run_after"])
    return await ctx.step(
        name=spec["name"],
        run=_task_body(spec, ctx.actor_id),
        max_retries=spec["max_retries"],
        retry_backoff_base=spec["retry_backoff_base"],
        retry_backoff_max=spec["retry_backoff_max"],
        timeout=spec["timeout"],
    )


def task_workflow(*, concurrency: int | None = None, rate_limit: RateLimit | None = None) -> ActorDefinition:
    """The workflow type that runs enqueued tasks, for ``setup(use={"django_task": task_workflow()})``.

    ``concurrency`` (int N): at most N tasks of each ``queue_name`` run at once across all workers (the
    queue is the concurrency group; None: no limit). ``rate_limit`` (``RateLimit(count, per)``): at most
    ``count`` task starts per ``per`` seconds, per queue when ``concurrency`` is set. Each actor's priority
    is its task's ``priority``. ``django_task`` is ``task_workflow()``.
    """
    return workflow(
        run=run_task,
        create_state=_task_state,
        priority=_priority,
        concurrency=None if concurrency is None else Concurrency(concurrency, key=_queue_name),
        rate_limit=rate_limit,
    )


#: the task workflow without limits; register it as ``"django_task"`` (or OPTIONS["ACTOR"])
django_task = task_workflow()


# --- results ---------------------------------------------------------------------------------------------


def _task_entry(spec: dict, entries: list) -> Any:
    """The history entry of the task's step (None before its first attempt)."""
    return next((e for e in entries if e.kind == "step" and e.key == spec["name"]), None)


def _errors(record: Any, entry: Any) -> list:
    """The task's errors: the last failed attempt's exception (or the workflow's own failure, e.g. a
    cancel), as ``TaskError``s."""
    error = entry.error if entry is not None and entry.error else record.error
    if not error:
        return []
    metadata = error.get("metadata") or {}
    path = metadata.get("exception_class_path") or error.get("name") or "Exception"
    if "." not in path:  # a builtin, or an exception type that took no attribute
        path = f"builtins.{path}"
    return [tasks_base.TaskError(exception_class_path=path, traceback=error.get("stack") or "")]


def build_result(task: Any, record: Any, entries: list, alias: str) -> Any:
    """The ``TaskResult`` of a task actor ``record`` with its history ``entries``."""
    spec = record.input
    entry = _task_entry(spec, entries)
    status = STATUS_OF_STATE.get(record.workflow_state, TaskResultStatus.READY)
    attempts = entry.attempts if entry is not None else 0
    result = tasks_base.TaskResult(
        task=task,
        id=record.actor_id,
        status=status,
        enqueued_at=record.created_at,
        started_at=entry.created_at if entry is not None and attempts else None,
        last_attempted_at=entry.last_attempt_at if entry is not None else None,
        finished_at=record.updated_at if record.workflow_state in ports.FINISHED_STATES else None,
        args=spec["args"],
        kwargs=spec["kwargs"],
        backend=alias,
        errors=_errors(record, entry) if status != TaskResultStatus.SUCCESSFUL else [],
        # one entry per attempt (TaskResult.attempts counts them); executors are not recorded per attempt
        worker_ids=[record.lease_owner or "rivet"] * attempts,
    )
    if status == TaskResultStatus.SUCCESSFUL:
        object.__setattr__(result, "_return_value", record.output)
    return result


def _running_result(spec: dict, actor_id: str, attempt: int) -> Any:
    """The ``TaskResult`` handed to a task that takes its context: RUNNING, at its ``attempt``."""
    task = _configured(load_task(spec["task"]), spec)
    record = django_runtime.get_runtime().store.get_actor(actor_id)
    result = build_result(task, record, [], spec["backend"])
    object.__setattr__(result, "status", TaskResultStatus.RUNNING)
    object.__setattr__(result, "worker_ids", [record.lease_owner or "rivet"] * attempt)
    return result


def _configured(task: Any, spec: dict) -> Any:
    """``task`` with the priority, queue, run_after and backend it was enqueued with."""
    return task.using(
        priority=spec["priority"],
        queue_name=spec["queue_name"],
        run_after=spec["run_after"],
        backend=spec["backend"],
    )


# --- the backend -----------------------------------------------------------------------------------------


class WorkflowBackend(BaseTaskBackend):
    """``TASKS[alias]["BACKEND"]``: runs Django tasks as durable workflows (docs/howto/django-tasks.md).

    ``OPTIONS``: ``ACTOR`` (the registry name of the task workflow, default ``"django_task"``),
    ``MAX_RETRIES`` (retries of a failing task, default 3), ``RETRY_BACKOFF_BASE`` and
    ``RETRY_BACKOFF_MAX`` (seconds, default 1 and 300), ``TIMEOUT`` (seconds a task attempt may take,
    default None: no limit). The options in force at ``enqueue`` are stored with the task.
    ``InvalidTaskBackend``/``InvalidTaskBackendError`` (an ``ImproperlyConfigured``) for unknown or bad options.
    """

    supports_defer = True
    supports_async_task = True
    supports_get_result = True
    supports_priority = True

    def __init__(self, alias: str, params: dict) -> None:
        super().__init__(alias, params)
        unknown = set(self.options) - set(DEFAULT_OPTIONS)
        if unknown:
            raise self._config_error(f"unknown OPTIONS {sorted(unknown)} (known: {sorted(DEFAULT_OPTIONS)})")
        options = {**DEFAULT_OPTIONS, **self.options}
        self.actor = options["ACTOR"]
        if not isinstance(self.actor, str) or not self.actor.isidentifier():
            raise self._config_error(f"OPTIONS['ACTOR'] must be an actor type name, got {self.actor!r}")
        retries = options["MAX_RETRIES"]
        if isinstance(retries, bool) or not isinstance(retries, int) or retries < 0:
            raise self._config_error(f"OPTIONS['MAX_RETRIES'] must be an int >= 0, got {retries!r}")
        self.step_options = {
            "max_retries": retries,
            "retry_backoff_base": self._seconds(options, "RETRY_BACKOFF_BASE"),
            "retry_backoff_max": self._seconds(options, "RETRY_BACKOFF_MAX"),
            "timeout": self._seconds(options, "TIMEOUT"),
        }

    def _config_error(self, message: str) -> Exception:
        return InvalidTaskBackend(f"TASKS[{self.alias!r}]: {message}")

    def _seconds(self, options: dict, name: str) -> float | None:
        value = options[name]
        if isinstance(value, timedelta):
            value = value.total_seconds()
        if value is None and name == "TIMEOUT":
            return None
        if isinstance(value, bool) or not isinstance(value, int | float) or value < 0:
            raise self._config_error(f"OPTIONS[{name!r}] must be seconds >= 0, got {value!r}")
        return float(value)

    def _types(self) -> Any:
        """The client of the task workflow type (``ActorNotFoundError`` when the registry lacks it)."""
        return django_runtime.client()[self.actor]

    def enqueue(self, task: Any, args: Any, kwargs: Any) -> Any:
        """Create the task's workflow actor and return its READY ``TaskResult`` (id = actor id).

        Inside ``transaction.atomic()`` on the store's database the actor is written in that transaction
        and woken on commit. Raises ``InvalidTask``/``InvalidTaskError`` for a task this backend cannot run,
        ``TypeError``/``ValueError`` for arguments that are not JSON, ``ActorNotFoundError`` when the
        registry lacks the task workflow (see ``check``)."""
        self.validate_task(task)
        result = tasks_base.TaskResult(
            task=task,
            id="",
            status=TaskResultStatus.READY,
            enqueued_at=None,
            started_at=None,
            last_attempted_at=None,
            finished_at=None,
            args=args,
            kwargs=kwargs,
            backend=self.alias,
            errors=[],
            worker_ids=[],
        )  # normalizes args and kwargs to JSON (TypeError/ValueError otherwise) before anything is written
        run_after = task.run_after
        if run_after is not None and timezone.is_naive(run_after):  # USE_TZ=False: local time
            run_after = timezone.make_aware(run_after)
        spec = {
            "task": task.module_path,
            "name": task.name,
            "args": result.args,
            "kwargs": result.kwargs,
            "priority": task.priority,
            "queue_name": task.queue_name,
            "run_after": run_after,
            "takes_context": task.takes_context,
            "backend": self.alias,
            **self.step_options,
        }
        handle = self._types().create(secrets.token_hex(16), input=spec)
        record = handle.record()
        object.__setattr__(result, "id", handle.actor_id)
        object.__setattr__(result, "enqueued_at", record.created_at)
        tasks_signals.task_enqueued.send(type(self), task_result=result)
        return result

    def get_result(self, result_id: str) -> Any:
        """The ``TaskResult`` of ``result_id`` as stored now: status, return value (SUCCESSFUL), errors
        (FAILED, or the last failed attempt while a retry waits), timestamps and attempts.

        Raises ``TaskResultDoesNotExist`` for an id that is no task of this backend's workflow type."""
        if not isinstance(result_id, str) or not result_id:
            raise TaskResultDoesNotExist(f"no task result {result_id!r}")
        runtime = django_runtime.get_runtime()
        try:
            record = self._types().get_for_id(result_id).record()
        except ActorNotFoundError:
            raise TaskResultDoesNotExist(f"no task result {result_id!r}") from None
        spec = record.input
        task = _configured(load_task(spec["task"]), spec)
        return build_result(task, record, runtime.store.load_history(result_id), self.alias)

    def check(self, **kwargs: Any) -> list:
        """Django system check: the registry lists the task workflow under ``OPTIONS["ACTOR"]``."""
        try:
            definition = django_runtime.get_runtime().registry.get(self.actor)
        except ActorNotFoundError:
            definition = None
        except Exception as exc:  # the registry itself does not import: rivet_workflows' own checks say so
            return [checks.Warning(f"TASKS[{self.alias!r}]: the registry is not loadable ({exc})")]
        if definition is None or definition.run is None or definition.run.fn is not run_task:
            return [
                checks.Error(
                    f"TASKS[{self.alias!r}] uses WorkflowBackend but the registry has no task workflow "
                    f"named {self.actor!r}",
                    hint=f"add {self.actor!r}: django_task to the registry's setup(use={{...}}) "
                    "(from rivet_workflows.contrib.django_tasks import django_task)",
                    id="rivet_workflows.E101",
                )
            ]
        return []


__all__ = [
    "DEFAULT_ACTOR",
    "WorkflowBackend",
    "build_result",
    "django_task",
    "load_task",
    "run_task",
    "task_workflow",
]
