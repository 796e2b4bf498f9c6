"""Several throwaway PostgreSQL clusters for the shard tests (DESIGN.md section 21): one per shard, each a
``tests.pgclusters.PrivatePostgres`` of its own (``initdb`` in a temporary folder, a free port, trust
authentication, ``fsync`` off), with a database created in each, a way to take one down for a while and
bring it back on the same port, and the tear-down.

Used by the ``two_clusters`` fixture (``tests/shards/conftest.py``) and by benchmark P10
(``bench/shards.py``). Without pytest::

    with Clusters(2) as clusters:
        urls = clusters.urls()                      # one per shard, "default" first
        clusters.down_for(1, 10.0)                  # shard1's server stopped 10 s, then started again
        clusters.count(1, "SELECT count(*) FROM rivet_workflows_actor")
"""

from __future__ import annotations

import shutil
import subprocess
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import psycopg

from tests.pgclusters import PrivatePostgres, has_server_programs, kill_server

DATABASE = "rivet_shards"


def aliases_for(count: int) -> list[str]:
    """The Django database aliases of ``count`` shards, the first one Django's own: ``["default",
    "shard1", "shard2", ...]`` (the ``RIVET_WORKFLOWS["SHARDS"]`` of ``tests/shards/settings.py``)."""
    if count < 1:
        raise ValueError(f"at least one shard, got {count}")
    return ["default", *(f"shard{i}" for i in range(1, count))]


class Clusters:
    """``count`` PostgreSQL clusters, one per shard alias (``aliases_for(count)``), each with the database
    ``database`` once ``start()`` returned. A shard is named by its index or its alias everywhere.

    ``folder``: where the clusters live (default: a new temporary folder, removed by ``remove()`` unless
    ``keep``). ``RuntimeError`` at ``start()`` when PostgreSQL's server programs are missing
    (``available()`` says so beforehand); ``subprocess.CalledProcessError`` when one fails (its
    ``server.log`` is in the cluster's folder).
    """

    def __init__(self, count: int = 2, *, database: str = DATABASE, folder: Path | None = None) -> None:
        self.aliases = aliases_for(count)
        self.database = database
        self._folder = folder
        self.servers: list[PrivatePostgres] = []
        self.keep = False
        self._downs: list[threading.Thread] = []

    @property
    def folder(self) -> Path:
        """The clusters' folder (a new temporary one, made at the first use, unless given)."""
        if self._folder is None:
            self._folder = Path(tempfile.mkdtemp(prefix="rivet-shards-"))
        return self._folder

    @staticmethod
    def available() -> bool:
        """True when this machine has PostgreSQL's server programs (initdb, pg_ctl, postgres)."""
        return has_server_programs()

    # --- life cycle --------------------------------------------------------------------------------

    def start(self) -> Clusters:
        """``initdb`` and start every cluster (fsync off), create ``database`` in each. Returns self."""
        if not self.available():
            raise RuntimeError("PostgreSQL's server programs (initdb, pg_ctl, postgres) are not installed")
        for alias in self.aliases:
            server = PrivatePostgres(self.folder / alias, self.database)
            self.servers.append(server)
            server.start()
            server.create_database()
        return self

    def __enter__(self) -> Clusters:
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.remove()

    def remove(self) -> None:
        """Stop every cluster (immediately) and delete the folder (kept when ``keep`` is set)."""
        for thread in self._downs:
            thread.join(timeout=120)
        for server in self.servers:
            try:
                server.stop("immediate")
            except subprocess.CalledProcessError:  # already stopped
                pass
        if not self.keep and self._folder is not None:
            shutil.rmtree(self._folder, ignore_errors=True)

    # --- naming --------------------------------------------------------------------------------------

    def server(self, shard: int | str) -> PrivatePostgres:
        """The cluster of ``shard`` (an index, or an alias such as "shard1"). ``KeyError`` for another."""
        if isinstance(shard, str):
            if shard not in self.aliases:
                raise KeyError(f"no shard {shard!r}; shards: {self.aliases}")
            shard = self.aliases.index(shard)
        return self.servers[shard]

    def urls(self, database: str | None = None) -> list[str]:
        """Each shard's ``postgres://`` URL of ``database`` (default: the one ``start`` created), in alias
        order."""
        return [server.url_for(database or self.database) for server in self.servers]

    def env(self, database: str | None = None) -> dict[str, str]:
        """The environment of a process on these shards with ``tests/shards/settings.py``: ``RIVET_SHARD_URLS``
        (the URLs, comma-separated, "default" first) and ``DJANGO_SETTINGS_MODULE``."""
        return {
            "RIVET_SHARD_URLS": ",".join(self.urls(database)),
            "DJANGO_SETTINGS_MODULE": "tests.shards.settings",
        }

    def fresh_database(self, name: str) -> list[str]:
        """Drop (if there) and create the database ``name`` on every cluster; returns its URLs. A test that
        wants a clean schema of its own on the session's clusters starts with this."""
        for server in self.servers:
            server.create_database(name, drop=True)
        return self.urls(name)

    # --- faults --------------------------------------------------------------------------------------

    def stop(self, shard: int | str, mode: str = "fast") -> None:
        """``pg_ctl stop -m mode`` the shard's cluster: "fast" (sessions ended, a clean shut-down) or
        "immediate" (a crash: recovery at the next start)."""
        self.server(shard).stop(mode)

    def kill(self, shard: int | str) -> float:
        """SIGKILL every process of the shard's cluster at once (the machine is gone); the ``time.time()``
        of the kill. ``start`` brings it back (crash recovery)."""
        return kill_server(self.server(shard))

    def start_again(self, shard: int | str) -> None:
        """Start the shard's stopped cluster on its port, with its options (``pg_ctl start -w``)."""
        self.server(shard).start()

    def down_for(
        self, shard: int | str, seconds: float, mode: str = "fast", *, background: bool = False
    ) -> threading.Thread | None:
        """Stop the shard's cluster (``mode``), keep it down ``seconds``, start it again. With
        ``background`` it happens on a thread (returned; ``join`` it) while the caller goes on."""

        def outage() -> None:
            self.stop(shard, mode)
            time.sleep(seconds)
            self.start_again(shard)

        if not background:
            outage()
            return None
        thread = threading.Thread(target=outage, name=f"outage-{shard}", daemon=True)
        thread.start()
        self._downs.append(thread)
        return thread

    def running(self, shard: int | str) -> bool:
        """True when the shard's cluster answers a connection now."""
        return self.server(shard).running()

    def ensure_running(self) -> None:
        """Start any cluster a failed test left stopped (waits for an outage thread first)."""
        for thread in self._downs:
            thread.join(timeout=120)
        self._downs.clear()
        for server in self.servers:
            if not server.running():
                server.start()

    # --- reading -------------------------------------------------------------------------------------

    def connect(self, shard: int | str, database: str | None = None) -> psycopg.Connection:
        """A new autocommit psycopg connection to the shard's ``database`` (default: ``start``'s)."""
        return self.server(shard).connect(database or self.database)

    def query(self, shard: int | str, sql: str, params: Any = None, *, database: str | None = None) -> list:
        """The rows of ``sql`` on the shard (a connection of its own, closed afterwards)."""
        with self.connect(shard, database) as conn:
            return conn.execute(sql, params).fetchall()

    def count(self, shard: int | str, sql: str, params: Any = None, *, database: str | None = None) -> int:
        """The first column of the first row of ``sql`` on the shard (a ``SELECT count(*) ...``)."""
        return int(self.query(shard, sql, params, database=database)[0][0])
