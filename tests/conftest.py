"""Fixtures shared by every test suite: the Django store, a Django-backed runtime, thread helpers."""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from typing import Any

import pytest


def is_postgres() -> bool:
    """True when the tests run on PostgreSQL (DATABASE_URL=postgres://...)."""
    return os.environ.get("DATABASE_URL", "").startswith(("postgres://", "postgresql://"))


requires_postgres = pytest.mark.skipif(not is_postgres(), reason="needs PostgreSQL (set DATABASE_URL)")


def run_in_threads(fn: Callable[[int], Any], count: int) -> list[Any]:
    """Run ``fn(i)`` for i in range(count) on ``count`` threads released together; return results in order.

    Each thread closes its own database connection when done; an exception in a thread is re-raised.
    """
    from django.db import connections

    barrier = threading.Barrier(count)
    results: list[Any] = [None] * count
    failures: list[BaseException] = []

    def target(i: int) -> None:
        try:
            barrier.wait(timeout=30)
            results[i] = fn(i)
        except BaseException as exc:  # re-raised in the caller
            failures.append(exc)
        finally:
            connections.close_all()

    threads = [threading.Thread(target=target, args=(i,)) for i in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    if failures:
        raise failures[0]
    return results


@pytest.fixture
def celery_runtime(settings):
    """The settings-bound runtime on the test registry (tests.integration.workflows), with Celery tasks
    executed eagerly: a wake-up sent is a run done at once, in this process."""
    from project.celery import app
    from rivet_workflows import django_runtime

    settings.RIVET_WORKFLOWS = {
        "REGISTRY": "tests.integration.workflows.registry",
        "LIVE_WAIT_THRESHOLD": 0.0,
        "POLL_INTERVAL": 0.01,
    }
    django_runtime.reset_runtime()
    app.conf.task_always_eager = True
    try:
        yield django_runtime.get_runtime()
    finally:
        app.conf.task_always_eager = False
        django_runtime.reset_runtime()


@pytest.fixture
def django_store():
    """The store of the test database, ``rivet_workflows.storage.store_for()`` (``PostgresStore`` on
    PostgreSQL, else ``DjangoStore``); use with django_db(transaction=True)."""
    from rivet_workflows import storage

    return storage.store_for(poll_interval=0.01)


@pytest.fixture
def make_django_runtime(django_store):
    """Factory ``make_django_runtime(registry, **settings)`` -> Runtime on ``django_store`` + LocalDispatcher.

    ``runtime.dispatcher.woken`` records wake-ups; run work with ``rivet_workflows.engine.runtime.executor.drain``.
    """
    from rivet_workflows.driver.dispatch import LocalDispatcher
    from rivet_workflows.engine.runtime.runtime import Runtime, Settings

    def make(registry: Any, **settings: Any) -> Runtime:
        options = {"poll_interval": 0.01, **settings}
        return Runtime(django_store, LocalDispatcher(), registry, settings=Settings(**options))

    return make


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """Remove the per-actor lock files (rivet_workflows.storage.locks) of this process's SQLite test database."""
    import shutil

    from django.conf import settings

    if not settings.configured:
        return
    database = settings.DATABASES.get("default", {})
    if "sqlite3" not in database.get("ENGINE", ""):
        return
    for name in {str(database.get("NAME") or ""), str(database.get("TEST", {}).get("NAME") or "")}:
        if name and "test" in os.path.basename(name):
            shutil.rmtree(f"{name}.locks", ignore_errors=True)


#: markers that name a group of tests; a skipped test of none of them is grouped by its tests/ folder
SKIP_GROUPS = ("install", "browser", "system", "postgres", "redis")


def skip_group(report: pytest.TestReport | pytest.CollectReport) -> str:
    """The group of a skipped test: its first marker of SKIP_GROUPS, else ``tests/<folder>``."""
    keywords = getattr(report, "keywords", None) or {}  # a CollectReport has none
    for marker in SKIP_GROUPS:
        if marker in keywords:
            return marker
    path = report.nodeid.split("::")[0]
    parts = path.split("/")
    return "/".join(parts[:2]) if len(parts) > 2 else path


def skip_reason(report: pytest.TestReport | pytest.CollectReport) -> str:
    """The reason given to ``pytest.skip``/``skipif`` (without pytest's ``Skipped: `` prefix)."""
    longrepr = report.longrepr
    reason = longrepr[2] if isinstance(longrepr, tuple) and len(longrepr) == 3 else str(longrepr)
    return reason.removeprefix("Skipped: ")


def summarize_skips(reports: list) -> list[str]:
    """One line per (group, reason) of the skipped ``reports``, largest first: ``"postgres: 23 skipped
    (needs PostgreSQL (set DATABASE_URL))"``."""
    counts: dict[tuple[str, str], int] = {}
    for report in reports:
        key = (skip_group(report), skip_reason(report))
        counts[key] = counts.get(key, 0) + 1
    ordered = sorted(counts.items(), key=lambda item: (-item[1], item[0]))
    return [f"{group}: {count} skipped ({reason})" for (group, reason), count in ordered]


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_terminal_summary(terminalreporter: Any, exitstatus: int, config: pytest.Config) -> Any:
    """After pytest's own summary: which groups of tests were skipped and why (case C64), so a run that
    silently lacked PostgreSQL, Redis or Chromium says so at its very end."""
    result = yield
    skipped = [r for r in terminalreporter.stats.get("skipped", []) if r.skipped]
    if skipped:
        terminalreporter.write_sep("=", f"{len(skipped)} tests skipped, by group")
        for line in summarize_skips(skipped):
            terminalreporter.write_line(line)
    return result
