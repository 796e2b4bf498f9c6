"""``manage.py rivet check|gates|recover|prune`` on the Django store."""

from __future__ import annotations

import io
from datetime import timedelta

import pytest
from django.core.management import CommandError, call_command

from rivet_workflows import django_runtime, models
from rivet_workflows.engine.model import ports

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def deploy(settings):
    """``deploy("v2")`` switches the registry to tests.ops.registries.<version> (like a new deploy)."""

    def switch(version: str):
        settings.RIVET_WORKFLOWS = {
            "REGISTRY": f"tests.ops.registries.{version}",
            "DISPATCHER": "rivet_workflows.driver.dispatch.LocalDispatcher",
            "LIVE_WAIT_THRESHOLD": 0.0,
            "POLL_INTERVAL": 0.01,
        }
        django_runtime.reset_runtime()
        return django_runtime.get_runtime()

    yield switch
    django_runtime.reset_runtime()


def rivet(*args: str) -> str:
    out = io.StringIO()
    call_command("rivet", *args, stdout=out)
    return out.getvalue()


def test_check_catches_a_renamed_step_and_passes_after_removed(deploy) -> None:
    deploy("v1")
    handle = django_runtime.client().flow.get_or_create("order-1")
    django_runtime.drain(timeout=2)
    assert handle.workflow_state() == ports.SLEEPING
    history_before = [(e.key, e.status) for e in models.HistoryEntry.objects.order_by("id")]
    assert "ok" in rivet("check")

    deploy("v2")
    with pytest.raises(CommandError, match="1 in-flight workflow does not replay"):
        out = io.StringIO()
        try:
            call_command("rivet", "check", stdout=out)
        finally:
            report = out.getvalue()
    assert "diverged" in report and "validate" in report and handle.actor_id in report
    # nothing was written and no step ran
    assert [(e.key, e.status) for e in models.HistoryEntry.objects.order_by("id")] == history_before
    assert handle.state() == {"validated": True}

    deploy("v3")
    assert "0 problems" in rivet("check")
    handle = django_runtime.client().flow.get_for_id(handle.actor_id)
    handle.send("go", 1)
    django_runtime.drain(timeout=2)
    assert handle.workflow_state() == ports.COMPLETED
    assert handle.state() == {"validated": True, "finished": True}


def test_check_groups_runs_that_diverge_alike_with_one_hint_that_fits_them(deploy) -> None:
    deploy("v1")
    handles = [django_runtime.client().flow.get_or_create(f"order-{i}") for i in range(4)]
    django_runtime.drain(timeout=2)
    deploy("v2")  # "validate" renamed to "check": each run recorded "validate" as its last entry
    out = io.StringIO()
    with pytest.raises(CommandError, match="4 in-flight workflows do not replay"):
        call_command("rivet", "check", stdout=out)
    report = out.getvalue()
    for handle in handles:  # one compact line per run
        assert f"{handle.actor_id} [sleeping] at validate (the code reached new entry check)" in report
    assert "problems by kind (1 kind):" in report
    assert "diverged flow at validate (the code reached new entry check): 4 runs (" in report
    # the hint once, and the right one: ctx.removed fits these runs (nothing was recorded after validate)
    assert report.count("ctx.removed('validate', 'step') before it") == 1
    assert "past this change" not in report and "this run then goes on with the new code" in report

    verbose = io.StringIO()
    with pytest.raises(CommandError):
        call_command("rivet", "check", "--verbose", stdout=verbose)
    assert verbose.getvalue().count("ctx.removed('validate', 'step') before it") == 5  # each run + group

    deploy("v3")  # the hint, followed: every run replays and finishes
    assert "checked 4 in-flight workflows: 0 problems" in rivet("check")
    for handle in handles:
        handle = django_runtime.client().flow.get_for_id(handle.actor_id)
        handle.send("go", 1)
    django_runtime.drain(timeout=5)
    assert all(django_runtime.client().flow.get_for_id(h.actor_id).workflow_state() == ports.COMPLETED
               for h in handles)  # fmt: skip


def test_check_shows_keys_as_short_json_and_counts_in_words(deploy) -> None:
    deploy("v1")
    long_key = django_runtime.client().flow.get_or_create(["k" * 1000, "tail"])
    pair = django_runtime.client().flow.get_or_create([1, 2])
    slash = django_runtime.client().flow.get_or_create("1/2")
    django_runtime.drain(timeout=2)
    out = rivet("check")
    lines = out.splitlines()
    assert all(len(line) < 200 for line in lines), max(map(len, lines))  # a 1 KB key is cut short
    line = next(line for line in lines if long_key.actor_id in line)
    assert '["kkkk' in line and "…" in line and "tail" not in line
    assert any(pair.actor_id in line and "flow [1, 2] " in line for line in lines)
    assert any(slash.actor_id in line and 'flow ["1/2"] ' in line for line in lines)  # not "1/2" twice
    assert "checked 3 in-flight workflows: 0 problems" in out


def test_check_include_failed_replays_failed_workflows_as_recover_would_restart_them(deploy) -> None:
    deploy("v1")
    handle = django_runtime.client().flow.get_or_create("order-1")
    django_runtime.drain(timeout=2)
    models.Actor.objects.filter(pk=handle.actor_id).update(
        workflow_state=ports.FAILED, wake_at=None, error={"name": "X", "message": "boom"}
    )
    history_before = [(e.key, e.status) for e in models.HistoryEntry.objects.order_by("id")]

    deploy("v2")  # "validate" renamed to "check": recover would restart this run on code it does not fit
    assert "checked 0 in-flight workflows: 0 problems" in rivet("check")  # failed runs are not in flight
    out = io.StringIO()
    with pytest.raises(CommandError, match="1 in-flight or failed workflow does not replay"):
        call_command("rivet", "check", "--include-failed", stdout=out)
    report = out.getvalue()
    assert f'diverged flow ["order-1"] {handle.actor_id} [failed] at validate' in report
    assert "the code reached new entry check" in report
    assert "ctx.removed('validate', 'step')" in report and "ctx.get_version" in report
    assert [(e.key, e.status) for e in models.HistoryEntry.objects.order_by("id")] == history_before
    assert handle.workflow_state() == ports.FAILED

    deploy("v3")
    assert "checked 1 in-flight or failed workflow: 0 problems" in rivet("check", "--include-failed")


def test_gates_counts_in_flight_instances_per_version(deploy) -> None:
    deploy("v1")
    for key in ("a", "b", "c"):
        django_runtime.client().gated.get_or_create(key)
    django_runtime.drain(timeout=2)
    done = django_runtime.client().gated.get("c")
    done.send("go", 1)
    django_runtime.drain(timeout=2)
    assert done.workflow_state() == ports.COMPLETED
    out = rivet("gates")
    assert "gated: 2 in flight" in out
    assert "shipping (version_check): version 2, 2 in flight" in out


def test_recover_wakes_expired_leases_and_restarts_failed_workflows(deploy) -> None:
    runtime = deploy("v1")
    handle = django_runtime.client().flow.get_or_create("x")
    django_runtime.drain(timeout=2)
    past = runtime.store.now() - timedelta(seconds=5)
    models.Actor.objects.filter(pk=handle.actor_id).update(
        lease_owner="dead-worker", lease_expires_at=past, wake_at=None
    )
    failed = django_runtime.client().flow.get_or_create("y")
    models.Actor.objects.filter(pk=failed.actor_id).update(
        workflow_state=ports.FAILED, wake_at=None, error={"name": "X", "message": "boom"}
    )
    out = rivet("recover", "--all", "--dry-run")
    assert f"expired leases to wake: 1 {handle.actor_id}" in out
    assert f"failed workflows to recover: 1 {failed.actor_id}" in out
    assert models.Actor.objects.get(pk=handle.actor_id).wake_at is None  # a dry run changes nothing
    # without --all/--name/--actor: expired leases are reclaimed, failed workflows only listed
    out = rivet("recover")
    assert f"expired leases woken: 1 {handle.actor_id}" in out
    assert f"failed workflows not restarted: 1 {failed.actor_id}" in out and "--all" in out
    assert models.Actor.objects.get(pk=handle.actor_id).wake_at is not None
    assert failed.workflow_state() == ports.FAILED
    with pytest.raises(CommandError, match="--all, --name or --actor"):
        rivet("recover", "--failed-only")
    out = rivet("recover", "--all")
    assert f"failed workflows recovered: 1 {failed.actor_id}" in out
    assert failed.workflow_state() != ports.FAILED


def test_recover_restarts_only_the_chosen_failed_workflows(deploy) -> None:
    deploy("v1")
    flows = [django_runtime.client().flow.get_or_create(key) for key in ("a", "b")]
    for handle in flows:
        models.Actor.objects.filter(pk=handle.actor_id).update(
            workflow_state=ports.FAILED, wake_at=None, error={"name": "X", "message": "boom"}
        )
    out = rivet("recover", "--actor", flows[0].actor_id)
    assert f"failed workflows recovered: 1 {flows[0].actor_id}" in out
    assert flows[0].workflow_state() != ports.FAILED
    assert flows[1].workflow_state() == ports.FAILED
    out = rivet("recover", "--name", "flow", "--failed-only")
    assert f"failed workflows recovered: 1 {flows[1].actor_id}" in out
    assert flows[1].workflow_state() != ports.FAILED


def test_prune_deletes_only_old_finished_actors(deploy) -> None:
    runtime = deploy("v1")
    old = django_runtime.client().flow.get_or_create("old")
    young = django_runtime.client().flow.get_or_create("young")
    running = django_runtime.client().flow.get_or_create("running")
    long_ago = runtime.store.now() - timedelta(days=40)
    models.Actor.objects.filter(pk=old.actor_id).update(workflow_state=ports.COMPLETED, updated_at=long_ago)
    models.Actor.objects.filter(pk=young.actor_id).update(workflow_state=ports.COMPLETED)
    models.Actor.objects.filter(pk=running.actor_id).update(updated_at=long_ago)
    assert "would delete 1" in rivet("prune", "--older-than", "30", "--dry-run")
    assert "deleted 1" in rivet("prune", "--older-than", "30")
    assert set(models.Actor.objects.values_list("pk", flat=True)) == {young.actor_id, running.actor_id}
    with pytest.raises(CommandError):
        rivet("prune", "--older-than", "-1")


def test_prune_drops_one_off_schedules_that_fired_long_ago(deploy) -> None:
    from rivet_workflows.engine.actor import firing

    runtime = deploy("v1")
    handle = django_runtime.client().flow.get_or_create("sched")
    c = _context(runtime, handle)
    c.schedule.after(0, "get_state")
    c.schedule.after(3600, "get_state")
    assert firing.fire_due(runtime) == 1
    models.CronEntry.objects.filter(next_fire_at__isnull=True).update(
        last_fired_at=runtime.store.now() - timedelta(days=40)
    )
    rivet("prune", "--older-than", "30")
    assert models.CronEntry.objects.count() == 1  # the pending one stays
    assert models.CronEntry.objects.get().next_fire_at is not None


def _context(runtime, handle):
    from rivet_workflows.engine.actor.actor_context import ActorContext

    return ActorContext(runtime, runtime.registry.get("flow"), handle.actor_id, handle.key)


def test_every_command_refuses_a_rolled_back_run_and_names_the_step_to_replay_from(deploy) -> None:
    from rivet_workflows.engine.operate import repairs

    runtime = deploy("v1")
    handle = django_runtime.client().saga.get_or_create("s1")
    django_runtime.drain(timeout=2)
    assert handle.workflow_state() == ports.FAILED  # charge failed, reserve's rollback handler ran
    history_before = [(e.key, e.status) for e in models.HistoryEntry.objects.order_by("id")]

    listed = rivet("recover", "--dry-run")
    assert f"  {handle.actor_id} refused: rolled back" in listed and "replay from 'reserve'" in listed
    dry = rivet("recover", "--actor", handle.actor_id, "--dry-run")
    assert "failed workflows to recover: 0" in dry
    assert f"  {handle.actor_id} refused: rolled back" in dry and "replay from 'reserve'" in dry
    with pytest.raises(CommandError) as refused:
        rivet("recover", "--actor", handle.actor_id)
    assert "1 failed workflow was not recovered" in str(refused.value)
    assert "refused: rolled back" in str(refused.value) and "replay from 'reserve'" in str(refused.value)
    out = io.StringIO()
    call_command("rivet", "check", "--include-failed", stdout=out)  # listed; the deploy gate still passes
    assert f'refused  saga ["s1"] {handle.actor_id} [failed]' in out.getvalue()
    assert "checked 1 in-flight or failed workflow: 0 problems" in out.getvalue()
    assert "1 run is listed above that this deploy does not break" in out.getvalue()
    assert "(replay from 'reserve' instead)" in out.getvalue()

    # nothing was changed, and the replay the commands name is allowed
    assert [(e.key, e.status) for e in models.HistoryEntry.objects.order_by("id")] == history_before
    assert handle.workflow_state() == ports.FAILED
    repairs.replay(runtime, handle.actor_id, "reserve")
    assert handle.workflow_state() == ports.SLEEPING


def test_an_actor_without_a_workflow_is_never_counted_in_flight(deploy) -> None:
    runtime = deploy("v1")
    ticker = django_runtime.client().ticker.get_or_create("t1")  # cron only: no run function
    gated = django_runtime.client().gated.get_or_create("g1")
    django_runtime.drain(timeout=2)
    assert models.Actor.objects.get(pk=ticker.actor_id).workflow_state == ports.PENDING  # as stored
    gates = rivet("gates")
    assert "gated: 1 in flight" in gates and "ticker" not in gates
    assert "checked 1 in-flight workflow: 0 problems" in rivet("check")
    past = runtime.store.now() - timedelta(seconds=5)
    models.Actor.objects.filter(pk__in=[ticker.actor_id, gated.actor_id]).update(
        lease_owner="dead-worker", lease_expires_at=past
    )
    out = rivet("recover", "--dry-run")
    assert f"expired leases to wake: 1 {gated.actor_id}" in out and ticker.actor_id not in out
