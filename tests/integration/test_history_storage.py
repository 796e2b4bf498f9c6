"""The history table's storage (migration 0002, benchmark P3): one index serves look-ups by actor, and on
PostgreSQL the table keeps room for HOT updates and is vacuumed after a fixed number of dead rows."""

from __future__ import annotations

import pytest
from django.db import connection

from rivet_workflows import models
from tests.conftest import is_postgres

pytestmark = pytest.mark.django_db


def _indexes(table: str) -> dict[str, dict]:
    with connection.cursor() as cursor:
        constraints = connection.introspection.get_constraints(cursor, table)
    return {name: c for name, c in constraints.items() if c["index"] or c["unique"] or c["primary_key"]}


def test_history_rows_carry_two_indexes_the_key_and_the_unique_actor_key():
    indexes = _indexes(models.HistoryEntry._meta.db_table)
    columns = sorted(tuple(c["columns"]) for c in indexes.values())
    assert columns == [("actor_id", "key"), ("id",)]


def test_the_prune_delete_and_the_history_load_use_the_unique_index():
    if not is_postgres():
        pytest.skip("plans are checked on PostgreSQL")
    table = models.HistoryEntry._meta.db_table
    with connection.cursor() as cursor:
        cursor.execute("SET LOCAL enable_seqscan = off")  # tiny test tables: ask which index, not whether
        cursor.execute(
            f"EXPLAIN DELETE FROM {table} WHERE actor_id = %s AND key = ANY(%s)", ["a", ["x/~0/s"]]
        )
        delete_plan = "\n".join(row[0] for row in cursor.fetchall())
        cursor.execute(f"EXPLAIN SELECT * FROM {table} WHERE actor_id = %s ORDER BY id", ["a"])
        load_plan = "\n".join(row[0] for row in cursor.fetchall())
    assert "rivet_entry_actor_key_uniq" in delete_plan
    assert "rivet_entry_actor_key_uniq" in load_plan


def test_postgres_tables_keep_room_for_hot_updates_and_vacuum_after_1000_dead_rows():
    if not is_postgres():
        pytest.skip("storage parameters exist on PostgreSQL only")
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT relname, reloptions FROM pg_class WHERE relname IN (%s, %s)",
            [models.HistoryEntry._meta.db_table, models.Actor._meta.db_table],
        )
        options = {name: set(opts or []) for name, opts in cursor.fetchall()}
    assert {
        "fillfactor=90",
        "autovacuum_vacuum_scale_factor=0",
        "autovacuum_vacuum_threshold=1000",
    } <= options[models.HistoryEntry._meta.db_table]
    assert "fillfactor=80" in options[models.Actor._meta.db_table]
