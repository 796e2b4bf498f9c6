"""Private PostgreSQL and Redis servers of the soak, on free ports in its temporary folder, so that it can
restart them without disturbing anyone else's (never the machine's shared servers)."""

from __future__ import annotations

import glob
import os
import pwd
import shutil
import subprocess
import time
from pathlib import Path

import psycopg

from tests.system.conftest import _free_port


def _pg_bin(name: str) -> str:
    found = sorted(glob.glob(f"/usr/lib/postgresql/*/bin/{name}"))
    if found:
        return found[-1]
    path = shutil.which(name)
    if path is None:
        raise RuntimeError(f"{name} not found (install PostgreSQL's server package)")
    return path


class PrivatePostgres:
    """A PostgreSQL cluster of its own (``initdb`` into ``folder``, ``pg_ctl`` on a free port, trust
    authentication, user ``postgres``). Run as the ``postgres`` system user when this process is root
    (PostgreSQL refuses to run as root). ``restart()`` is an immediate (crash) stop and a start."""

    def __init__(self, folder: Path, database: str = "rivet_soak", *, init: bool = True) -> None:
        self.folder = folder
        self.data = folder / "data"
        self.port = _free_port()
        self.database = database
        self._as = ["runuser", "-u", "postgres", "--"] if os.geteuid() == 0 else []
        folder.mkdir(parents=True, exist_ok=True)
        if self._as:  # the postgres user must reach its folder (mkdtemp makes the parent 0700)
            folder.parent.chmod(0o755)
            user = pwd.getpwnam("postgres")
            os.chown(folder, user.pw_uid, user.pw_gid)
        if init:  # else the caller fills ``data`` (a standby's base backup: tests/failover)
            self._run(_pg_bin("initdb"), "-D", str(self.data), "-U", "postgres", "-A", "trust", "--no-sync")

    @property
    def url(self) -> str:
        return f"postgres://postgres@127.0.0.1:{self.port}/{self.database}"

    def run(self, *cmd: str) -> None:
        """Run a PostgreSQL program (as the ``postgres`` user when this process is root) in the folder."""
        self._run(*cmd)

    def _run(self, *cmd: str) -> None:
        subprocess.run([*self._as, *cmd], check=True, capture_output=True, cwd=self.folder)

    def start(self, extra: str = "") -> None:
        """Start the server (``pg_ctl start -w``); ``extra``: more ``-c name=value`` server options."""
        options = (
            f"-p {self.port} -k {self.folder} -c listen_addresses=127.0.0.1 -c max_connections=300 "
            # fsync off: a crash of the server process (not of the machine) loses nothing the OS was given;
            # synchronous_commit stays on, or a crash would lose acknowledged commits
            "-c fsync=off -c full_page_writes=off"
        )
        if extra:
            options = f"{options} {extra}"
        self._run(_pg_bin("pg_ctl"), "-D", str(self.data), "-l", str(self.folder / "server.log"), "-o", options,
                  "-w", "-t", "60", "start")  # fmt: skip

    def stop(self, mode: str = "fast") -> None:
        """``pg_ctl stop -m mode`` ("fast", or "immediate": a crash of the server)."""
        self._run(_pg_bin("pg_ctl"), "-D", str(self.data), "-m", mode, "-w", "-t", "60", "stop")

    def restart(self, down_seconds: float = 2.0) -> None:
        """Crash the server (``-m immediate``), stay down ``down_seconds``, start it again (crash recovery)."""
        self.stop("immediate")
        time.sleep(down_seconds)
        self.start()

    def create_database(self) -> None:
        with psycopg.connect(host="127.0.0.1", port=self.port, user="postgres", autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{self.database}"')

    def connect(self) -> psycopg.Connection:
        """A new autocommit connection to the soak's database."""
        return psycopg.connect(
            host="127.0.0.1", port=self.port, user="postgres", dbname=self.database, autocommit=True,
            connect_timeout=3, application_name="rivet-soak-monitor",
        )  # fmt: skip

    def remove(self) -> None:
        try:
            self.stop("immediate")
        except subprocess.CalledProcessError:
            pass
        shutil.rmtree(self.folder, ignore_errors=True)
