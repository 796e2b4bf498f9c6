"""Leases on the Django store: a claim race of 8 threads over 100 runnable actors, a zombie
executor's write after lease loss, the sweep's hand-over taken once even when the task is delivered twice,
and a step longer than the lease kept alive by the heartbeat with two real workers competing."""

from __future__ import annotations

import threading

import pytest

from rivet_workflows.engine.model import ports
from rivet_workflows.engine.model.definitions import setup, workflow
from rivet_workflows.engine.runtime import executor

from ..conftest import run_in_threads

pytestmark = pytest.mark.django_db(transaction=True)


def _runnable(store, n: int, prefix: str = "") -> list[str]:
    ids = []
    for i in range(n):
        record, _ = store.get_or_create_actor("job", [f"{prefix}{i}"], None, lambda: {})
        token = store.claim(record.actor_id, "client", 30)
        assert store.commit(record.actor_id, token, ports.Commit(wake_at=store.now(), release=True)).ok
        ids.append(record.actor_id)
    return ids


def test_claim_race_of_8_threads_over_100_runnable_actors(django_store) -> None:
    ids = _runnable(django_store, 100)

    def sweeper(i: int) -> list[tuple[str, int]]:
        mine = []
        while True:
            batch = django_store.claim_due(f"sweeper-{i}", 7, 30)
            if not batch:
                return mine
            mine.extend(batch)

    per_thread = run_in_threads(sweeper, 8)
    claimed = [actor_id for batch in per_thread for actor_id, _ in batch]
    assert sorted(claimed) == sorted(ids)  # every actor claimed, none twice
    # and a direct claim race on one actor has exactly one winner
    winner = _runnable(django_store, 1, "single-")[0]
    tokens = run_in_threads(lambda i: django_store.claim(winner, f"w{i}", 30), 8)
    assert sum(t is not None for t in tokens) == 1


def test_a_duplicate_hand_over_is_refused(django_store) -> None:
    (actor_id,) = _runnable(django_store, 1)
    ((_, token),) = django_store.claim_due("sweep", 10, 30)
    results = run_in_threads(lambda i: django_store.handoff(actor_id, token, f"task-{i}", 30), 4)
    assert [r for r in results if r is not None] == [token + 1]


def test_a_zombie_executor_write_after_lease_loss_is_rejected(make_django_runtime, django_store) -> None:
    """The executor's step body runs while its lease expires and another worker claims the actor: the
    zombie's heartbeat/commit is fenced off, nothing it does after the loss is written, and it stops."""
    entered, resume = threading.Event(), threading.Event()

    def slow(step):
        entered.set()
        assert resume.wait(30)
        step.state["zombie"] = True
        return "late"

    async def run(ctx):
        await ctx.step("slow", slow)
        await ctx.step("after", lambda step: "never")

    runtime = make_django_runtime(setup(use={"wf": workflow(run=run, state={})}), lease_seconds=30)
    handle = runtime.client().wf.create("z")
    summary: dict = {}
    zombie = threading.Thread(target=lambda: summary.update(r=executor.run_actor(runtime, handle.actor_id)))
    zombie.start()
    assert entered.wait(30)
    # the lease runs out (as if the zombie had been paused) and another worker takes over
    from datetime import timedelta

    from rivet_workflows import models

    new_token = None
    for _ in range(5):  # (a heartbeat may renew between the two statements: then expire it again)
        past = django_store.now() - timedelta(seconds=1)
        models.Actor.objects.filter(pk=handle.actor_id).update(lease_expires_at=past)
        new_token = django_store.claim(handle.actor_id, "other-worker", 30)
        if new_token is not None:
            break
    assert new_token is not None
    resume.set()
    zombie.join(60)
    assert summary["r"].workflow_state is None  # it stopped without finishing the run
    entries = {e.key: e for e in django_store.load_history(handle.actor_id)}
    assert set(entries) == {"slow"} and entries["slow"].status == ports.ENTRY_RUNNING
    assert "output" not in entries["slow"].data
    record = django_store.get_actor(handle.actor_id)
    assert record.state == {} and record.lease_owner == "other-worker" and record.lease_token == new_token


@pytest.mark.system
def test_a_step_longer_than_the_lease_survives_thanks_to_the_heartbeat(cluster, rt) -> None:
    handle = rt.client().steps.create("long", input={"sleep": 3 * cluster.lease})
    cluster.start_worker()
    cluster.start_worker()  # a second worker's sweeps would take a lapsed lease over
    cluster.wait_for(
        lambda: rt.store.get_actor(handle.actor_id).workflow_state == ports.COMPLETED, 90, what="completion"
    )
    c = cluster.counts()
    assert (c[(handle.actor_id, "start-one")], c[(handle.actor_id, "done-one")]) == (1, 1)
    from .conftest import history

    assert history(handle.actor_id)["one"][:2] == ("completed", 1)


def test_a_store_outage_mid_run_stops_the_run_without_failing_the_workflow(
    make_django_runtime, django_store
) -> None:
    """A database error inside a run (not a workflow error) must not mark the workflow failed: the run
    stops with StoreUnavailableError and the actor resumes after its lease expires."""
    from rivet_workflows.engine.model.errors import StoreUnavailableError

    calls = {"n": 0}

    async def run(ctx):
        await ctx.step("a", lambda step: "a")
        await ctx.step("b", lambda step: "b")
        return "done"

    runtime = make_django_runtime(setup(use={"wf": workflow(run=run, state={})}), lease_seconds=1)
    handle = runtime.client().wf.create("outage")
    real_commit = django_store.commit

    def flaky_commit(actor_id, token, commit):
        calls["n"] += 1
        if calls["n"] == 2:
            from django.db import OperationalError

            raise OperationalError("server closed the connection unexpectedly")
        return real_commit(actor_id, token, commit)

    django_store.commit = flaky_commit
    with pytest.raises(StoreUnavailableError):
        executor.run_actor(runtime, handle.actor_id)
    assert django_store.get_actor(handle.actor_id).workflow_state != ports.FAILED
    del django_store.commit  # the connection is back
    summary = executor.drain(runtime, timeout=10)
    assert handle.workflow_state() == ports.COMPLETED, summary
    assert django_store.get_actor(handle.actor_id).output == "done"
