"""A small cluster of real processes for the system tests: Celery workers and a beat (the sweep).

The test process creates actors and sends messages through a runtime whose dispatcher only records
wake-ups; the beat's sweep (every SWEEP_INTERVAL) claims due actors and queues ``run_actor`` tasks that the
worker subprocesses run. Everything shares the test database (SQLite file or PostgreSQL test database)
and, per test, a private broker: a folder for kombu's filesystem transport, or with REDIS_URL set a
private ``redis-server`` on a free port (so restarting it disturbs nobody else).
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import sys
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import pytest

from rivet_workflows.testing import GroupProcess
from tests.pgclusters import free_port as _free_port

BASE_DIR = Path(__file__).resolve().parents[2]
REGISTRY = "tests.system.workflows.registry"


class Proc(GroupProcess):
    """A subprocess in its own process group, logging to ``<log_dir>/<name>.log``."""

    def __init__(self, name: str, cmd: list[str], env: dict[str, str], log_dir: Path) -> None:
        super().__init__(name, cmd, env=env, log_path=log_dir / f"{name}.log", cwd=BASE_DIR)


class Cluster:
    """Workers + beat on the test database; ``effects()`` reads the side-effect log of tests/system/workflows."""

    def __init__(self, tmp: Path, db_env: dict[str, str], *, lease: float = 2.0, sweep: float = 0.2) -> None:
        self.tmp = tmp
        self.fault_dir = tmp / "faults"
        self.fault_dir.mkdir(exist_ok=True)
        self.lease = lease
        self.redis: Proc | None = None
        self.redis_port = 0
        self.env = dict(os.environ)
        for key in ("RIVET_SQLITE_PATH", "DATABASE_URL", "REDIS_URL", "RIVET_TEST_DB"):
            self.env.pop(key, None)
        self.env.update(db_env)
        self.env.update(
            {
                "DJANGO_SETTINGS_MODULE": "tests.system.worker_settings",
                "RIVET_VAR_DIR": str(tmp / "var"),
                "RIVET_REGISTRY": REGISTRY,
                "RIVET_FAULT_DIR": str(self.fault_dir),
                "RIVET_LEASE_SECONDS": str(lease),
                "RIVET_SWEEP_INTERVAL": str(sweep),
                "RIVET_LOG_LEVEL": "WARNING",
                "PYTHONUNBUFFERED": "1",
            }
        )
        self.workers: list[Proc] = []
        self.beat: Proc | None = None
        self._count = 0

    # --- processes -----------------------------------------------------------------------------------

    def start_redis(self) -> None:
        """Start (or restart on the same port) a private redis-server and point the broker at it."""
        if not self.redis_port:
            self.redis_port = _free_port()
        cmd = [
            shutil.which("redis-server") or "redis-server",
            "--bind", "127.0.0.1", "--port", str(self.redis_port), "--save", "", "--appendonly", "no",
        ]  # fmt: skip
        self.redis = Proc(f"redis-{self._next()}", cmd, self.env, self.tmp)
        self.env["REDIS_URL"] = f"redis://127.0.0.1:{self.redis_port}/0"
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            try:
                with socket.create_connection(("127.0.0.1", self.redis_port), timeout=0.2):
                    return
            except OSError:
                time.sleep(0.05)
        raise RuntimeError("redis-server did not start")

    def _next(self) -> int:
        self._count += 1
        return self._count

    def start_worker(
        self, concurrency: int = 4, *, pool: str = "threads", loglevel: str = "WARNING", **env: str
    ) -> Proc:
        """Start a Celery worker (``pool`` "threads" or "prefork", ``concurrency`` threads/processes,
        Celery's ``loglevel``); ``env`` overrides environment variables of that worker only."""
        n = self._next()
        cmd = [
            sys.executable, "-m", "celery", "-A", "project", "worker", f"--pool={pool}",
            f"--concurrency={concurrency}", "-n", f"sys{n}-{os.getpid()}@%h", "-l", loglevel,
            "--without-gossip", "--without-mingle", "--without-heartbeat",
        ]  # fmt: skip
        worker = Proc(f"worker-{n}", cmd, {**self.env, **env}, self.tmp)
        self.workers.append(worker)
        return worker

    def start_beat(self) -> Proc:
        n = self._next()
        cmd = [
            sys.executable, "-m", "celery", "-A", "project", "beat", "-s", str(self.tmp / f"beat-{n}"),
            "-l", "WARNING",
        ]  # fmt: skip
        self.beat = Proc(f"beat-{n}", cmd, self.env, self.tmp)
        return self.beat

    def dump_worker_stacks(self) -> None:
        """Send SIGUSR1 to each live worker's main process: Celery logs the stack of every thread."""
        for worker in self.live_workers():
            try:
                os.kill(worker.pid, signal.SIGUSR1)
            except ProcessLookupError:
                pass
        time.sleep(1.0)

    def live_workers(self) -> list[Proc]:
        return [w for w in self.workers if w.alive()]

    def stop(self) -> None:
        for proc in [*self.workers, self.beat, self.redis]:
            if proc is not None:
                proc.stop()

    def logs(self) -> str:
        return "\n".join(f"--- {p.name}\n{p.tail()}" for p in [*self.workers, self.beat] if p is not None)

    # --- faults and effects --------------------------------------------------------------------------

    def arm(self, point: str, always: bool = False) -> None:
        """Arm a kill point of tests/system/workflows (once, or every time with ``always``)."""
        (self.fault_dir / (f"always-kill-{point}" if always else f"kill-{point}")).touch()

    def disarm(self, point: str) -> None:
        (self.fault_dir / f"always-kill-{point}").unlink(missing_ok=True)
        (self.fault_dir / f"kill-{point}").unlink(missing_ok=True)

    def fired(self, point: str) -> bool:
        return (self.fault_dir / f"kill-{point}.taken").exists()

    def effects(self) -> list[tuple[str, str, str]]:
        path = self.fault_dir / "effects.log"
        if not path.exists():
            return []
        out = []
        for line in path.read_text().splitlines():
            parts = line.split(" ", 2)
            out.append((parts[0], parts[1], parts[2] if len(parts) > 2 else ""))
        return out

    def count(self, what: str, actor_id: str | None = None) -> int:
        return sum(1 for a, w, _ in self.effects() if w == what and (actor_id is None or a == actor_id))

    def counts(self) -> Counter:
        return Counter((a, w) for a, w, _ in self.effects())

    def wait_for(
        self, predicate: Callable[[], Any], timeout: float = 60.0, *, keep_workers: int = 0, what: str = ""
    ) -> Any:
        """Poll ``predicate`` every 0.1 s until truthy; with ``keep_workers`` restart killed workers so that
        many stay alive. Fails the test (with the worker logs) on timeout, after asking every live worker for
        the stacks of its threads (Celery's SIGUSR1 handler writes them to its log) to show where one hangs."""
        deadline = time.monotonic() + timeout
        while True:
            value = predicate()
            if value:
                return value
            if time.monotonic() > deadline:
                self.dump_worker_stacks()
                pytest.fail(f"timed out waiting for {what or predicate}\n{self.logs()}\n{_unfinished()}")
            if keep_workers:
                for _ in range(keep_workers - len(self.live_workers())):
                    self.start_worker()
            time.sleep(0.1)


def _unfinished(limit: int = 8) -> str:
    """A dump of unfinished actors (state, wake-up, lease, history) for failure messages."""
    from django.db import close_old_connections

    from rivet_workflows import models

    close_old_connections()
    lines = []
    rows = models.Actor.objects.exclude(workflow_state__in=["completed", "failed", "cancelled"])[:limit]
    for row in rows:
        entries = ", ".join(f"{e.key}={e.status}/{e.attempts}" for e in row.history.order_by("id"))
        lines.append(
            f"{row.actor_id} {row.name}{row.key} {row.workflow_state} wake_at={row.wake_at} "
            f"lease={row.lease_owner}@{row.lease_expires_at} token={row.lease_token} "
            f"lock={row.step_lock_until} [{entries}]"
        )
    return "unfinished actors:\n" + "\n".join(lines)


def _db_env() -> dict[str, str]:
    from django.db import connection

    name = connection.settings_dict["NAME"]
    if connection.vendor == "sqlite":
        return {"RIVET_SQLITE_PATH": str(name)}
    url = os.environ["DATABASE_URL"]
    return {"DATABASE_URL": urlunsplit(urlsplit(url)._replace(path=f"/{name}"))}


def uses_redis() -> bool:
    """True when the suite runs against Redis (REDIS_URL set): the cluster's broker is then a private Redis."""
    return bool(os.environ.get("REDIS_URL"))


@pytest.fixture
def cluster(transactional_db, tmp_path) -> Any:
    """A Cluster on the test database (beat started; start workers in the test). Stopped afterwards."""
    c = Cluster(tmp_path, _db_env())
    if uses_redis():
        c.start_redis()
    c.start_beat()
    try:
        yield c
    finally:
        c.stop()


@pytest.fixture
def rt(transactional_db) -> Any:
    """A runtime of the test process on the system registry whose dispatcher only records wake-ups."""
    from rivet_workflows import storage
    from rivet_workflows.driver.dispatch import LocalDispatcher
    from rivet_workflows.engine.runtime.runtime import Runtime, Settings

    from .workflows import registry

    runtime = Runtime(storage.store_for(poll_interval=0.02), LocalDispatcher(), registry, settings=Settings())
    yield runtime
    from rivet_workflows import django_runtime

    django_runtime.reset_runtime()  # the registry was re-bound to this runtime


def history(actor_id: str) -> dict[str, Any]:
    """The actor's history entries by key (status, attempts, error name)."""
    from rivet_workflows import models

    return {
        e.key: (e.status, e.attempts, (e.error or {}).get("name") if isinstance(e.error, dict) else None)
        for e in models.HistoryEntry.objects.filter(actor_id=actor_id)
    }
