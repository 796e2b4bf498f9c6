"""PostgreSQL helpers for the benchmarks: scratch databases, commit counters and pgbench."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager

import psycopg

HOST = os.environ.get("BENCH_PGHOST", "127.0.0.1")
PORT = int(os.environ.get("BENCH_PGPORT", "5432"))
USER = os.environ.get("BENCH_PGUSER", "postgres")


def url(dbname: str, *, driver: str = "postgres") -> str:
    """Connection URL for ``dbname`` on the benchmark server (``driver`` is the URL scheme)."""
    return f"{driver}://{USER}@{HOST}:{PORT}/{dbname}"


def admin_connect() -> psycopg.Connection:
    """An autocommit connection to the ``postgres`` maintenance database."""
    return psycopg.connect(host=HOST, port=PORT, user=USER, dbname="postgres", autocommit=True)


def drop_database(name: str) -> None:
    """Drop ``name`` if it exists, terminating any session still connected to it."""
    with admin_connect() as conn:
        conn.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = %s AND pid <> pg_backend_pid()",
            (name,),
        )
        conn.execute(f'DROP DATABASE IF EXISTS "{name}"')


def create_database(name: str, *, template: str | None = None) -> None:
    """(Re)create database ``name``, empty or as a copy of ``template`` (which must have no sessions)."""
    drop_database(name)
    with admin_connect() as conn:
        conn.execute(f'CREATE DATABASE "{name}"' + (f' TEMPLATE "{template}"' if template else ""))


@contextmanager
def scratch_database(name: str, *, keep: bool = False) -> Iterator[str]:
    """Create ``name`` for the duration of the block and drop it afterwards (unless ``keep``).

    Yields the ``postgres://`` URL of the database.
    """
    create_database(name)
    try:
        yield url(name)
    finally:
        if not keep:
            drop_database(name)


def xact_commit(dbname: str) -> int:
    """``pg_stat_database.xact_commit`` for ``dbname`` as seen now (stats lag up to ~1 s, see settle)."""
    with admin_connect() as conn:
        conn.execute("SELECT pg_stat_clear_snapshot()")
        row = conn.execute(
            "SELECT xact_commit FROM pg_stat_database WHERE datname = %s", (dbname,)
        ).fetchone()
    return int(row[0]) if row else 0


def sessions(dbname: str) -> int:
    """``pg_stat_database.sessions`` for ``dbname``: connections established so far (PostgreSQL 14+)."""
    with admin_connect() as conn:
        conn.execute("SELECT pg_stat_clear_snapshot()")
        row = conn.execute("SELECT sessions FROM pg_stat_database WHERE datname = %s", (dbname,)).fetchone()
    return int(row[0]) if row and row[0] is not None else 0


def wal_syncs() -> int | None:
    """``pg_stat_wal.wal_sync``: how many times the server has flushed WAL to disk so far (the whole
    cluster; PostgreSQL 14+), or None where the view is missing. Commits over flushes in a window says
    how many commits PostgreSQL's group commit shared each flush between."""
    with admin_connect() as conn:
        conn.execute("SELECT pg_stat_clear_snapshot()")
        try:
            row = conn.execute("SELECT wal_sync FROM pg_stat_wal").fetchone()
        except Exception:  # PostgreSQL < 14
            return None
    return int(row[0]) if row and row[0] is not None else None


def flushed_commits(dbname: str, *, flush_wait: float = 1.1) -> tuple[int, float]:
    """``(xact_commit, monotonic read time)`` for ``dbname`` after waiting ``flush_wait`` seconds.

    Since PostgreSQL 15 a backend publishes its counters when it goes idle, at most once a second, so
    a read taken ``flush_wait`` seconds after the work stopped includes it. Background pollers of the
    system under test keep committing meanwhile; ``CommitMeter`` subtracts that idle rate.
    """
    time.sleep(flush_wait)
    return xact_commit(dbname), time.monotonic()


class CommitMeter:
    """Counts transactions committed in one database during a measured window, net of background work.

    Usage: ``m = CommitMeter(db); m.measure_idle(2.0); m.start(); ...work...; commits = m.stop()``.
    ``xact_commit`` counts every committed transaction, read-only ones included.
    """

    def __init__(self, dbname: str) -> None:
        self.dbname = dbname
        self.idle_rate = 0.0
        self.connections = 0  # connections opened to the database between start() and stop()
        self._start: tuple[int, float] | None = None
        self._sessions = 0
        self._wal: int | None = None
        #: WAL flushes of the server between start() and stop() (None: not known)
        self.wal_syncs: int | None = None

    def measure_idle(self, window: float = 2.0) -> float:
        """Measure and remember the background commit rate (commits/s) over ``window`` seconds (0 = skip)."""
        if window <= 0:
            return self.idle_rate
        c0, t0 = flushed_commits(self.dbname)
        time.sleep(window)
        c1, t1 = flushed_commits(self.dbname)
        self.idle_rate = (c1 - c0) / (t1 - t0)
        return self.idle_rate

    def start(self) -> None:
        """Take the opening reading (waits for pending statistics to flush)."""
        self._start = flushed_commits(self.dbname)
        self._sessions = sessions(self.dbname)
        self._wal = wal_syncs()

    def stop(self) -> float:
        """Commits since ``start`` minus the idle rate times the window; never negative."""
        assert self._start is not None, "start() first"
        c1, t1 = flushed_commits(self.dbname)
        c0, t0 = self._start
        self.connections = sessions(self.dbname) - self._sessions
        wal = wal_syncs()
        self.wal_syncs = None if wal is None or self._wal is None else wal - self._wal
        return max(0.0, (c1 - c0) - self.idle_rate * (t1 - t0))


def pgbench_commit_rate(
    seconds: float, *, dbname: str = "rivet_bench_pgbench", clients: int = 0
) -> dict[str, float]:
    """Single-client commit rate of this server: the physical limit for one-commit-per-step engines.

    Runs two pgbench scripts on a scratch database, each for ``seconds``: ``insert`` (one-row INSERT
    per transaction, the shape of a step commit) and ``tpcb_n`` (the built-in ``-N`` simple-update
    transaction). With ``clients`` > 1 the insert script also runs with that many clients (the aggregate
    commit limit of that many concurrent committers: PostgreSQL's group commit shares their flushes).
    Returns ``{"insert_tps": float, "tpcb_n_tps": float}`` (transactions per second, excluding
    connection setup) plus ``"insert_tps_multi"`` and ``"multi_clients"`` with ``clients``. Raises
    ``RuntimeError`` when pgbench is missing or fails.
    """
    exe = shutil.which("pgbench")
    if exe is None:
        raise RuntimeError("pgbench not found on PATH")
    env = {**os.environ, "PGHOST": HOST, "PGPORT": str(PORT), "PGUSER": USER}
    secs = max(1, round(seconds))
    out: dict[str, float] = {}
    with scratch_database(dbname):
        subprocess.run([exe, "-i", "-q", "-s", "1", dbname], env=env, check=True, capture_output=True)
        with psycopg.connect(host=HOST, port=PORT, user=USER, dbname=dbname, autocommit=True) as conn:
            conn.execute(
                "CREATE TABLE bench_steps (id bigserial PRIMARY KEY, v int, at timestamptz DEFAULT now())"
            )
        with tempfile.NamedTemporaryFile("w", suffix=".sql", delete=False) as script:
            script.write("\\set v random(1, 1000000)\nINSERT INTO bench_steps (v) VALUES (:v);\n")
        try:
            runs = [("insert_tps", 1, ["-f", script.name]), ("tpcb_n_tps", 1, ["-N"])]
            if clients > 1:
                runs.append(("insert_tps_multi", clients, ["-f", script.name]))
                out["multi_clients"] = clients
            for label, count, args in runs:
                threads = str(min(count, os.cpu_count() or 1))
                proc = subprocess.run(
                    [exe, "-n", "-c", str(count), "-j", threads, "-T", str(secs), *args, dbname],
                    env=env,
                    check=True,
                    capture_output=True,
                    text=True,
                )
                out[label] = _parse_tps(proc.stdout)
        finally:
            os.unlink(script.name)
    return out


def _parse_tps(stdout: str) -> float:
    # pgbench 15 prints "tps = 1234.5 (without initial connection time)".
    match = re.search(r"tps = ([0-9.]+) \(without initial connection time\)", stdout)
    if not match:
        match = re.search(r"tps = ([0-9.]+)", stdout)
    if not match:
        raise RuntimeError(f"cannot parse pgbench output: {stdout!r}")
    return float(match.group(1))
