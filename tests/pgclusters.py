"""Throwaway PostgreSQL clusters of the tests' own, in a temporary folder, on free ports (never the
machine's shared server): the soak restarts one (``tests/soak``), the failover test makes a primary and a
streaming standby (``tests/failover``), the shard tests start several (``tests/shards/clusters.py``).

Each cluster is ``initdb`` into its own folder with Debian's server programs (``/usr/lib/postgresql/*/bin``,
else ``PATH``), trust authentication for the user ``postgres``, ``fsync`` off, and is driven with
``pg_ctl`` (start, stop ``-m fast|immediate``, promote). When this process is root the programs run as the
``postgres`` system user (PostgreSQL refuses to run as root).
"""

from __future__ import annotations

import glob
import os
import pwd
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Sequence
from pathlib import Path

import psycopg

#: the server programs a cluster of ``PrivatePostgres`` needs
SERVER_PROGRAMS = ("initdb", "pg_ctl", "postgres")
#: the ``application_name`` of ``PrivatePostgres.connect``'s connections (a test ending sessions spares them)
MONITOR_NAME = "rivet-test-monitor"


def free_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago (bound and released)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def pg_bin(name: str) -> str:
    """The path of the PostgreSQL program ``name`` (the newest of ``/usr/lib/postgresql/*/bin``, else the
    one on ``PATH``). ``RuntimeError`` when there is none (the server package is not installed)."""
    found = sorted(glob.glob(f"/usr/lib/postgresql/*/bin/{name}"))
    if found:
        return found[-1]
    path = shutil.which(name)
    if path is None:
        raise RuntimeError(f"{name} not found (install PostgreSQL's server package)")
    return path


def has_server_programs(programs: Sequence[str] = SERVER_PROGRAMS) -> bool:
    """True when one ``/usr/lib/postgresql/*/bin`` folder holds every program of ``programs`` (Debian's
    server package), or every one is on ``PATH``."""
    if any(
        all(os.access(f"{folder}/{name}", os.X_OK) for name in programs)
        for folder in glob.glob("/usr/lib/postgresql/*/bin")
    ):
        return True
    return all(shutil.which(name) for name in programs)


class PrivatePostgres:
    """A PostgreSQL cluster of its own (``initdb`` into ``folder``/data, ``pg_ctl`` on a free port, trust
    authentication, user ``postgres``). Run as the ``postgres`` system user when this process is root.
    The port is chosen once: a restart listens on the same one (the clients' URLs stay valid).

    ``database``: the database ``create_database``/``connect``/``url`` name. ``init=False``: the caller fills
    ``data`` itself (a standby's base backup: tests/failover). ``subprocess.CalledProcessError`` when a
    program fails (its output is in the exception; the server's log is ``folder``/server.log).
    """

    def __init__(self, folder: Path, database: str = "rivet_soak", *, init: bool = True) -> None:
        self.folder = folder
        self.data = folder / "data"
        self.port = free_port()
        self.database = database
        self._as = ["runuser", "-u", "postgres", "--"] if os.geteuid() == 0 else []
        self._options = ""
        folder.mkdir(parents=True, exist_ok=True)
        if self._as:  # the postgres user must reach its folder (mkdtemp makes the parent 0700)
            folder.parent.chmod(0o755)
            user = pwd.getpwnam("postgres")
            os.chown(folder, user.pw_uid, user.pw_gid)
        if init:
            self._run(pg_bin("initdb"), "-D", str(self.data), "-U", "postgres", "-A", "trust", "--no-sync")

    @property
    def url(self) -> str:
        """``postgres://postgres@127.0.0.1:<port>/<database>`` (for ``DATABASE_URL``, dj-database-url)."""
        return f"postgres://postgres@127.0.0.1:{self.port}/{self.database}"

    def url_for(self, database: str) -> str:
        """The URL of another database of this cluster."""
        return f"postgres://postgres@127.0.0.1:{self.port}/{database}"

    def run(self, *cmd: str) -> None:
        """Run a PostgreSQL program (as the ``postgres`` user when this process is root) in the folder."""
        self._run(*cmd)

    def _run(self, *cmd: str) -> None:
        subprocess.run([*self._as, *cmd], check=True, capture_output=True, cwd=self.folder)

    def start(self, extra: str | None = None) -> None:
        """Start the server (``pg_ctl start -w``) and wait until it accepts connections. ``extra``: more
        ``-c name=value`` server options; None repeats the previous start's (a restart keeps them)."""
        if extra is not None:
            self._options = extra
        self._wait_for_dead_postmaster()
        options = (
            f"-p {self.port} -k {self.folder} -c listen_addresses=127.0.0.1 -c max_connections=300 "
            # fsync off: a crash of the server process (not of the machine) loses nothing the OS was given;
            # synchronous_commit stays on, or a crash would lose acknowledged commits
            "-c fsync=off -c full_page_writes=off"
        )
        if self._options:
            options = f"{options} {self._options}"
        self._run(pg_bin("pg_ctl"), "-D", str(self.data), "-l", str(self.folder / "server.log"), "-o", options,
                  "-w", "-t", "60", "start")  # fmt: skip

    def _wait_for_dead_postmaster(self, timeout: float = 30.0) -> None:
        """After a SIGKILL (``kill_server``) the old postmaster lingers (dying, then a zombie until init
        reaps it, a second or two), and a start that finds its pid of ``postmaster.pid`` alive refuses to
        run: wait until it is gone (at most ``timeout`` seconds; a server that really runs is left to
        ``pg_ctl`` to refuse)."""
        try:
            pid = self.postmaster_pid()
        except (FileNotFoundError, ValueError, IndexError):
            return
        deadline = time.monotonic() + timeout
        while _state(pid) is not None and time.monotonic() < deadline:
            time.sleep(0.05)

    def stop(self, mode: str = "fast") -> None:
        """``pg_ctl stop -m mode``: "fast" (sessions are ended, a clean shut-down), "immediate" (a crash of
        the server: recovery at the next start) or "smart". ``ValueError`` for another mode."""
        if mode not in ("fast", "immediate", "smart"):
            raise ValueError(f"pg_ctl stop mode is fast, immediate or smart, got {mode!r}")
        self._run(pg_bin("pg_ctl"), "-D", str(self.data), "-m", mode, "-w", "-t", "60", "stop")

    def restart(self, down_seconds: float = 2.0, mode: str = "immediate") -> None:
        """Stop the server (``mode``, by default a crash), stay down ``down_seconds``, start it again on the
        same port with the same options (crash recovery after an immediate stop)."""
        self.stop(mode)
        time.sleep(down_seconds)
        self.start()

    def running(self) -> bool:
        """True when the server answers a connection now."""
        try:
            with psycopg.connect(
                host="127.0.0.1", port=self.port, user="postgres", dbname="postgres", connect_timeout=2
            ):
                return True
        except psycopg.OperationalError:
            return False

    def postmaster_pid(self) -> int:
        """The server's main process id (from ``postmaster.pid``). ``FileNotFoundError`` when stopped."""
        return int((self.data / "postmaster.pid").read_text().split()[0])

    def create_database(self, name: str | None = None, *, drop: bool = False) -> None:
        """``CREATE DATABASE`` ``name`` (default: ``database``); with ``drop`` the database is dropped first
        (its sessions ended) if it exists."""
        name = name or self.database
        with psycopg.connect(host="127.0.0.1", port=self.port, user="postgres", autocommit=True) as conn:
            if drop:
                conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
            conn.execute(f'CREATE DATABASE "{name}"')

    def connect(self, database: str | None = None) -> psycopg.Connection:
        """A new autocommit connection to ``database`` (default: ``database``)."""
        return psycopg.connect(
            host="127.0.0.1", port=self.port, user="postgres", dbname=database or self.database,
            autocommit=True, connect_timeout=3, application_name=MONITOR_NAME,
        )  # fmt: skip

    def remove(self) -> None:
        """Crash-stop the server (if it runs) and delete its folder."""
        try:
            self.stop("immediate")
        except subprocess.CalledProcessError:
            pass
        shutil.rmtree(self.folder, ignore_errors=True)


def _state(pid: int) -> str | None:
    """The state letter of process ``pid`` (R, S, Z, ...) from /proc; None when there is no such process."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return None


def children(pid: int) -> list[int]:
    """The processes whose parent is ``pid`` (from /proc)."""
    out = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == pid:
            out.append(int(stat.parent.name))
    return out


def send_signal(pid: int, sig: int) -> None:
    """``os.kill(pid, sig)``, ignoring a process that is already gone."""
    try:
        os.kill(pid, sig)
    except ProcessLookupError:
        pass


def kill_server(server: PrivatePostgres) -> float:
    """SIGKILL the server's postmaster and every one of its processes at once (stopped first, so none sends
    anything more: the machine is gone). Returns the ``time.time()`` of the kill."""
    postmaster = server.postmaster_pid()
    victims = [postmaster, *children(postmaster)]
    for pid in victims:
        send_signal(pid, signal.SIGSTOP)
    killed_at = time.time()
    for pid in victims:
        send_signal(pid, signal.SIGKILL)
    return killed_at
