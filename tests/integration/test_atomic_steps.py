"""Atomic steps (DESIGN.md section 13) on the Django stores (SQLite, and PostgreSQL with DATABASE_URL): the
body's ORM writes, the state change, its sends and the history entry commit together or not at all, a
failed attempt leaves nothing, a zombie executor's writes never land. Crashes of real worker processes are
in tests/system/test_atomic_crash.py."""

from __future__ import annotations

import asyncio
import threading
from datetime import timedelta

import pytest
from django.db import connection, connections

from project.shop.models import Order
from rivet_workflows import models
from rivet_workflows.engine.model import errors, ports
from rivet_workflows.engine.model.definitions import setup, workflow
from rivet_workflows.engine.run import run
from rivet_workflows.storage.connection import writes_only_through
from rivet_workflows.testing import drain as memory_drain
from rivet_workflows.testing import make_runtime
from tests.api.support import rivet as rivet  # noqa: F401 - the fixture
from tests.integration import atomic_workflows as aw


@pytest.fixture(autouse=True)
def _close_store_thread_connections():
    """Store calls of ``asyncio.run`` go to asgiref's one sync thread: close its connections after a test."""
    yield
    from asgiref.sync import sync_to_async

    asyncio.run(sync_to_async(connections.close_all, thread_sensitive=True)())


@pytest.fixture
def shop(rivet):
    rivet.configure(REGISTRY="tests.integration.atomic_workflows.registry", LEASE_SECONDS=30)
    aw.reset()
    yield rivet
    aw.reset()


def _orders(checkout: str) -> list[tuple[str, int]]:
    return list(Order.objects.filter(checkout=checkout).values_list("checkout", "attempt"))


def _entry(actor_id: str, key: str = "place-order") -> models.HistoryEntry:
    return models.HistoryEntry.objects.get(actor_id=actor_id, key=key)


def test_an_atomic_step_commits_its_row_with_the_state_the_history_and_its_sends(shop) -> None:
    handle = shop.client.checkout.get_or_create("ok")
    shop.drain()
    record = shop.runtime.store.get_actor(handle.actor_id)
    assert record.workflow_state == ports.COMPLETED
    order = Order.objects.get(checkout="ok")
    assert record.output == {"order": order.pk, "messages": [{"order": order.pk}]}
    assert record.state == {"status": "placed", "attempts": 1}
    entry = _entry(handle.actor_id)
    assert (entry.status, entry.attempts) == ("completed", 1)


def test_a_failed_attempt_leaves_no_row_no_state_change_and_no_message(shop) -> None:
    aw.PLAN[("flaky", 1)] = "fail"
    handle = shop.client.checkout.get_or_create("flaky")
    shop.drain()
    record = shop.runtime.store.get_actor(handle.actor_id)
    assert record.workflow_state == ports.COMPLETED
    assert aw.CALLS == [("flaky", 1), ("flaky", 2)]
    assert _orders("flaky") == [("flaky", 2)]  # the first attempt's row was rolled back
    assert record.state == {"status": "placed", "attempts": 1}  # its state change too
    assert record.output["messages"] == [{"order": Order.objects.get(checkout="flaky").pk}]  # and its send
    entry = _entry(handle.actor_id)
    assert (entry.status, entry.attempts) == ("completed", 2)


def test_an_exhausted_atomic_step_leaves_no_row(shop) -> None:
    for attempt in (1, 2, 3):
        aw.PLAN[("doomed", attempt)] = "fail"
    handle = shop.client.checkout.get_or_create("doomed")
    shop.drain()
    assert shop.runtime.store.get_actor(handle.actor_id).workflow_state == ports.FAILED
    assert _orders("doomed") == [] and len(aw.CALLS) == 3
    assert shop.runtime.store.get_actor(handle.actor_id).state == {"status": "new"}


def _run_once(runtime, actor_id: str, owner: str) -> run.RunReport:
    token, actor, entries, now = runtime.store.claim_and_load(actor_id, owner, 30)
    return asyncio.run(run.execute(runtime, actor, token, loaded=(entries, now)))


def _expire_lease(actor_id: str) -> None:
    models.Actor.objects.filter(pk=actor_id).update(
        lease_expires_at=models.Actor.objects.get(pk=actor_id).lease_expires_at - timedelta(hours=1)
    )


def test_a_zombie_whose_lease_moved_on_during_the_body_writes_no_row(shop) -> None:
    """The body runs, another executor's claim bumps the lease token before the commit: the fence check
    inside the same transaction refuses the commit and the body's row is rolled back with it."""
    aw.PLAN[("zombie", 1)] = "steal"
    runtime = shop.runtime
    handle = shop.client.checkout.get_or_create("zombie")
    report = _run_once(runtime, handle.actor_id, "zombie-executor")
    assert report.outcome is None  # evicted: the run stopped without writing anything more
    assert aw.CALLS == [("zombie", 1)]
    assert _orders("zombie") == []
    entry = _entry(handle.actor_id)
    assert (entry.status, entry.attempts) == ("running", 1)  # the attempt was recorded, not its outcome
    _expire_lease(handle.actor_id)  # the zombie's lease runs out; the next executor takes over
    shop.drain()
    assert _orders("zombie") == [("zombie", 2)]
    assert runtime.store.get_actor(handle.actor_id).workflow_state == ports.COMPLETED


def test_a_zombie_fenced_before_the_body_never_runs_it(shop) -> None:
    """The lease moved on between the attempt's record and the atomic transaction: the body never runs."""
    runtime = shop.runtime
    handle = shop.client.checkout.get_or_create("late")
    store = runtime.store
    original = store.run_in_commit

    def steal_first(actor_id, token, body):
        models.Actor.objects.filter(pk=actor_id).update(lease_token=token + 1)  # another claim, committed
        return original(actor_id, token, body)

    store.run_in_commit = steal_first  # type: ignore[method-assign]
    try:
        report = _run_once(runtime, handle.actor_id, "zombie-executor")
    finally:
        del store.run_in_commit
    assert report.outcome is None and aw.CALLS == [] and _orders("late") == []


@pytest.mark.skipif(
    connection.vendor != "postgresql", reason="a concurrent claim during the body needs row locks"
)
def test_a_real_concurrent_claim_during_the_body_fences_the_zombie_on_postgresql(shop) -> None:
    """PostgreSQL: while the zombie's body runs, another executor claims the expired lease on its own
    connection and commits; the zombie's commit is refused and its row never lands."""
    claimed = threading.Event()

    def wait_for_thief(step) -> None:
        thief = threading.Thread(target=_claim_from_another_connection, args=(step.actor_id, claimed))
        thief.start()
        thief.join(10)

    aw.PLAN[("pg-zombie", 1)] = wait_for_thief
    runtime = shop.runtime
    handle = shop.client.checkout.get_or_create("pg-zombie")
    report = _run_once(runtime, handle.actor_id, "zombie-executor")
    assert claimed.is_set()
    assert report.outcome is None and _orders("pg-zombie") == []
    assert models.Actor.objects.get(pk=handle.actor_id).lease_owner == "thief"


def _claim_from_another_connection(actor_id: str, claimed: threading.Event) -> None:
    from rivet_workflows.storage import store_for

    try:
        models.Actor.objects.filter(pk=actor_id).update(
            lease_expires_at=models.Actor.objects.get(pk=actor_id).created_at
        )
        if store_for().claim(actor_id, "thief", 30) is not None:
            claimed.set()
    finally:
        connections.close_all()


def test_atomic_refuses_async_bodies_and_timeouts_when_the_step_is_called() -> None:
    seen: list[str] = []

    async def async_body(step):
        return 1

    async def run_fn(ctx):
        for label, kwargs in (
            ("async", {"run": async_body}),
            ("timeout", {"run": lambda step: 1, "timeout": 5}),
            ("ephemeral", {"run": lambda step: 1, "ephemeral": True}),
        ):
            try:
                ctx.step(label, atomic=True, **kwargs)
            except TypeError as exc:
                seen.append(f"{label}: {exc}")
        # the default timeout and an explicit None are fine
        await ctx.step("fine", lambda step: 1, atomic=True)
        await ctx.step("fine-too", lambda step: 2, atomic=True, timeout=None)

    runtime = make_runtime(setup(use={"w": workflow(run=run_fn)}))
    handle = runtime.client().w.get_or_create("x")
    memory_drain(runtime)
    assert [s.split(":")[0] for s in seen] == ["async", "timeout", "ephemeral"]
    assert "sync body" in seen[0] and "no timeout" in seen[1]
    assert runtime.store.get_actor(handle.actor_id).workflow_state == ports.COMPLETED


def test_the_memory_store_runs_an_atomic_step_as_a_plain_step_but_still_drops_a_failed_attempts_state() -> (
    None
):
    attempts: list[int] = []

    def body(step):
        attempts.append(step.attempt)
        step.state["n"] = step.state.get("n", 0) + 1
        if step.attempt == 1:
            raise RuntimeError("again")
        return step.attempt

    async def run_fn(ctx):
        return await ctx.step("s", body, atomic=True, retry_backoff_base=0)

    runtime = make_runtime(setup(use={"w": workflow(run=run_fn, state={})}))
    handle = runtime.client().w.get_or_create("x")
    memory_drain(runtime)
    record = runtime.store.get_actor(handle.actor_id)
    assert attempts == [1, 2] and record.output == 2 and record.state == {"n": 1}


@pytest.mark.django_db(transaction=True)
def test_a_write_through_another_alias_is_refused_while_reads_pass() -> None:
    # the guard treats every alias but the named one as "another alias": here "default" is the other one
    with writes_only_through("elsewhere"):
        assert Order.objects.count() == 0  # a read passes
        with pytest.raises(errors.AtomicStepError, match="alias 'default'"):
            Order.objects.create(checkout="x", item="y")
    assert Order.objects.count() == 0
    Order.objects.create(checkout="x", item="y")  # outside the guard: as usual


def test_an_atomic_body_writing_through_another_alias_fails_the_step_and_keeps_nothing(shop) -> None:
    from rivet_workflows.storage import connection as storage_connection

    real = storage_connection.writes_only_through
    # run the body as if the store's alias were another one, so that "default" counts as the other alias
    from rivet_workflows.storage import orm

    orm.writes_only_through = lambda alias: real("elsewhere")  # type: ignore[assignment]
    try:
        handle = shop.client.checkout.get_or_create("alias")
        shop.drain()
    finally:
        orm.writes_only_through = real  # type: ignore[assignment]
    record = shop.runtime.store.get_actor(handle.actor_id)
    assert record.workflow_state == ports.FAILED
    assert record.error["name"] in ("CriticalError", "AtomicStepError", "StepExhaustedError")
    entry = _entry(handle.actor_id)
    assert entry.status == "exhausted" and entry.attempts == 1  # critical: not retried
    assert entry.error["name"] == "AtomicStepError"
    assert _orders("alias") == []


def _joined_registry():
    def make(n: int):
        def body(step):
            Order.objects.create(checkout=f"join-{step.key[0]}", item=f"item-{n}", attempt=step.attempt)
            step.state.setdefault("placed", []).append(n)
            return n

        return body

    async def branch(n: int):
        async def run_branch(b):
            return await b.step(f"place-{n}", make(n), atomic=True)

        return run_branch

    async def run_fn(ctx):
        branches = {f"b{n}": await branch(n) for n in (1, 2)}
        branches["plain"] = lambda b: b.step("plain", lambda step: "plain")
        return await ctx.join("both", branches)

    return setup(use={"joined": workflow(run=run_fn, state={})})


def test_atomic_steps_in_join_branches_each_commit_once(shop) -> None:
    from rivet_workflows.engine.runtime import executor
    from rivet_workflows.engine.runtime.runtime import Runtime

    base = shop.runtime
    runtime = Runtime(base.store, base.dispatcher, _joined_registry(), settings=base.settings)
    handle = runtime.client().joined.get_or_create("j")
    executor.drain(runtime, timeout=5)
    record = runtime.store.get_actor(handle.actor_id)
    assert record.workflow_state == ports.COMPLETED, record.error
    assert record.output == {"b1": 1, "b2": 2, "plain": "plain"}
    assert sorted(record.state["placed"]) == [1, 2]
    assert Order.objects.filter(checkout="join-j").count() == 2
