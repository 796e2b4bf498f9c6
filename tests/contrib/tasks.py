"""Django tasks of the WorkflowBackend tests: module-level functions decorated with ``@task``.

Their side effects go to ``CALLS`` (this process: the in-process drain and eager Celery) or, for the
worker subprocesses of the system test, to the file named by ``RIVET_TASK_LOG``.
"""

from __future__ import annotations

import asyncio
import os
import time
from collections import Counter

try:  # Django 6
    from django.tasks import task
except ImportError:  # Django 5.2 and the django-tasks backport
    from django_tasks import task

#: how often each (task, argument) ran in this process
CALLS: Counter = Counter()


class Boom(Exception):
    """A task's own error type: its path must come back in TaskResult.errors."""


@task
def add(a, b):
    CALLS["add", a, b] += 1
    return {"sum": a + b}


@task
def fail(message):
    CALLS["fail", message] += 1
    raise Boom(message)


@task
def flaky(name, failures):
    """Fails ``failures`` times (per name, in this process), then returns the attempt count."""
    CALLS["flaky", name] += 1
    if CALLS["flaky", name] <= failures:
        raise ValueError(f"attempt {CALLS['flaky', name]} of {name} fails")
    return CALLS["flaky", name]


@task
async def async_double(x):
    await asyncio.sleep(0.01)
    CALLS["async_double", x] += 1
    return x * 2


@task(takes_context=True)
def which_attempt(context, name, failures):
    CALLS["which_attempt", name] += 1
    CALLS["which_attempt status", context.task_result.status] += 1
    if context.attempt <= failures:
        raise ValueError(f"attempt {context.attempt} fails")
    return {"attempt": context.attempt, "id": context.task_result.id}


@task
def slow_logged(name, seconds):
    """Logs its start and end to $RIVET_TASK_LOG (system test: a worker is killed between the two)."""
    log = os.environ["RIVET_TASK_LOG"]
    with open(log, "a") as f:
        f.write(f"start {name} {os.getpid()}\n")
    time.sleep(seconds)
    with open(log, "a") as f:
        f.write(f"end {name} {os.getpid()}\n")
    return name
