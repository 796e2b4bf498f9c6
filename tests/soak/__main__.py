"""The chaos soak: ``python -m tests.soak [--short] [--seconds S] [--actors N] [--workers W]``.

A few hundred actors of ``tests.soak.workflows`` run on real Celery worker processes (threads pool) with a
beat, on a PostgreSQL cluster and a redis-server of the soak's own (``tests/pgclusters.py``; never the machine's
shared servers), while the soak SIGKILLs workers (one during the opening burst of creations), SIGSTOPs a
worker past its lease and resumes it, crashes and restarts PostgreSQL, restarts Redis, and terminates idle
database sessions (``pg_terminate_backend``). Messages are sent to the actors throughout.

Then it checks the invariants (docs/explanation/failures.md):

* every actor completed, its output the messages sent to it, in order: each consumed exactly once;
* no committed step ran again: each body run is one attempt the engine recorded (a run of an attempt twice,
  or of one never recorded, is a violation) and each completed entry's attempt log has one completed attempt;
* no worker (nor the beat) exited on its own: only the ones the soak killed are gone;
* every actor whose lease expired was taken over within a few sweep intervals of the expiry (outside the
  database and broker outages, during which nothing can be claimed): a takeover within LEASE_SECONDS +
  a few sweep intervals of the holder's death, backlog or not.

Prints a summary (actors, kills, restarts, longest takeover, duration) and exits 1 on a violation (its
folder, with every process's log, is kept then). ``make soak`` runs about ten minutes, ``make soak-short``
(CI) about two.
"""

from __future__ import annotations

import argparse
import heapq
import os
import random
import shutil
import signal
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

from tests.pgclusters import MONITOR_NAME, PrivatePostgres
from tests.system.conftest import Cluster, Proc

REGISTRY = "tests.soak.workflows.registry"
ACTOR_TABLE = "rivet_workflows_actor"
FINISHED = ("completed", "failed", "cancelled")


def _options(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m tests.soak", description=__doc__.split("\n\n")[0])
    parser.add_argument("--short", action="store_true", help="the CI version: about two minutes")
    parser.add_argument("--seconds", type=float, help="length of the chaos phase (default 570; short: 70)")
    parser.add_argument("--actors", type=int, help="actors created (default 400; short: 150)")
    parser.add_argument("--workers", type=int, default=3, help="Celery workers kept running (default 3)")
    parser.add_argument("--concurrency", type=int, default=4, help="threads per worker (default 4)")
    parser.add_argument("--lease", type=float, default=4.0, help="LEASE_SECONDS (default 4)")
    parser.add_argument("--sweep", type=float, default=0.5, help="SWEEP_INTERVAL seconds (default 0.5)")
    parser.add_argument(
        "--takeover-intervals", type=float, default=10.0,
        help="bound on a takeover's delay after the lease expired, in sweep intervals (default 10)",
    )  # fmt: skip
    parser.add_argument("--drain", type=float, help="seconds allowed to finish after the chaos (default 180)")
    parser.add_argument("--seed", type=int, default=None, help="random seed (default: time)")
    parser.add_argument(
        "--keep", action="store_true", help="keep the soak's folder (logs) even when it passes"
    )
    options = parser.parse_args(argv)
    options.seconds = options.seconds or (70.0 if options.short else 570.0)
    options.actors = options.actors or (150 if options.short else 400)
    options.drain = options.drain or (90.0 if options.short else 180.0)
    options.seed = options.seed if options.seed is not None else int(time.time())
    return options


@dataclass
class Stats:
    """What the soak did and saw."""

    kills: int = 0
    stops: int = 0
    db_restarts: int = 0
    broker_restarts: int = 0
    idle_terminated: int = 0
    messages: int = 0
    outages: list[tuple[float, float]] = field(default_factory=list)  # (start, end) epoch seconds
    #: (seconds past the lease's expiry, expiry epoch, takeover epoch) of each takeover seen
    takeovers: list[tuple[float, float, float]] = field(default_factory=list)
    violations: list[str] = field(default_factory=list)


class TakeoverMonitor(threading.Thread):
    """Polls the actor table every ``interval`` seconds for due actors whose lease expired, and records how
    long after the expiry each was taken over (its lease token moved on or its lease was freed)."""

    def __init__(self, pg: PrivatePostgres, stats: Stats, interval: float = 0.1) -> None:
        super().__init__(name="takeover-monitor", daemon=True)
        self.pg, self.stats, self.interval = pg, stats, interval
        self.stop = threading.Event()
        self._expired: dict[str, tuple[int, float]] = {}  # actor id -> (token, expiry epoch)

    def run(self) -> None:
        conn = None
        while not self.stop.wait(self.interval):
            try:
                conn = conn or self.pg.connect()
                rows = conn.execute(
                    "SELECT actor_id, lease_token, extract(epoch FROM lease_expires_at), "
                    f"extract(epoch FROM clock_timestamp()) FROM {ACTOR_TABLE} WHERE lease_owner IS NOT NULL "
                    "AND lease_expires_at < clock_timestamp() AND wake_at <= clock_timestamp() "
                    "AND paused_at IS NULL AND NOT destroyed AND workflow_state <> ALL(%s)",
                    [list(FINISHED)],
                ).fetchall()
                now = (
                    float(rows[0][3])
                    if rows
                    else float(conn.execute("SELECT extract(epoch FROM now())").fetchone()[0])
                )
            except Exception:  # the database is restarting: poll again
                if conn is not None:
                    conn.close()
                conn = None
                continue
            current = {row[0]: (int(row[1]), float(row[2])) for row in rows}
            for actor_id, (token, expiry) in list(self._expired.items()):
                if current.get(actor_id, (None,))[0] != token:
                    self.stats.takeovers.append((now - expiry, expiry, now))
                    del self._expired[actor_id]
            for actor_id, seen in current.items():
                self._expired.setdefault(actor_id, seen)
        if conn is not None:
            conn.close()

    def waiting(self) -> int:
        """Expired leases not taken over yet."""
        return len(self._expired)


class Soak:
    """One soak run (``run()``): the services, the cluster, the timeline of creations, sends and faults."""

    def __init__(self, options: argparse.Namespace) -> None:
        self.o = options
        self.rng = random.Random(options.seed)
        self.stats = Stats()
        self.tmp = Path(tempfile.mkdtemp(prefix="rivet-soak-"))
        self.killed: set[int] = set()
        self.sent: dict[str, list[str]] = {}
        self.keys: dict[int, str] = {}
        self.pg = PrivatePostgres(self.tmp / "pg")
        self.cluster: Cluster | None = None
        self.monitor: TakeoverMonitor | None = None

    # --- set-up ------------------------------------------------------------------------------------

    def start(self) -> None:
        self.pg.start()
        self.pg.create_database()
        cluster = Cluster(self.tmp, {"DATABASE_URL": self.pg.url}, lease=self.o.lease, sweep=self.o.sweep)
        cluster.env.update({"RIVET_REGISTRY": REGISTRY, "RIVET_LOG_LEVEL": "INFO"})
        cluster.start_redis()
        self.cluster = cluster
        os.environ.update(
            {
                key: cluster.env[key]
                for key in ("DATABASE_URL", "REDIS_URL", "DJANGO_SETTINGS_MODULE", "RIVET_VAR_DIR",
                            "RIVET_REGISTRY", "RIVET_LEASE_SECONDS", "RIVET_SWEEP_INTERVAL")
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
            self._start_worker()
        self.monitor = TakeoverMonitor(self.pg, self.stats)
        self.monitor.start()

    def _start_worker(self) -> Proc:
        assert self.cluster is not None
        return self.cluster.start_worker(self.o.concurrency)

    # --- the timeline ------------------------------------------------------------------------------

    def timeline(self) -> list[tuple[float, int, str, tuple]]:
        """(second, order, event, args): creations (a third at once at the start), their sends, faults."""
        o, rng, events = self.o, self.rng, []
        spread = 0.6 * o.seconds
        for i in range(o.actors):
            at = 0.0 if i < o.actors // 3 else rng.uniform(0, spread)
            messages = rng.randint(1, 3)
            events.append((at, 0, "create", (i, messages)))
            for j in range(messages):
                events.append(
                    (min(o.seconds * 0.85, at + rng.uniform(0.5, 0.25 * o.seconds)), 1, "send", (i, j))
                )
        events.append((1.0, 2, "kill", ()))  # a worker dies during the burst of creations
        step = max(12.0, o.seconds / 12)
        events += [(t, 2, "kill", ()) for t in _times(step * 1.5, o.seconds * 0.9, step)]
        events += [(t, 2, "idle", ()) for t in _times(5.0, o.seconds * 0.9, 10.0)]
        events += [
            (t, 2, "stop", ()) for t in _times(o.seconds * 0.25, o.seconds * 0.9, max(60.0, o.seconds / 4))
        ]
        for share in (0.45,) if o.short or o.seconds < 300 else (0.3, 0.7):
            events.append((o.seconds * share, 2, "db", ()))
        for share in (0.6,) if o.short or o.seconds < 300 else (0.45, 0.85):
            events.append((o.seconds * share, 2, "broker", ()))
        heapq.heapify(events)
        return [heapq.heappop(events) for _ in range(len(events))]

    def run(self) -> int:
        started = time.monotonic()
        self.start()
        chaos_start = time.monotonic()
        for at, _, event, args in self.timeline():
            time.sleep(max(0.0, chaos_start + at - time.monotonic()))
            getattr(self, f"_{event}")(*args)
        chaos_end = time.monotonic()
        finished = self._drain()
        duration = time.monotonic() - started
        self.check(finished)
        self.summary(duration, chaos_end - chaos_start)
        return self.finish()

    # --- work --------------------------------------------------------------------------------------

    def _retry(self, what: str, call):
        """Call ``call()``; after a failure (the driver's connection was lost in a restart or an idle
        termination: nothing was written) reconnect and retry, for up to 60 s."""
        from django.db import connection

        deadline = time.monotonic() + 60
        while True:
            try:
                return call()
            except Exception as exc:
                if time.monotonic() > deadline:
                    raise RuntimeError(f"{what} kept failing") from exc
                connection.close()
                time.sleep(0.5)

    def _create(self, i: int, messages: int) -> None:
        from rivet_workflows import django_runtime

        rng = self.rng
        data = {
            "work": round(rng.uniform(0.01, 0.15), 3),
            "long": round(self.o.lease * 1.5, 2) if i % 15 == 0 else 0,
            "nap": round(rng.uniform(0.5, 4.0), 2),
            "messages": messages,
        }
        handle = self._retry("create", lambda: django_runtime.client().soak.create(f"a{i}", input=data))
        self.keys[i] = handle.actor_id
        self.sent[handle.actor_id] = []

    def _send(self, i: int, j: int) -> None:
        from rivet_workflows import django_runtime

        actor_id = self.keys[i]
        body = f"a{i}-m{j}"
        try:
            self._retry("send", lambda: django_runtime.client().soak.get_for_id(actor_id).send("ping", body))
        except RuntimeError as exc:
            self.stats.violations.append(f"could not send {body} to actor {actor_id}: {exc.__cause__!r}")
            return
        self.sent[actor_id].append(body)
        self.stats.messages += 1

    # --- faults ------------------------------------------------------------------------------------

    def _live(self) -> list[Proc]:
        assert self.cluster is not None
        return [w for w in self.cluster.workers if w.alive() and w.pid not in self.killed]

    def _kill(self) -> None:
        live = self._live()
        if live:
            victim = self.rng.choice(live)
            self.killed.add(victim.pid)
            victim.kill()
            self.stats.kills += 1
        self._start_worker()

    def _stop(self) -> None:
        live = self._live()
        if not live:
            return
        victim = self.rng.choice(live)
        os.kill(victim.pid, signal.SIGSTOP)
        self.stats.stops += 1
        threading.Timer(self.o.lease + 3.0, _resume, [victim.pid]).start()

    def _idle(self) -> None:
        from django.db import connection

        try:
            with connection.cursor() as cursor:
                cursor.execute("SELECT pg_backend_pid()")
                mine = cursor.fetchone()[0]
            with self.pg.connect() as conn:
                ended = conn.execute(
                    "SELECT count(*) FILTER (WHERE pg_terminate_backend(pid)) FROM pg_stat_activity "
                    "WHERE datname = %s AND state = 'idle' AND backend_type = 'client backend' "
                    "AND pid <> pg_backend_pid() AND pid <> %s AND application_name <> %s",
                    [self.pg.database, mine, MONITOR_NAME],
                ).fetchone()[0]
            self.stats.idle_terminated += ended
        except Exception:
            connection.close()

    def _db(self) -> None:
        from django.db import connection

        began = time.time()
        self.pg.restart()
        connection.close()
        self.stats.db_restarts += 1
        self.stats.outages.append((began, time.time()))

    def _broker(self) -> None:
        assert self.cluster is not None and self.cluster.redis is not None
        began = time.time()
        self.cluster.redis.kill()
        time.sleep(1.0)
        self.cluster.start_redis()
        self.stats.broker_restarts += 1
        self.stats.outages.append((began, time.time()))

    # --- the end -----------------------------------------------------------------------------------

    def _unfinished(self) -> int:
        from rivet_workflows import models

        return self._retry("count", lambda: models.Actor.objects.exclude(workflow_state__in=FINISHED).count())

    def _drain(self) -> bool:
        deadline = time.monotonic() + self.o.drain
        while time.monotonic() < deadline:
            if self._unfinished() == 0:
                time.sleep(3 * self.o.sweep)  # let the monitor see the last takeovers
                return True
            for _ in range(self.o.workers - len(self._live())):
                self._start_worker()
            time.sleep(0.5)
        return False

    def check(self, finished: bool) -> None:
        from rivet_workflows import models
        from rivet_workflows.engine.run import retry

        v = self.stats.violations
        if not finished:
            v.append(f"{self._unfinished()} actor(s) not finished {self.o.drain:.0f} s after the chaos")
        actors = {a.actor_id: a for a in models.Actor.objects.filter(name="soak")}
        for actor_id, sent in self.sent.items():
            actor = actors[actor_id]
            if actor.workflow_state != "completed":
                v.append(f"actor {actor_id} ended {actor.workflow_state}, expected completed")
            elif actor.output != sent:
                v.append(f"actor {actor_id} received {actor.output}, sent {sent} (exactly once, in order)")
        # The engine records each attempt of a step before its body runs (docs/explanation/failures.md),
        # so every body run is one recorded attempt: two runs of one attempt, or a run of an
        # attempt the entry never counted, ran a body outside the engine's record. A committed step that
        # ran again shows as a second completed attempt in the entry's attempt log.
        entries = {
            (e.actor_id, e.key): e
            for e in models.HistoryEntry.objects.filter(kind="step", status="completed")
        }
        runs: dict[tuple[str, str], list[int]] = {}
        assert self.cluster is not None
        for actor_id, what, detail in self.cluster.effects():
            if what.startswith("start-"):
                runs.setdefault((actor_id, what.removeprefix("start-")), []).append(int(detail.split()[0]))
        for (actor_id, step), attempts in runs.items():
            entry = entries.get((actor_id, step))
            if entry is None:
                continue
            if len(set(attempts)) < len(attempts) or max(attempts) > entry.attempts:
                v.append(f"actor {actor_id} step {step}: bodies ran for attempts {sorted(attempts)}, recorded "
                         f"{entry.attempts}")  # fmt: skip
        for (actor_id, step), entry in entries.items():
            log = entry.data.get(retry.ATTEMPT_LOG) or []
            completed = [a["attempt"] for a in log if a.get("outcome") == retry.ATTEMPT_COMPLETED]
            if len(completed) != 1:
                v.append(f"actor {actor_id} step {step} completed by attempts {completed} (ran again)")
        for proc in [*self.cluster.workers, self.cluster.beat]:
            if proc is not None and proc.pid not in self.killed and not proc.alive():
                v.append(f"{proc.name} (pid {proc.pid}) exited on its own: {proc.tail(5)}")
        if "Unrecoverable error" in self.cluster.logs():
            v.append("a worker logged Celery's 'Unrecoverable error'")
        bound = self.o.takeover_intervals * self.o.sweep
        late = [t for t in self._takeovers(outside_outages=True) if t[0] > bound]
        if late:
            v.append(f"{len(late)} takeover(s) later than {bound:.1f} s after the lease expired: {late[:3]}")
        if self.monitor is not None and self.monitor.waiting():
            v.append(f"{self.monitor.waiting()} expired lease(s) never taken over")

    def _takeovers(self, *, outside_outages: bool) -> list[tuple[float, float, float]]:
        grace = 2.0 + self.o.lease
        return [
            t
            for t in self.stats.takeovers
            if not outside_outages
            or not any(t[1] < end + grace and t[2] > start for start, end in self.stats.outages)
        ]

    def summary(self, duration: float, chaos: float) -> None:
        s, o = self.stats, self.o
        normal = self._takeovers(outside_outages=True)
        worst = max((t[0] for t in normal), default=0.0)
        worst_any = max((t[0] for t in s.takeovers), default=0.0)
        assert self.cluster is not None
        logs = "".join(
            Path(p.log_path).read_text(errors="replace")
            for p in self.cluster.workers
            if Path(p.log_path).exists()
        )
        print(
            f"soak (seed {o.seed}): {len(self.sent)} actors, {s.messages} messages, {o.workers} workers x "
            f"{o.concurrency} threads, LEASE_SECONDS {o.lease:g}, SWEEP_INTERVAL {o.sweep:g}\n"
            f"  faults: {s.kills} worker SIGKILLs, {s.stops} SIGSTOPs past the lease, {s.db_restarts} PostgreSQL "
            f"crash-restarts, {s.broker_restarts} Redis restarts, {s.idle_terminated} idle sessions terminated\n"
            f"  takeovers after a lease expired: {len(s.takeovers)} ({len(normal)} outside outages; "
            f"{logs.count('whose lease expired')} sweep INFO lines); longest {worst:.2f} s after the expiry "
            f"(bound {o.takeover_intervals:g} sweep intervals = {o.takeover_intervals * o.sweep:.1f} s), "
            f"i.e. {o.lease + worst:.2f} s after the holder's last renewal; longest across outages {worst_any:.2f} s\n"
            f"  duration {duration:.0f} s ({chaos:.0f} s of chaos); {datetime.now():%H:%M:%S}\n"
            f"  {'PASSED' if not s.violations else f'FAILED: {len(s.violations)} violation(s)'}"
        )
        for line in s.violations[:20]:
            print(f"  - {line}")

    def finish(self) -> int:
        if self.monitor is not None:
            self.monitor.stop.set()
        if self.cluster is not None:
            for proc in self.cluster.workers:
                if proc.alive():
                    os.kill(proc.pid, signal.SIGCONT)
            self.cluster.stop()
        self.pg.remove()
        if self.stats.violations or self.o.keep:
            print(f"  logs: {self.tmp}")
        else:
            shutil.rmtree(self.tmp, ignore_errors=True)
        return 1 if self.stats.violations else 0


def _times(first: float, last: float, every: float) -> list[float]:
    out, t = [], first
    while t <= last:
        out.append(t)
        t += every
    return out


def _resume(pid: int) -> None:
    try:
        os.kill(pid, signal.SIGCONT)
    except ProcessLookupError:
        pass


def main(argv: list[str] | None = None) -> int:
    soak = Soak(_options(argv))
    try:
        return soak.run()
    except BaseException:
        soak.finish()
        raise


if __name__ == "__main__":
    sys.exit(main())
