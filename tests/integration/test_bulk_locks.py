"""A bulk action by filter holds no table-wide lock (DESIGN.md section 19, issue 23): while it works through
hundreds of actors, other sessions create and change actors without waiting, and PostgreSQL's lock table
never shows the actor table locked in a mode stronger than the row-level one every ``UPDATE`` takes."""

from __future__ import annotations

import threading
import time

import psycopg
import pytest
from django.db import connection, connections

import rivet_workflows as rw
from rivet_workflows import models
from rivet_workflows.engine.model import ports
from rivet_workflows.engine.runtime import executor
from tests.conftest import requires_postgres

pytestmark = [pytest.mark.django_db(transaction=True), requires_postgres]

ACTORS = 400
#: the table lock modes an UPDATE or INSERT takes; anything stronger would block other writers
ROW_LEVEL = {"AccessShareLock", "RowShareLock", "RowExclusiveLock"}


async def _tagged(ctx):
    await ctx.set_attributes({"batch": "b-1"})
    await ctx.queue.next("go", names=["go"])


def _conninfo() -> str:
    params = connection.get_connection_params()
    return psycopg.conninfo.make_conninfo(
        **{k: v for k, v in params.items() if k in ("host", "port", "user", "password", "dbname")}
    )


def test_a_bulk_pause_over_hundreds_of_actors_holds_no_table_lock(make_django_runtime):
    runtime = make_django_runtime(rw.setup(use={"tagged": rw.workflow(run=_tagged, queues=["go"])}))
    client = runtime.client()
    for i in range(ACTORS):
        client.tagged.create(f"t-{i}")
    executor.drain(runtime, timeout=120)
    assert len(client.list_actors(attributes={"batch": "b-1"}, limit=500).items) == ACTORS

    table = models.Actor._meta.db_table
    modes: set[str] = set()
    other_writes: list[float] = []
    result: list[object] = []
    done = threading.Event()

    def bulk() -> None:
        try:
            result.append(client.bulk("pause", attributes={"batch": "b-1"}, reason="maintenance"))
        finally:
            connections.close_all()  # this thread's connection, so the test database can be dropped
            done.set()

    worker = threading.Thread(target=bulk)
    with (
        psycopg.connect(_conninfo(), autocommit=True) as watcher,
        psycopg.connect(_conninfo(), autocommit=True) as writer,
    ):
        writer.execute("SET lock_timeout = '300ms'")
        worker.start()
        while not done.is_set():
            rows = watcher.execute(
                "SELECT l.mode FROM pg_locks l JOIN pg_class c ON c.oid = l.relation "
                "WHERE c.relname = %s AND l.pid <> pg_backend_pid() AND l.granted",
                (table,),
            ).fetchall()
            modes.update(mode for (mode,) in rows)
            started = time.monotonic()
            # another session changes an actor the bulk action does not select, and would wait on a table lock
            writer.execute(f"UPDATE {table} SET updated_at = now() WHERE name = 'nobody'")  # noqa: S608
            other_writes.append(time.monotonic() - started)
            time.sleep(0.002)
        worker.join()

    [outcome] = result
    assert outcome.matched == ACTORS and outcome.changed == ACTORS
    assert all(client.tagged.get(f"t-{i}").workflow_state() == ports.PAUSED for i in (0, ACTORS - 1))
    assert modes <= ROW_LEVEL, modes  # (empty when no sample fell inside one of its short transactions)
    assert len(other_writes) > 5 and max(other_writes) < 0.3
    print(
        f"{len(other_writes)} writes beside the bulk, slowest {max(other_writes) * 1000:.1f} ms; modes {modes}"
    )
