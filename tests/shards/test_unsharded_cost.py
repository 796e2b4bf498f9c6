"""With ``SHARDS`` unset, or naming one alias, nothing changes: the same store class, uuid4 ids, and the same
queries for a whole workflow run (issue 25: "same queries per step as before")."""

from __future__ import annotations

import pytest
from django.db import connections
from django.test import override_settings
from django.test.utils import CaptureQueriesContext

from rivet_workflows.django_runtime import get_runtime
from rivet_workflows.engine.model import ports
from rivet_workflows.engine.runtime import executor

from .conftest import BASE, SHARDS, keys_on

#: the queries of one ``job`` run (create, run to the queue wait, send, run to the end) on the default
#: database before sharding existed (measured on main at 9acfa71 with the same test): SQLite, PostgreSQL
BEFORE = {"sqlite": 122, "postgresql": 69}


def _queries_of_one_run(key: str, alias: str = "default") -> list[str]:
    runtime = get_runtime()
    client = runtime.registry.client()
    with CaptureQueriesContext(connections[alias]) as ctx:
        job = client.job.get_or_create(key)
        executor.drain(runtime, timeout=10)
        job.send("go", 1)
        executor.drain(runtime, timeout=10)
    assert job.workflow_state() == ports.COMPLETED
    return [q["sql"] for q in ctx.captured_queries]


@pytest.mark.django_db(transaction=True)
def test_one_alias_or_none_costs_the_same_queries_as_before():
    with override_settings(RIVET_WORKFLOWS=BASE):
        unset = _queries_of_one_run("a")
    with override_settings(RIVET_WORKFLOWS={**BASE, "SHARDS": ["default"]}):
        one = _queries_of_one_run("b")
    assert len(one) == len(unset)
    assert len(unset) == BEFORE[connections["default"].vendor]


@pytest.mark.django_db(databases=SHARDS, transaction=True)
def test_a_run_on_a_shard_costs_what_it_costs_unsharded():
    """Routing adds no query: a run on shard1 sends its shard what the same run sends one database."""
    with override_settings(RIVET_WORKFLOWS=BASE):
        unsharded = _queries_of_one_run("c")
    with override_settings(RIVET_WORKFLOWS={**BASE, "SHARDS": SHARDS}):
        [key] = keys_on("shard1", "job", 1, "cost")
        on_shard = _queries_of_one_run(key[0], alias="shard1")
    assert len(on_shard) <= len(unsharded) + 1  # get_or_create: find, then create (one more than upsert)
