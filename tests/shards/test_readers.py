"""Every reader spans the shards: the sweep, ``rivet list/check``, the dashboard, the admin (a Shard filter,
the trace page of an actor on shard1), the metrics' counts and the system checks (DESIGN.md section 21)."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.core.management import call_command
from django.test import override_settings

from project.celery import app
from rivet_workflows import checks, models, ops
from rivet_workflows.admin import dashboard
from rivet_workflows.driver import tasks
from rivet_workflows.engine.model import ports
from rivet_workflows.routers import ShardRouter

from .conftest import BASE, SHARDS, both_databases, keys_on

LIST = "/admin/rivet_workflows/actor/"


@pytest.fixture
def jobs(sharded):
    """Two waiting ``job`` workflows on each shard (drained to their queue wait): ``{alias: [handle, ...]}``."""
    client = sharded.registry.client()
    made = {alias: [client.job.get_or_create(k) for k in keys_on(alias, "job", 2, "r")] for alias in SHARDS}
    from rivet_workflows.engine.runtime import executor

    executor.drain(sharded, timeout=10)
    return made


@both_databases
def test_the_sweep_claims_due_actors_on_every_shard(sharded, empty_broker):
    client = sharded.registry.client()
    made = [client.job.get_or_create(k) for alias in SHARDS for k in keys_on(alias, "job", 1, "sweep")]
    assert {sharded.store.alias_of(h.actor_id) for h in made} == set(SHARDS)
    assert tasks.sweep() == 2  # each claimed on its shard and queued to the broker
    for handle in made:
        row = models.Actor.objects.using(sharded.store.alias_of(handle.actor_id)).get(pk=handle.actor_id)
        assert row.lease_owner == sharded.owner
    assert sharded.store.claim_due("t", 10, 5) == []  # nothing left due on either
    app.control.purge()


@both_databases
def test_rivet_list_and_check_see_both_shards(sharded, jobs):
    rows, total = ops.list_actors(sharded, name="job")
    assert total == 4 and {r.actor_id for r in rows} == {h.actor_id for hs in jobs.values() for h in hs}
    checked = ops.check(sharded)
    assert sorted(r.actor_id for r in checked) == sorted(h.actor_id for hs in jobs.values() for h in hs)
    assert all(r.outcome == "ok" for r in checked)
    report = ops.act(sharded, "cancel", names=["job"], reason="test")
    assert len(report.changed) == 4
    assert {h.workflow_state() for hs in jobs.values() for h in hs} == {ports.CANCELLED}


@both_databases
def test_rivet_list_command_prints_actors_of_both_shards(sharded, jobs, capsys):
    with override_settings(RIVET_WORKFLOWS={**BASE, "SHARDS": SHARDS}):
        call_command("rivet", "list", "--name", "job")
    out = capsys.readouterr().out
    assert all(h.actor_id[:8] in out or h.actor_id in out for hs in jobs.values() for h in hs), out


@both_databases
def test_the_dashboard_counts_and_lists_both_shards(sharded, jobs, admin_client):
    [stuck] = jobs["shard1"][:1]
    now = sharded.store.now()
    models.Actor.objects.using("shard1").filter(pk=stuck.actor_id).update(
        lease_owner="dead", lease_expires_at=now - timedelta(seconds=5), wake_at=now - timedelta(minutes=1)
    )
    board = dashboard.build()
    assert sum(board.totals) == 4 and board.expired_count == 1
    assert board.oldest_due is not None and board.oldest_due.actor_id == stuck.actor_id
    assert admin_client.get("/admin/rivet_workflows/dashboard/").status_code == 200
    counts = sharded.store.actor_counts()
    assert sum(counts.by_state.values()) == 4 and counts.leases_expired == 1


@both_databases
def test_the_admin_lists_one_shard_at_a_time_and_opens_any_actor(sharded, jobs, admin_client):
    first = admin_client.get(LIST).content.decode()
    assert all(h.actor_id in first for h in jobs["default"])
    assert not any(h.actor_id in first for h in jobs["shard1"])
    assert "?shard=shard1" in first  # the filter offers the other shard
    second = admin_client.get(f"{LIST}?shard=shard1").content.decode()
    assert all(h.actor_id in second for h in jobs["shard1"])
    assert not any(h.actor_id in second for h in jobs["default"])
    job = jobs["shard1"][0]
    job.send("go", {"from": "admin-test"})
    page = admin_client.get(f"{LIST}{job.actor_id}/change/")
    assert page.status_code == 200 and "admin-test" in page.content.decode()  # its queue, read on shard1


@pytest.mark.django_db
def test_the_admin_has_no_shard_filter_unsharded(unsharded, admin_client):
    assert "?shard=" not in admin_client.get(LIST).content.decode()


def test_the_router_migrates_the_app_on_every_shard_only():
    router = ShardRouter()
    with override_settings(RIVET_WORKFLOWS={**BASE, "SHARDS": SHARDS}):
        assert router.allow_migrate("shard1", "rivet_workflows", "actor") is True
        assert router.allow_migrate("default", "rivet_workflows") is True
        assert router.allow_migrate("other", "rivet_workflows") is False
        assert router.allow_migrate("shard1", "auth") is None
    with override_settings(RIVET_WORKFLOWS=BASE):
        assert router.allow_migrate("default", "rivet_workflows") is True
        assert router.allow_migrate("shard1", "rivet_workflows") is False


@pytest.mark.parametrize(
    ("shards", "buckets", "says"),
    [
        (["default", "nowhere"], 256, "missing from DATABASES"),
        (["default", "default"], 256, "twice"),
        (["default", "shard1"], 1, "below the number of shards"),
        (["default", "shard1"], 70000, "above 65536"),
    ],
)
def test_a_shard_setting_that_cannot_work_is_error_e004(shards, buckets, says):
    with override_settings(RIVET_WORKFLOWS={**BASE, "SHARDS": shards, "SHARD_BUCKETS": buckets}):
        found = [m for m in checks.check_settings() if m.id == "rivet_workflows.E004"]
    assert found and says in found[0].msg


@pytest.mark.filterwarnings("ignore:Overriding setting DATABASES")
def test_shards_of_two_engines_and_a_bad_shards_value_are_refused(settings):
    settings.DATABASES = {**settings.DATABASES, "other": {"ENGINE": "django.db.backends.dummy"}}
    found = checks.check_shards(("default", "other"), 256)
    assert [m.id for m in found] == ["rivet_workflows.E004"] and "different database engines" in found[0].msg
    with override_settings(RIVET_WORKFLOWS={**BASE, "SHARDS": "default"}):
        assert [m.id for m in checks.check_settings()] == ["rivet_workflows.E001"]
    assert checks.check_shards(None, 256) == []


@both_databases
def test_the_websocket_finds_an_actor_on_shard1(sharded, jobs):
    from django.contrib.auth.models import AnonymousUser

    from rivet_workflows.realtime import consumers

    scope = {"type": "websocket", "path": "/ws/", "headers": [], "user": AnonymousUser()}  # dev mode: open
    assert consumers.refusal(scope, jobs["shard1"][0].actor_id) is None
    assert consumers.refusal(scope, "0" * 32)[0] == consumers.CLOSE_NOT_FOUND
