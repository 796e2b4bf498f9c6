"""One shard down or never migrated: the other shard's work and pages go on, and every error names the
shard (DESIGN.md section 21). A shard is taken down by making its connections fail to open (Django's
``OperationalError``, what a stopped server or a missing database gives)."""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator

import pytest
from django.core.management import CommandError, call_command
from django.db import OperationalError, ProgrammingError, connections
from django.test import override_settings

from project.celery import app
from rivet_workflows import checks, models
from rivet_workflows.driver import tasks
from rivet_workflows.engine.model import errors, ports
from rivet_workflows.engine.runtime import executor

from .conftest import BASE, SHARDS, both_databases, keys_on

LIST = "/admin/rivet_workflows/actor/"
TOKEN = {"HTTP_AUTHORIZATION": "Bearer shard-token"}


@contextlib.contextmanager
def down(alias: str) -> Iterator[None]:
    """The database ``alias`` cannot be reached while inside: every new connection to it fails."""
    wrapper = type(connections[alias])
    original = wrapper.ensure_connection

    def refuse(self):
        if self.alias == alias:
            raise OperationalError(f'connection to server for "{alias}" failed: Connection refused')
        return original(self)

    connections[alias].close()
    wrapper.ensure_connection = refuse
    try:
        yield
    finally:
        wrapper.ensure_connection = original


@pytest.fixture
def due(sharded):
    """One ``job`` on each shard, made due again after its first run: ``{alias: handle}``."""
    client = sharded.registry.client()
    made = {alias: client.job.get_or_create(keys_on(alias, "job", 1, "due")[0]) for alias in SHARDS}
    executor.drain(sharded, timeout=10)
    now = sharded.store.now()
    for alias, handle in made.items():
        models.Actor.objects.using(alias).filter(pk=handle.actor_id).update(wake_at=now)
    return made


# --- 1. the sweep ------------------------------------------------------------------------------------


@both_databases
def test_the_sweep_claims_the_healthy_shard_and_warns_once_about_the_down_one(
    sharded, due, caplog, empty_broker
):
    with down("shard1"), caplog.at_level(logging.WARNING, logger="rivet_workflows"):
        assert tasks.sweep() == 1
    row = models.Actor.objects.using("default").get(pk=due["default"].actor_id)
    assert row.lease_owner == sharded.owner  # claimed on default and queued
    other = models.Actor.objects.using("shard1").get(pk=due["shard1"].actor_id)
    assert other.lease_owner is None  # untouched: still due when shard1 is back
    warned = [
        r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING and r.name == "rivet_workflows"
    ]
    assert len(warned) == 1 and "'shard1'" in warned[0], warned
    assert not any("sweep raised" in m or "schedules failed" in m or "runs failed" in m for m in warned)
    app.control.purge()


@both_databases
def test_claim_due_keeps_what_the_healthy_shard_claimed_whichever_shard_it_asks_first(sharded, due):
    store = sharded.store
    with down("shard1"):
        first = store.claim_due("a", 10, 5)
        store.release(*first[0]) if first else None
        second = store.claim_due("b", 10, 5)  # the other shard first this time
    assert [a for a, _ in first] == [due["default"].actor_id]
    assert [a for a, _ in second] == [due["default"].actor_id]
    assert set(store.take_skipped()) == {"shard1"}


@both_databases
def test_the_sweeps_other_readers_skip_the_down_shard(sharded, due):
    store = sharded.store
    with down("shard1"):
        assert store.next_deadline() is not None  # default's
        assert store.cron_next_deadline() is None
        assert store.cron_due(10) == []
        assert store.suspended_by_other_version("v2", 10) == []
        assert sum(store.actor_counts().by_state.values()) == 1
        assert store.wait_for_wakes(0.01) == []
        with pytest.raises(errors.StoreUnavailableError, match="shard 'shard1'"):
            store.list_children(due["default"].actor_id)  # a cascade (cancel children) must not miss one
        assert store.reachable_children(due["default"].actor_id) == ([], ["shard1"])


# --- 2. pages and commands ---------------------------------------------------------------------------


@both_databases
def test_an_actor_of_the_healthy_shard_is_served_by_the_api(sharded, due, client):
    with down("shard1"):
        answer = client.get(f"/api/rivet/actors/{due['default'].actor_id}", **TOKEN)
        listing = client.get("/api/rivet/actors?name=job", **TOKEN)
    assert answer.status_code == 200, answer.content
    assert answer.json()["actor_id"] == due["default"].actor_id
    assert answer.json()["unavailable_shards"] == ["shard1"]  # its children there could not be read
    assert listing.status_code == 503  # a merged list without shard1 would skip rows: refused, naming it
    body = listing.json()
    assert body["code"] == "store_unavailable" and body["metadata"]["shard"] == "shard1"
    assert "shard1" in body["message"]


@both_databases
def test_the_admin_pages_of_the_healthy_shard_work_and_say_which_shard_is_down(sharded, due, admin_client):
    with down("shard1"):
        listed = admin_client.get(f"{LIST}?shard=default")
        plain = admin_client.get(LIST)
        page = admin_client.get(f"{LIST}{due['default'].actor_id}/change/")
        board = admin_client.get("/admin/rivet_workflows/dashboard/")
    for response in (listed, plain, page, board):
        assert response.status_code == 200
    assert due["default"].actor_id in listed.content.decode()
    for response in (listed, board, page):
        text = response.content.decode()
        assert "Shard &#x27;shard1&#x27; is unavailable" in text or "Shard 'shard1' is unavailable" in text


@both_databases
def test_rivet_list_names_the_down_shard(sharded, due):
    with (
        override_settings(RIVET_WORKFLOWS={**BASE, "SHARDS": SHARDS}),
        down("shard1"),
        pytest.raises(CommandError, match="shard 'shard1'"),
    ):
        call_command("rivet", "list")


# --- 5. errors name the shard ------------------------------------------------------------------------


@both_databases
def test_a_call_on_a_down_shard_raises_store_unavailable_naming_it(sharded, due):
    with down("shard1"), pytest.raises(errors.StoreUnavailableError) as caught:
        sharded.store.get_actor(due["shard1"].actor_id)
    assert caught.value.shard == "shard1" and "shard 'shard1'" in str(caught.value)
    with down("shard1"), pytest.raises(errors.StoreUnavailableError, match="shard 'shard1'"):
        sharded.store.count_actors(ports.ActorFilter())


@both_databases
def test_an_unmigrated_shard_says_to_migrate_it(sharded, due, monkeypatch):
    shard1 = sharded.store.stores["shard1"]

    def missing(*args, **kwargs):
        raise ProgrammingError('relation "rivet_workflows_actor" does not exist')

    monkeypatch.setattr(shard1, "get_actor", missing)
    with pytest.raises(errors.StoreUnavailableError) as caught:
        sharded.store.get_actor(due["shard1"].actor_id)
    assert caught.value.shard == "shard1"
    assert "manage.py migrate --database shard1" in str(caught.value)


@both_databases
def test_the_database_check_finds_a_shard_without_tables(sharded, monkeypatch):
    with override_settings(RIVET_WORKFLOWS={**BASE, "SHARDS": SHARDS}):
        assert checks.check_shard_tables(databases=SHARDS) == []
        assert checks.check_shard_tables() == []  # a database check: nothing without --database
        introspection = connections["shard1"].introspection
        monkeypatch.setattr(introspection, "table_names", lambda *a, **k: ["django_migrations"])
        found = checks.check_shard_tables(databases=SHARDS)
    assert [m.id for m in found] == ["rivet_workflows.W008"]
    assert "'shard1'" in found[0].msg and "migrate --database shard1" in found[0].hint


# --- 3. SHARD_BUCKETS --------------------------------------------------------------------------------


@pytest.mark.parametrize("buckets", [2.5, "256", True, None])
def test_shard_buckets_of_another_type_is_refused_naming_it(buckets):
    with override_settings(RIVET_WORKFLOWS={**BASE, "SHARDS": SHARDS, "SHARD_BUCKETS": buckets}):
        found = checks.check_settings()
    assert [m.id for m in found] == ["rivet_workflows.E001"]
    assert "SHARD_BUCKETS" in found[0].msg and "must be an int" in found[0].msg


@pytest.mark.parametrize("buckets", [0, -1, 1, 70000])
def test_shard_buckets_out_of_range_names_it_with_a_hint_about_buckets(buckets):
    with override_settings(RIVET_WORKFLOWS={**BASE, "SHARDS": SHARDS, "SHARD_BUCKETS": buckets}):
        found = [m for m in checks.check_settings() if m.id == "rivet_workflows.E004"]
    assert len(found) == 1 and "SHARD_BUCKETS" in found[0].msg
    assert "buckets" in found[0].hint and "List DATABASES" not in found[0].hint
