"""PostgresStore prepares its own statements (``storage.prepared``, setting ``PREPARED_STATEMENTS``): after a
run the step's commit, the claim and the history load are in ``pg_prepared_statements`` of the worker's
connection and the commit statement was planned once per shape, not once per step; the application's ORM
queries are never prepared; with the setting off nothing is, and runs behave the same."""

from __future__ import annotations

import pytest
from django.db import connection

from rivet_workflows import models
from rivet_workflows.engine.model import ports
from rivet_workflows.storage import PostgresStore
from tests.conftest import is_postgres

from .support import StoreHarness, entry

pytestmark = [
    pytest.mark.postgres,
    pytest.mark.skipif(not is_postgres(), reason="needs PostgreSQL (pg_prepared_statements)"),
    pytest.mark.django_db(transaction=True),
]


def _prepared() -> list[tuple[str, int]]:
    """(statement, times it was executed: generic + custom plans) prepared on this thread's connection."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT statement, generic_plans + custom_plans FROM pg_prepared_statements")
        return [(sql, int(runs)) for sql, runs in cursor.fetchall()]


def _run_steps(store: PostgresStore, steps: int) -> str:
    actor_id = StoreHarness("pg", store).new_actor()
    token, _actor, _history, _now = store.claim_and_load(actor_id, "runner", 30)
    for i in range(steps):
        assert store.commit(
            actor_id, token, ports.Commit(state={"n": i}, upserts=[entry(f"s{i}", output=i)])
        ).ok
    assert store.commit(actor_id, token, ports.Commit(release=True, workflow_state=ports.COMPLETED)).ok
    return actor_id


def test_the_step_commit_is_prepared_once_and_reused_for_every_step():
    connection.close()  # a fresh connection: nothing prepared on it yet
    store = PostgresStore(poll_interval=0.005)
    actor_id = _run_steps(store, 12)
    prepared = _prepared()
    commits = [
        runs for sql, runs in prepared if "UPDATE rivet_workflows_actor AS a" in sql and "historyentry" in sql
    ]
    assert commits, prepared
    assert max(commits) >= 12  # one prepared statement ran every step's commit
    assert any("historyentry" in sql and sql.lstrip().startswith("SELECT") for sql, _ in prepared)  # the load
    assert store.get_actor(actor_id).state == {"n": 11}
    assert [e.key for e in store.load_history(actor_id)] == [f"s{i}" for i in range(12)]


def test_the_applications_orm_queries_are_not_prepared():
    connection.close()
    store = PostgresStore(poll_interval=0.005)
    _run_steps(store, 3)
    for _ in range(10):
        assert models.Actor.objects.filter(workflow_state=ports.COMPLETED).count() == 1
    assert not [sql for sql, _ in _prepared() if '"rivet_workflows_actor"."workflow_state"' in sql]


def test_with_prepared_statements_off_nothing_is_prepared_and_runs_are_the_same():
    connection.close()
    store = PostgresStore(poll_interval=0.005, prepared_statements=False)
    actor_id = _run_steps(store, 6)
    assert _prepared() == []
    assert store.get_actor(actor_id).state == {"n": 5}
    assert [e.key for e in store.load_history(actor_id)] == [f"s{i}" for i in range(6)]


def test_a_new_connection_after_a_drop_prepares_again_and_the_commit_goes_through():
    connection.close()
    store = PostgresStore(poll_interval=0.005)
    actor_id = StoreHarness("pg", store).new_actor()
    token = store.claim(actor_id, "runner", 30)
    for i in range(3):
        assert store.commit(actor_id, token, ports.Commit(upserts=[entry(f"a{i}", output=i)])).ok
    connection.close()  # the server side of the prepared statements is gone with the session
    for i in range(3):
        assert store.commit(actor_id, token, ports.Commit(upserts=[entry(f"b{i}", output=i)])).ok
    assert len(store.load_history(actor_id)) == 6
    assert _prepared()  # prepared again on the new session


def test_instants_read_by_the_prepared_statements_are_right_whatever_the_session_time_zone():
    from datetime import UTC, datetime, timedelta

    store = PostgresStore(poll_interval=0.005)
    actor_id = StoreHarness("pg", store).new_actor()
    with connection.cursor() as cursor:
        cursor.execute("SET TIME ZONE 'Asia/Tokyo'")  # +09:00: a naive reading would be 9 hours off
    token, _actor, _history, claimed_at = store.claim_and_load(actor_id, "runner", 30)
    wake = datetime.now(UTC) + timedelta(hours=1)
    result = store.commit(actor_id, token, ports.Commit(wake_at=wake, release=True))
    assert result.ok
    assert abs(claimed_at - datetime.now(UTC)) < timedelta(seconds=5)
    assert claimed_at.utcoffset() == timedelta(0)
    assert abs(result.wake_at - wake) < timedelta(milliseconds=1)
    assert abs(store.now() - datetime.now(UTC)) < timedelta(seconds=5)


def test_an_execute_wrapper_sees_every_statement_of_the_store_and_errors_are_djangos():
    from django.db import ProgrammingError

    from rivet_workflows.storage.prepared import store_cursor

    connection.close()
    store = PostgresStore(poll_interval=0.005)
    actor_id = StoreHarness("pg", store).new_actor()
    token = store.claim(actor_id, "runner", 30)
    assert store.commit(actor_id, token, ports.Commit(upserts=[entry("quiet")])).ok  # the pooled path
    seen: list[str] = []

    def watch(execute, sql, params, many, context):
        seen.append(sql)
        return execute(sql, params, many, context)

    with connection.execute_wrapper(watch):
        assert store.commit(actor_id, token, ports.Commit(upserts=[entry("watched")])).ok
    assert [sql for sql in seen if "historyentry" in sql and "UPDATE rivet_workflows_actor AS a" in sql]
    with store_cursor("default") as cursor, pytest.raises(ProgrammingError):
        cursor.execute("SELECT * FROM no_such_table_here")
    with store_cursor("default") as cursor:  # the connection is usable after the error (autocommit)
        cursor.execute("SELECT %s::int + 1", [41])
        assert cursor.fetchone() == (42,)
    assert [e.key for e in store.load_history(actor_id)] == ["quiet", "watched"]
