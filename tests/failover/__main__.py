"""The failover test: ``python -m tests.failover [--actors N] [--json FILE] [--keep]`` (DESIGN.md section 21).

It starts, in a temporary folder, a PostgreSQL primary and a synchronous streaming standby of its own (the
standby made with ``pg_basebackup -R``; the primary has ``synchronous_standby_names`` naming it and
``synchronous_commit=on``, so a commit is acknowledged only once the standby has flushed it), migrates the
schema, and starts real Celery workers and a beat whose ``DATABASE_URL`` names both servers::

    postgres://postgres@127.0.0.1,127.0.0.1/rivet_failover?port=P1,P2&target_session_attrs=read-write

Workflows of six steps each are created through that same URL while the workers run them. Mid-load it
SIGKILLs every process of the primary at once (the machine is gone: no acknowledgement leaves it any more),
waits ``--promote-after`` seconds (the time a failover manager takes to decide) and promotes the standby
(``pg_ctl promote``). libpq then finds the read-write server among the hosts, the workers and the beat
reconnect, the leases of the runs cut short expire and the sweep hands them out again.

The workers journal, outside the database and fsync'ed, each step body they start and each commit of a
completed step that PostgreSQL acknowledged (``tests.failover.workflows``). The checks:

* every acknowledged step is on the promoted standby, completed;
* no step body started after its commit was acknowledged (a body whose commit was never acknowledged may
  run again: steps run at least once);
* every workflow completed; no worker or beat exited on its own;
* the kill really happened mid-load: steps were acknowledged before the kill and after the promotion.

Prints a summary (time to take over, steps acknowledged, lost, re-run) and exits 1 on a violation (keeping
its folder with every server's and worker's log). ``tests/failover/test_failover.py`` runs it in the
suite's PostgreSQL pass; ``make failover`` runs it alone.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import sys
import tempfile
import threading
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from tests.pgclusters import PrivatePostgres, kill_server, pg_bin, send_signal
from tests.system.conftest import Cluster

REGISTRY = "tests.failover.workflows.registry"
DATABASE = "rivet_failover"
STANDBY_NAME = "standby1"
FINISHED = ("completed", "failed", "cancelled")


def _options(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m tests.failover", description=__doc__.split("\n\n")[0])
    parser.add_argument("--actors", type=int, default=60, help="workflows created (default 60)")
    parser.add_argument("--spread", type=float, default=8.0, help="seconds the creations span (default 8)")
    parser.add_argument("--work", type=float, default=0.1, help="seconds each step body sleeps (default 0.1)")
    parser.add_argument("--workers", type=int, default=2, help="Celery workers (default 2)")
    parser.add_argument("--concurrency", type=int, default=4, help="threads per worker (default 4)")
    parser.add_argument("--pool", default="threads", help="Celery pool: threads (default) or prefork")
    parser.add_argument(
        "--redis", action="store_true", help="a private redis-server as the broker (default: files)"
    )
    parser.add_argument("--lease", type=float, default=3.0, help="LEASE_SECONDS (default 3)")
    parser.add_argument("--sweep", type=float, default=0.3, help="SWEEP_INTERVAL seconds (default 0.3)")
    parser.add_argument("--kill-after-acks", type=int, default=60,
                        help="kill the primary once this many steps were acknowledged (default 60)")  # fmt: skip
    parser.add_argument("--promote-after", type=float, default=1.0,
                        help="seconds between the kill and the promotion (default 1)")  # fmt: skip
    parser.add_argument("--asks", type=int, default=4,
                        help="waiting sends crossing the failover (default 4)")  # fmt: skip
    parser.add_argument("--lag", type=float, default=0.5,
                        help="seconds the primary's WAL sender is frozen just before the kill (default 0.5)")  # fmt: skip
    parser.add_argument(
        "--asynchronous", action="store_true",
        help="no synchronous standby (a control: acknowledged steps can then be lost in the failover)",
    )  # fmt: skip
    parser.add_argument("--drain", type=float, default=90.0, help="seconds allowed to finish (default 90)")
    parser.add_argument("--json", type=Path, help="also write the summary as JSON to this file")
    parser.add_argument("--keep", action="store_true", help="keep the folder (logs) even when it passes")
    parser.add_argument("--discard", action="store_true", help="remove the folder even when it fails")
    return parser.parse_args(argv)


@dataclass
class Result:
    """What the run measured (seconds are wall-clock durations)."""

    actors: int = 0
    steps_acknowledged: int = 0
    acknowledged_before_kill: int = 0
    acknowledged_after_promotion: int = 0
    #: steps the old primary acknowledged that the standby did not have when it was promoted
    acknowledged_missing_at_promotion: int = 0
    #: acknowledged steps missing on the new primary at the end
    acknowledged_lost: int = 0
    ran_again_after_ack: int = 0
    #: step bodies that ran more than once (their first commit was never acknowledged: allowed)
    bodies_rerun: int = 0
    promote_seconds: float = 0.0
    #: from the promotion to the first step acknowledged by the new primary
    first_ack_after_promotion: float = 0.0
    #: from the kill to the first step acknowledged by the new primary (promote_after included)
    takeover_seconds: float = 0.0
    #: from the kill to the last workflow completed
    drain_seconds: float = 0.0
    #: waiting sends (``send(..., wait=True)``) made before the kill that got their response
    waiting_sends_completed: int = 0
    violations: list[str] = field(default_factory=list)


class Failover:
    """One run (``run()``): the two servers, the workers, the load, the kill and the promotion."""

    def __init__(self, options: argparse.Namespace) -> None:
        self.o = options
        self.tmp = Path(tempfile.mkdtemp(prefix="rivet-failover-"))
        self.result = Result()
        self.primary = PrivatePostgres(self.tmp / "primary", DATABASE)
        self.standby: PrivatePostgres | None = None
        self.cluster: Cluster | None = None
        self.created: list[str] = []
        self.killed_at = 0.0
        self.promoted_at = 0.0
        #: the completed steps on the standby just before its promotion (actor id, step key)
        self.at_promotion: set[tuple[str, str]] = set()
        self.repliers: list[str] = []
        self.asked_at = 0.0
        self.asks: list[threading.Thread] = []
        #: replier actor id -> the waiting send's SendResult, or the exception it raised
        self.answers: dict[str, Any] = {}

    # --- the servers -------------------------------------------------------------------------------

    def start_servers(self) -> None:
        """The primary, then the standby from its base backup, streaming synchronously."""
        self.primary.start("-c wal_level=replica -c max_wal_senders=5 -c synchronous_commit=on")
        self.primary.create_database()
        standby = PrivatePostgres(self.tmp / "standby", DATABASE, init=False)
        # -R writes standby.signal and primary_conninfo (postgresql.auto.conf); -X stream copies the WAL too
        standby.run(
            pg_bin("pg_basebackup"), "-h", "127.0.0.1", "-p", str(self.primary.port), "-U", "postgres",
            "-D", str(standby.data), "-X", "stream", "-R", "--checkpoint=fast", "--no-sync",
        )  # fmt: skip
        # name the standby as synchronous_standby_names does (the last setting in the file wins)
        with open(standby.data / "postgresql.auto.conf", "a") as conf:
            conf.write(
                f"primary_conninfo = 'host=127.0.0.1 port={self.primary.port} user=postgres "
                f"application_name={STANDBY_NAME}'\n"
            )
        standby.start("-c hot_standby=on")
        self.standby = standby
        # synchronous from now on (set before the standby existed, every commit would wait for it)
        if not self.o.asynchronous:
            with self.primary.connect() as conn:
                conn.execute(f"ALTER SYSTEM SET synchronous_standby_names = '{STANDBY_NAME}'")
                conn.execute("SELECT pg_reload_conf()")
        expected = "async" if self.o.asynchronous else "sync"
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            with self.primary.connect() as conn:
                row = conn.execute(
                    "SELECT sync_state FROM pg_stat_replication WHERE application_name = %s "
                    "AND state = 'streaming'",
                    [STANDBY_NAME],
                ).fetchone()
            if row and row[0] == expected:
                return
            time.sleep(0.2)
        raise RuntimeError(f"the standby was not streaming ({expected}) within 30 s")

    @property
    def url(self) -> str:
        assert self.standby is not None
        return (
            f"postgres://postgres@127.0.0.1,127.0.0.1/{DATABASE}?port={self.primary.port},{self.standby.port}"
            "&target_session_attrs=read-write&connect_timeout=2"
            # a host that vanishes without a reset (power, network) is noticed in seconds, not TCP's minutes
            "&keepalives_idle=5&keepalives_interval=2&keepalives_count=3&tcp_user_timeout=10000"
        )

    def kill_primary(self) -> None:
        """Freeze the primary's WAL sender ``--lag`` seconds (a standby falling behind: a synchronous commit
        waits for it, an asynchronous one does not), then SIGKILL the primary's postmaster and every one of
        its processes at once (stopped first, so none sends anything more: no acknowledgement, no WAL)."""
        if self.o.lag:
            with self.primary.connect() as conn:
                for (sender,) in conn.execute("SELECT pid FROM pg_stat_replication").fetchall():
                    send_signal(sender, signal.SIGSTOP)
            time.sleep(self.o.lag)
        self.killed_at = kill_server(self.primary)

    def snapshot_standby(self) -> None:
        """What the standby will start from: once it replayed all the WAL it received, the completed steps
        it holds (read on the hot standby, before the promotion lets any worker in)."""
        assert self.standby is not None
        with self.standby.connect() as conn:
            deadline = time.monotonic() + 10
            while time.monotonic() < deadline:
                caught_up = conn.execute(
                    "SELECT pg_last_wal_receive_lsn() <= pg_last_wal_replay_lsn()"
                ).fetchone()[0]
                if caught_up:
                    break
                time.sleep(0.05)
            rows = conn.execute(
                "SELECT actor_id, key FROM rivet_workflows_historyentry WHERE kind = 'step' AND status = 'completed'"
            ).fetchall()
        self.at_promotion = {(a, k) for a, k in rows}

    def promote(self) -> None:
        assert self.standby is not None
        began = time.time()
        self.standby.run(pg_bin("pg_ctl"), "-D", str(self.standby.data), "-w", "-t", "60", "promote")
        self.promoted_at = time.time()
        self.result.promote_seconds = round(self.promoted_at - began, 3)

    # --- the application ---------------------------------------------------------------------------

    def start_application(self) -> None:
        cluster = Cluster(self.tmp, {"DATABASE_URL": self.url}, lease=self.o.lease, sweep=self.o.sweep)
        cluster.env.update({"RIVET_REGISTRY": REGISTRY, "RIVET_LOG_LEVEL": "INFO"})
        self.cluster = cluster
        for key in ("REDIS_URL", "RIVET_FAULT_DIR", "RIVET_SQLITE_PATH", "RIVET_TEST_DB"):
            os.environ.pop(key, None)
        if self.o.redis:
            cluster.start_redis()
            os.environ["REDIS_URL"] = cluster.env["REDIS_URL"]
        os.environ.update(
            {
                key: cluster.env[key]
                for key in ("DATABASE_URL", "DJANGO_SETTINGS_MODULE", "RIVET_VAR_DIR", "RIVET_REGISTRY",
                            "RIVET_LEASE_SECONDS", "RIVET_SWEEP_INTERVAL")
            }
        )  # fmt: skip
        os.environ["RIVET_LOG_LEVEL"] = "WARNING"
        import django

        django.setup()
        from django.core.management import call_command

        import project.celery  # noqa: F401 - the Celery app the dispatcher's hints go through

        call_command("migrate", verbosity=0)
        cluster.start_beat()
        for _ in range(self.o.workers):
            cluster.start_worker(self.o.concurrency, pool=self.o.pool)

    def _retry(self, what: str, call):
        """``call()``, again on a new connection after a failure (the server went away), for up to 60 s."""
        from django.db import connection

        deadline = time.monotonic() + 60
        while True:
            try:
                return call()
            except Exception as exc:
                if time.monotonic() > deadline:
                    raise RuntimeError(f"{what} kept failing") from exc
                connection.close()
                time.sleep(0.2)

    def create(self, i: int) -> None:
        from rivet_workflows import django_runtime

        # get_or_create: a retried creation whose first commit did go through finds it
        handle = self._retry(
            "create",
            lambda: django_runtime.client().chain.get_or_create(f"w{i}", input={"work": self.o.work}),
        )
        self.created.append(handle.actor_id)

    def ask(self, actor_id: str, i: int) -> None:
        """A waiting send to the replier ``actor_id`` (on its own thread): it waits across the failover, its
        response comes through the waiting sends' listener (storage/postgres_listener.py)."""
        from django.db import connections

        from rivet_workflows import django_runtime

        try:
            handle = django_runtime.client().replier.get_for_id(actor_id)
            self.answers[actor_id] = handle.send("ask", i, wait=True, timeout=self.o.drain)
        except Exception as exc:  # reported by check()
            self.answers[actor_id] = exc
        finally:
            connections.close_all()

    def start_asks(self) -> None:
        for i, actor_id in enumerate(self.repliers):
            thread = threading.Thread(target=self.ask, args=(actor_id, i), name=f"ask-{i}", daemon=True)
            thread.start()
            self.asks.append(thread)

    def journal(self) -> list[list[str]]:
        assert self.cluster is not None
        path = self.cluster.fault_dir / "journal.log"
        return [line.split() for line in path.read_text().splitlines()] if path.exists() else []

    def acks(self) -> int:
        return sum(1 for words in self.journal() if words[0] == "ack")

    def unfinished(self) -> int:
        from rivet_workflows import models

        return self._retry("count", lambda: models.Actor.objects.exclude(workflow_state__in=FINISHED).count())

    # --- the run -----------------------------------------------------------------------------------

    def faults(self) -> None:
        """Start the waiting sends once half of ``--kill-after-acks`` steps were acknowledged; kill the
        primary (and promote the standby) once all of them were and the sends were stored (0.5 s later)."""
        acks = self.acks()
        if not self.asks and acks >= self.o.kill_after_acks // 2:
            self.start_asks()  # their answers (1 s steps) are under way when the primary dies
            self.asked_at = time.monotonic()
        if (
            not self.killed_at
            and acks >= self.o.kill_after_acks
            and self.asks
            and time.monotonic() > self.asked_at + 0.5
        ):
            self.kill_primary()
            self.snapshot_standby()
            time.sleep(max(0.0, self.killed_at + self.o.promote_after - time.time()))
            self.promote()

    def run(self) -> int:
        self.start_servers()
        self.start_application()
        from rivet_workflows import django_runtime

        self.repliers = [
            django_runtime.client().replier.create(f"r{i}", input={"work": 1.0}).actor_id
            for i in range(self.o.asks)
        ]
        began = time.monotonic()
        for i in range(self.o.actors):
            time.sleep(max(0.0, began + i * self.o.spread / self.o.actors - time.monotonic()))
            self.faults()
            self.create(i)
        deadline = time.monotonic() + 60  # a slow start (a busy machine): the kill still comes mid-load
        while not self.killed_at and time.monotonic() < deadline:
            self.faults()
            time.sleep(0.05)
        if not self.killed_at:
            self.result.violations.append(
                f"only {self.acks()} steps were acknowledged in 60 s (--kill-after-acks "
                f"{self.o.kill_after_acks}): the primary was never killed"
            )
        deadline = time.monotonic() + self.o.drain
        finished = False
        while time.monotonic() < deadline:
            if self.unfinished() == 0:
                finished = True
                break
            time.sleep(0.2)
        self.result.drain_seconds = round(time.time() - self.killed_at, 2) if self.killed_at else 0.0
        for thread in self.asks:
            thread.join(timeout=max(1.0, deadline - time.monotonic()))
        if not finished:
            self.result.violations.append(
                f"{self.unfinished()} workflow(s) unfinished after {self.o.drain} s"
            )
        self.check()
        return self.finish()

    def check(self) -> None:
        from django.db import connection

        from rivet_workflows import models

        r, v = self.result, self.result.violations
        assert self.cluster is not None and self.standby is not None
        if self.killed_at:
            with connection.cursor() as cursor:
                cursor.execute("SELECT inet_server_port(), pg_is_in_recovery()")
                port, recovery = cursor.fetchone()
            if port != self.standby.port or recovery:
                v.append(
                    f"the application reads from port {port} (recovery {recovery}), not the promoted standby"
                )
        r.actors = len(self.created)
        acked_at: dict[tuple[str, str], tuple[int, float]] = {}
        bodies: dict[tuple[str, str], list[int]] = {}
        for index, words in enumerate(self.journal()):
            if words[0] == "ack":
                acked_at.setdefault((words[1], words[2]), (index, float(words[3])))
            elif words[0] == "body":
                bodies.setdefault((words[1], words[2]), []).append(index)
        r.steps_acknowledged = len(acked_at)
        times = [t for _, t in acked_at.values()]
        if self.killed_at:
            r.acknowledged_before_kill = sum(1 for t in times if t <= self.killed_at)
            later = [t for t in times if t >= self.promoted_at]
            r.acknowledged_after_promotion = len(later)
            if later:
                r.first_ack_after_promotion = round(min(later) - self.promoted_at, 3)
                r.takeover_seconds = round(min(later) - self.killed_at, 3)
            if not r.acknowledged_before_kill or not later:
                v.append(
                    f"not a kill mid-load: {r.acknowledged_before_kill} steps acknowledged before it, "
                    f"{len(later)} after the promotion"
                )
        # acknowledged by the old primary (the journal line may follow the kill by a moment)
        by_old = (
            {key for key, (_, t) in acked_at.items() if t < self.promoted_at} if self.killed_at else set()
        )
        missing = sorted(by_old - self.at_promotion)
        r.acknowledged_missing_at_promotion = len(missing)
        if missing:
            v.append(
                f"{len(missing)} acknowledged step(s) missing on the standby at its promotion: {missing[:5]}"
            )
        stored = {
            (e.actor_id, e.key)
            for e in models.HistoryEntry.objects.filter(
                kind="step", status="completed", actor_id__in=[*self.created, *self.repliers]
            )
        }
        lost = sorted(set(acked_at) - stored)
        r.acknowledged_lost = len(lost)
        if lost:
            v.append(f"{len(lost)} acknowledged step(s) missing on the new primary: {lost[:5]}")
        again = [
            (key, idx) for key, (idx, _) in acked_at.items() if any(b > idx for b in bodies.get(key, []))
        ]
        r.ran_again_after_ack = len(again)
        if again:
            v.append(f"{len(again)} step(s) ran again after their commit was acknowledged: {again[:5]}")
        r.bodies_rerun = sum(1 for runs in bodies.values() if len(runs) > 1)
        everyone = [*self.created, *self.repliers]
        states = dict(
            models.Actor.objects.filter(actor_id__in=everyone).values_list("actor_id", "workflow_state")
        )
        wrong = {a: states.get(a) for a in everyone if states.get(a) != "completed"}
        if wrong:
            v.append(f"{len(wrong)} workflow(s) not completed: {list(wrong.items())[:5]}")
        for i, actor_id in enumerate(self.repliers):
            answer = self.answers.get(actor_id)
            if getattr(answer, "status", None) == "completed" and answer.response == f"answer-{i}":
                r.waiting_sends_completed += 1
            else:
                v.append(f"the waiting send to replier {actor_id} ended with {answer!r}, not answer-{i}")
        for proc in [*self.cluster.workers, self.cluster.beat]:
            if proc is not None and not proc.alive():
                v.append(f"{proc.name} (pid {proc.pid}) exited on its own: {proc.tail(5)}")

    def summary(self) -> str:
        r = self.result
        return (
            f"failover: {r.actors} workflows x 6 steps, {self.o.workers} workers x {self.o.concurrency} "
            f"({self.o.pool}, {'Redis' if self.o.redis else 'files'}); "
            f"primary SIGKILLed after {r.acknowledged_before_kill} acknowledged steps, standby promoted "
            f"{self.o.promote_after:g} s later (pg_ctl promote {r.promote_seconds:.2f} s)\n"
            f"  first step acknowledged by the new primary {r.first_ack_after_promotion:.2f} s after the "
            f"promotion ({r.takeover_seconds:.2f} s after the kill); all done {r.drain_seconds:.1f} s after the kill\n"
            f"  steps acknowledged {r.steps_acknowledged}, missing at the promotion "
            f"{r.acknowledged_missing_at_promotion}, lost {r.acknowledged_lost}, ran again after their "
            f"acknowledgement {r.ran_again_after_ack}; bodies re-run (commit never acknowledged) {r.bodies_rerun}; "
            f"waiting sends answered across the failover {r.waiting_sends_completed} of {len(self.repliers)}\n"
            f"  {'PASSED' if not r.violations else f'FAILED: {len(r.violations)} violation(s)'}"
        )

    def finish(self) -> int:
        print(self.summary())
        for line in self.result.violations[:20]:
            print(f"  - {line}")
        if self.o.json:
            self.o.json.write_text(json.dumps(asdict(self.result), indent=2))
        self.stop()
        if (self.result.violations or self.o.keep) and not self.o.discard:
            print(f"  logs: {self.tmp}")
        else:
            shutil.rmtree(self.tmp, ignore_errors=True)
        return 1 if self.result.violations else 0

    def stop(self) -> None:
        from django.db import connections

        connections.close_all()
        if self.cluster is not None:
            self.cluster.stop()
        for server in (self.primary, self.standby):
            if server is not None:
                try:
                    server.stop("immediate")
                except Exception:  # the killed primary
                    pass


def main(argv: list[str] | None = None) -> int:
    run = Failover(_options(argv))
    try:
        return run.run()
    except BaseException:
        run.stop()
        print(f"  logs: {run.tmp}")
        raise


if __name__ == "__main__":
    sys.exit(main())
