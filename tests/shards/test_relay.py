"""The cross-shard outbox and its relay (DESIGN.md section 21, second bullet).

Two shards are two stores: two ``MemoryStore``s, or two Django stores on the test database (SQLite, or
PostgreSQL under ``DATABASE_URL``; one database holds both "shards", which the relay cannot tell apart:
it reaches each through its own store). A step's message to another shard is a relay row committed with
the step on the sender's shard; ``relay_once`` delivers it exactly once, in order per (sender, target),
through a crash between the two commits and a target shard that is down.
"""

from __future__ import annotations

import dataclasses
import logging
from datetime import timedelta
from typing import Any

import pytest

from rivet_workflows.engine.model import errors, ports
from rivet_workflows.engine.runtime.relay import relay_dedup_id, relay_once
from rivet_workflows.testing import MemoryStore
from tests.conftest import is_postgres, run_in_threads

_DB = pytest.mark.django_db(transaction=True)
KINDS = [
    "memory",
    pytest.param("django", marks=_DB),
    *([pytest.param("postgres", marks=_DB)] if is_postgres() else []),
]


class Shards:
    """Two shards ``a`` (the senders) and ``b`` (the targets), each its own store, and the alias map."""

    def __init__(self, kind: str) -> None:
        self.kind = kind
        if kind == "memory":
            self.a: Any = MemoryStore(poll_interval=0.005)
            self.b: Any = MemoryStore(poll_interval=0.005)
        else:
            from rivet_workflows.storage import DjangoStore, PostgresStore

            cls = PostgresStore if kind == "postgres" else DjangoStore
            self.a, self.b = cls(poll_interval=0.005), cls(poll_interval=0.005)
        self.home: dict[str, Any] = {}  # actor id -> its shard's store

    def store_for_actor(self, actor_id: str) -> Any:
        return self.home[actor_id]

    def actor(self, shard: str, key: str, name: str = "order") -> str:
        store = getattr(self, shard)
        record, created = store.create_actor(name, [key], None, {"n": 0})
        assert created
        self.home[record.actor_id] = store
        return record.actor_id

    def sleep_on(self, actor_id: str, queues: list[str]) -> None:
        """Leave ``actor_id`` released, sleeping for an hour, waiting on ``queues``."""
        store = self.home[actor_id]
        token = store.claim(actor_id, "me", 30)
        assert token is not None
        commit = ports.Commit(
            workflow_state=ports.SLEEPING,
            wake_at=store.now() + timedelta(hours=1),
            waiting_for=queues,
            release=True,
        )
        assert store.commit(actor_id, token, commit).ok

    def send_from(self, sender: str, *messages: tuple[str, Any]) -> ports.CommitResult:
        """One commit of ``sender`` (on ``a``) relaying ``messages``: (target id, body) on queue ``q``."""
        token = self.a.claim(sender, "me", 30)
        assert token is not None
        result = self.a.commit(
            sender, token, ports.Commit(relay=[(t, "q", body, False) for t, body in messages], release=True)
        )
        assert result.ok
        return result

    def relay(self, source: Any = None, **options: Any) -> Any:
        return relay_once({"a": source or self.a}, self.store_for_actor, **options)

    def bodies(self, actor_id: str) -> list[Any]:
        return [m.body for m in self.home[actor_id].pending_messages(actor_id, None, 1000)]

    def rows(self) -> list[tuple[int, bool, bool, int, str | None]]:
        """Every relay row of ``a``: (id, delivered, failed, attempts, last_error)."""
        if self.kind == "memory":
            return [
                (r.record.id, r.delivered_at is not None, r.failed, r.record.attempts, r.record.last_error)
                for r in self.a.relay_rows()
            ]
        from rivet_workflows import models

        return [
            (r.id, r.delivered_at is not None, r.failed, r.attempts, r.last_error)
            for r in models.RelayMessage.objects.order_by("id")
        ]


@pytest.fixture(params=KINDS)
def shards(request: pytest.FixtureRequest) -> Shards:
    return Shards(request.param)


class OperationalError(Exception):
    """What a driver raises when its database cannot be reached (any error that is not a refusal)."""


class Down:
    """A target store whose ``send_and_check`` to the actors in ``down`` fails as an unreachable database."""

    def __init__(self, store: Any, down: set[str]) -> None:
        self._store, self.down = store, down

    def __getattr__(self, name: str) -> Any:
        return getattr(self._store, name)

    def send_and_check(self, actor_id: str, *args: Any, **kwargs: Any) -> Any:
        if actor_id in self.down:
            raise OperationalError("connection refused")
        return self._store.send_and_check(actor_id, *args, **kwargs)


class CrashAfterSend:
    """A source store whose first ``relay_mark_delivered`` fails (the relay died after the target's commit)."""

    def __init__(self, store: Any) -> None:
        self._store, self.crashes = store, 1

    def __getattr__(self, name: str) -> Any:
        return getattr(self._store, name)

    def relay_mark_delivered(self, ids: list[int]) -> None:
        if self.crashes:
            self.crashes -= 1
            raise OperationalError("server closed the connection unexpectedly")
        self._store.relay_mark_delivered(ids)


def test_a_commit_writes_its_relay_rows_and_says_so(shards):
    sender, target = shards.actor("a", "s"), shards.actor("b", "t")
    result = shards.send_from(sender, (target, {"n": 1}), (target, {"n": 2}))
    assert result.relayed
    pending = shards.a.relay_pending(10)
    assert [(r.source_actor_id, r.target_actor_id, r.name, r.body) for r in pending] == [
        (sender, target, "q", {"n": 1}),
        (sender, target, "q", {"n": 2}),
    ]
    assert pending[0].id < pending[1].id and pending[0].attempts == 0
    assert shards.bodies(target) == []  # nothing reaches the other shard before the relay
    if shards.kind == "memory":  # the Django "shards" share the test database
        assert shards.b.relay_pending(10) == []  # the row is on the sender's shard


def test_a_commit_without_relay_rows_reports_none(shards):
    sender = shards.actor("a", "s")
    token = shards.a.claim(sender, "me", 30)
    assert not shards.a.commit(sender, token, ports.Commit(state={"n": 1})).relayed


def test_a_fenced_or_failed_commit_writes_no_relay_row(shards):
    sender, target = shards.actor("a", "s"), shards.actor("b", "t")
    token = shards.a.claim(sender, "me", 30)
    fenced = shards.a.commit(sender, token + 1, ports.Commit(relay=[(target, "q", 1, False)]))
    assert not fenced.ok and not fenced.relayed
    # the state is written before the relay rows; a body that cannot be stored undoes all of it
    bad = ports.Commit(state={"n": 99}, relay=[(target, "q", 1, False), (target, "q", object(), False)])
    with pytest.raises(errors.SerializationError):
        shards.a.commit(sender, token, bad)
    assert shards.a.relay_pending(10) == [] and shards.rows() == []
    assert shards.a.get_actor(sender).state == {"n": 0}


def test_relay_once_delivers_each_row_once_in_order(shards):
    sender, target = shards.actor("a", "s"), shards.actor("b", "t")
    shards.send_from(sender, (target, 1), (target, 2))
    shards.send_from(sender, (target, 3))
    report = shards.relay()
    assert (report.delivered, report.failed, report.deferred) == (3, 0, 0)
    assert shards.bodies(target) == [1, 2, 3]
    assert shards.a.relay_pending(10) == []
    assert shards.relay().delivered == 0  # nothing pending: nothing sent again
    assert shards.bodies(target) == [1, 2, 3]
    message = shards.b.pending_messages(target, None, 10)[0]
    assert message.dedup_id == relay_dedup_id("a", shards.rows()[0][0])


def test_pages_are_read_until_a_short_one(shards):
    sender, target = shards.actor("a", "s"), shards.actor("b", "t")
    shards.send_from(sender, *[(target, i) for i in range(7)])
    assert shards.relay(limit=3).delivered == 7
    assert shards.bodies(target) == list(range(7))
    with pytest.raises(ValueError):
        shards.relay(limit=0)


def test_a_crash_between_the_target_commit_and_the_mark_delivers_once(shards):
    sender, target = shards.actor("a", "s"), shards.actor("b", "t")
    shards.send_from(sender, (target, 1), (target, 2), (target, 3))
    crashing = CrashAfterSend(shards.a)
    report = shards.relay(crashing)
    assert report.unreachable == ["a"] and report.delivered == 0
    assert shards.bodies(target) == [1, 2, 3]  # the target committed them
    assert len(shards.a.relay_pending(10)) == 3  # but they were never marked
    again = shards.relay(crashing)
    assert again.delivered == 3 and again.unreachable == []
    assert shards.bodies(target) == [1, 2, 3]  # sent again with the same ids: stored once
    assert shards.a.relay_pending(10) == []


def test_a_target_that_cannot_be_reached_delays_its_rows_in_order(shards):
    sender = shards.actor("a", "s")
    x, y = shards.actor("b", "x"), shards.actor("b", "y")
    shards.send_from(sender, (x, "x1"), (y, "y1"), (x, "x2"), (y, "y2"))
    down = Down(shards.b, {x})
    for actor_id in (x, y):
        shards.home[actor_id] = down
    report = shards.relay()
    assert (report.delivered, report.failed, report.deferred) == (2, 0, 2)
    assert shards.bodies(y) == ["y1", "y2"] and shards.bodies(x) == []
    x1 = next(row for row in shards.rows() if not row[1] and row[3])
    assert x1[3] == 1 and "connection refused" in x1[4] and not x1[2]  # counted, not failed
    assert shards.relay().deferred == 2  # still down: still waiting, nothing lost
    down.down.clear()
    report = shards.relay()
    assert (report.delivered, report.deferred) == (2, 0)
    assert shards.bodies(x) == ["x1", "x2"] and shards.bodies(y) == ["y1", "y2"]
    assert shards.a.relay_pending(10) == []


def test_a_target_that_is_down_holds_no_other_target_back(shards):
    sender = shards.actor("a", "s")
    x, y = shards.actor("b", "x"), shards.actor("b", "y")
    shards.send_from(sender, *[(x, f"x{i}") for i in range(5)], (y, "y0"))
    shards.home[x] = Down(shards.b, {x})
    report = shards.relay(limit=2)  # the first pages hold only rows for the target that is down
    assert (report.delivered, report.deferred) == (1, 5)
    assert shards.bodies(y) == ["y0"]
    shards.home[x] = shards.b
    assert shards.relay(limit=2).delivered == 5
    assert shards.bodies(x) == [f"x{i}" for i in range(5)]


def test_a_closed_or_gone_target_fails_the_row_for_good(shards, caplog):
    sender = shards.actor("a", "s")
    done, gone, alive = shards.actor("b", "done"), shards.actor("b", "gone"), shards.actor("b", "alive")
    token = shards.b.claim(done, "me", 30)
    assert shards.b.commit(done, token, ports.Commit(workflow_state=ports.COMPLETED, release=True)).ok
    shards.b.destroy_actor(gone)
    shards.send_from(sender, (done, 1), (gone, 2), (alive, 3))
    with caplog.at_level(logging.ERROR, logger="rivet_workflows"):
        report = shards.relay()
    assert (report.delivered, report.failed, report.deferred) == (1, 2, 0)
    assert shards.bodies(alive) == [3]
    failed = [row for row in shards.rows() if row[2]]
    assert len(failed) == 2 and all(row[3] == 1 for row in failed)
    assert "WorkflowFinishedError" in failed[0][4] and "ActorNotFoundError" in failed[1][4]
    assert "refused for good" in caplog.text
    assert shards.a.relay_pending(10) == [] and shards.relay().failed == 0  # never tried again


def test_a_delivery_wakes_a_target_waiting_on_the_queue(shards):
    sender, waiting, other = shards.actor("a", "s"), shards.actor("b", "w"), shards.actor("b", "o")
    shards.sleep_on(waiting, ["q"])
    shards.sleep_on(other, ["elsewhere"])
    shards.send_from(sender, (waiting, 1), (waiting, 2), (other, 3))
    woken: list[str] = []
    report = shards.relay(wake=woken.append)
    assert woken == [waiting] == report.woken  # once, and not the actor waiting on another queue
    assert shards.b.get_actor(waiting).wake_at <= shards.b.now()


def test_racing_relays_deliver_a_hundred_messages_once_each(shards):
    senders = [shards.actor("a", f"s{i}") for i in range(4)]
    targets = [shards.actor("b", f"t{i}") for i in range(2)]
    for n in range(25):
        for i, sender in enumerate(senders):
            shards.send_from(sender, (targets[(n + i) % 2], (i, n)))
    assert len(shards.a.relay_pending(1000)) == 100

    reports = run_in_threads(lambda _i: shards.relay(limit=10), 4)
    assert all(report.unreachable == [] for report in reports)
    received = [tuple(body) for target in targets for body in shards.bodies(target)]
    assert sorted(received) == sorted((i, n) for i in range(4) for n in range(25))  # each once
    for target in targets:  # in order per (sender, target)
        for i in range(4):
            mine = [n for s, n in shards.bodies(target) if s == i]
            assert mine == sorted(mine)
    assert shards.a.relay_pending(1000) == []


# --- the engine: a step's send to another shard commits with the step --------------------------------------


class TwoShardMemory(MemoryStore):
    """One ``MemoryStore`` playing two shards: the actors in ``far`` are on the other one. Its commit moves
    outbox entries for the other shard to ``Commit.relay``, as the sharded store does (``split_outbox``)."""

    def __init__(self) -> None:
        super().__init__(poll_interval=0.005)
        self.far: set[str] = set()
        self.direct_sends: list[str] = []  # target ids of sends not made by the relay
        self.relayed: list[str] = []  # dedup ids of the relay's sends

    def same_shard(self, a_id: str, b_id: str) -> bool:
        return (a_id in self.far) == (b_id in self.far)

    def commit(self, actor_id: str, token: int, commit: ports.Commit) -> ports.CommitResult:
        local = [e for e in commit.outbox if self.same_shard(actor_id, e[0])]
        remote = [e for e in commit.outbox if not self.same_shard(actor_id, e[0])]
        split = dataclasses.replace(commit, outbox=local, relay=[*commit.relay, *remote])
        return super().commit(actor_id, token, split)

    def send_and_check(self, actor_id: str, *args: Any, **kwargs: Any) -> Any:
        dedup_id = kwargs.get("dedup_id") or ""
        (self.relayed if dedup_id.startswith("relay:") else self.direct_sends).append(dedup_id or actor_id)
        return super().send_and_check(actor_id, *args, **kwargs)


ATTEMPTS: list[int] = []


async def _inbox(ctx):
    messages = []
    while len(messages) < 3:
        messages.append((await ctx.queue.next(f"m{len(messages)}", names=["q"])).body)
    return messages


def _send_two(step):
    handle = step.client().inbox.get(["far"])
    handle.send("q", {"n": 1})
    handle.send("q", {"n": 2})


def _send_then_fail_once(step):
    ATTEMPTS.append(step.attempt)
    step.client().inbox.get(["far"]).send("q", {"n": 3, "attempt": step.attempt})
    if step.attempt == 1:
        raise RuntimeError("the step fails after its send")


async def _sender(ctx):
    await ctx.step("send", _send_two)
    # an atomic step: its sends ride on its own commit (``step.outbox``), a failed attempt's with it
    await ctx.step("more", _send_then_fail_once, atomic=True, max_retries=2, retry_backoff_base=0)
    await ctx.step("local", lambda step: step.client().inbox.get(["near"]).send("q", {"n": 0}))


@pytest.fixture
def engine():
    import rivet_workflows as rw
    from rivet_workflows.testing import make_runtime

    ATTEMPTS.clear()
    store = TwoShardMemory()
    runtime = make_runtime(
        rw.setup(use={"inbox": rw.workflow(run=_inbox, queues=["q"]), "sender": rw.workflow(run=_sender)}),
        store=store,
    )
    far = runtime.client().inbox.get_or_create("far")
    store.far.add(far.actor_id)
    near = runtime.client().inbox.get_or_create("near")
    return runtime, store, far, near


def test_a_step_send_to_another_shard_commits_with_the_step_and_the_relay_delivers_it(engine):
    from rivet_workflows.testing import drain

    runtime, store, far, near = engine
    relays: list[int] = []
    runtime.on_relay = lambda: relays.append(1)
    sender = runtime.client().sender.get_or_create("s")
    drain(runtime, timeout=2)
    assert ATTEMPTS == [1, 2]
    assert sender.workflow_state() == "completed"
    assert far.actor_id not in store.direct_sends  # never a direct send to the other shard
    assert store.direct_sends.count(near.actor_id) == 1  # same shard: sent at once, as before
    assert relays == [1, 1]  # the two commits that wrote relay rows asked for the relay
    assert len(store.relayed) == len(set(store.relayed)) == 3  # each row sent once
    delivered = [r.record.body for r in store.relay_rows() if r.delivered_at is not None]
    # drain relayed them; the failed attempt's send was rolled back with it
    assert delivered == [{"n": 1}, {"n": 2}, {"n": 3, "attempt": 2}]
    assert far.workflow_state() == "completed"  # woken by the relay, it received them in order
    assert far.record().output == delivered


def test_a_waiting_or_deduplicated_send_from_a_step_stays_direct(engine):
    from rivet_workflows.testing import drain

    runtime, store, far, _near = engine

    async def _dedup(ctx):
        await ctx.step("d", lambda step: step.client().inbox.get(["far"]).send("q", 1, dedup_id="once"))

    runtime = _with_type(runtime, "dedup", _dedup)
    runtime.client().dedup.get_or_create("d")
    drain(runtime, timeout=2)
    assert store.direct_sends == ["once"] and store.relay_rows() == []


def test_an_async_step_body_asend_to_another_shard_commits_with_the_step(engine):
    from rivet_workflows.testing import drain

    runtime, store, far, _near = engine

    async def _body(step):
        handle = await step.client().inbox.aget(["far"])
        for n in range(3):
            await handle.asend("q", n)

    async def _async_sender(ctx):
        await ctx.step("s", _body)

    runtime = _with_type(runtime, "asender", _async_sender)
    runtime.client().asender.get_or_create("a")
    drain(runtime, timeout=2)
    assert store.direct_sends == [] and len(store.relayed) == 3
    assert far.workflow_state() == "completed" and far.record().output == [0, 1, 2]


def _with_type(runtime: Any, name: str, run: Any) -> Any:
    import rivet_workflows as rw
    from rivet_workflows.testing import make_runtime

    store = runtime.store
    types = {"inbox": rw.workflow(run=_inbox, queues=["q"]), name: rw.workflow(run=run)}
    return make_runtime(rw.setup(use=types), store=store)


# --- who drives it: the Celery task, the runtime's hook, the sweep ------------------------------------------


def _relay_row(store: Any, body: Any) -> str:
    """A relay row from a fresh sender to a fresh target (an actor type no worker runs); the target's id."""
    sender, _ = store.create_actor("order", [f"s{body}"], None, {})
    target, _ = store.create_actor("order", [f"t{body}"], None, {})
    token = store.claim(sender.actor_id, "me", 30)
    commit = ports.Commit(relay=[(target.actor_id, "q", body, False)], release=True)
    assert store.commit(sender.actor_id, token, commit).relayed
    return target.actor_id


@_DB
def test_the_relay_task_the_runtime_hook_and_the_sweep_deliver_pending_rows(celery_runtime):
    from rivet_workflows.driver import tasks

    store = celery_runtime.store
    assert store.relay_sources() == {"default": store}
    first = _relay_row(store, 1)
    assert tasks.relay() == 1 and tasks.relay() == 0
    assert [m.body for m in store.pending_messages(first, None, 10)] == [1]

    second = _relay_row(store, 2)
    celery_runtime.relay_soon()  # what a run's commit that wrote relay rows calls: queues the task
    assert [m.body for m in store.pending_messages(second, None, 10)] == [2]

    # a lost task: a sharded sweep relays what is left; one database's sweep reads no relay row (its
    # commits write none: this row is made by hand) and the task still delivers it
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    third = _relay_row(store, 3)
    with CaptureQueriesContext(connection) as queries:
        tasks.sweep()
    assert not any("relaymessage" in str(q["sql"]).lower() for q in queries.captured_queries)
    assert store.pending_messages(third, None, 10) == []
    assert tasks.relay() == 1
    assert [m.body for m in store.pending_messages(third, None, 10)] == [3]
    assert store.relay_pending(10) == []


@_DB
def test_a_sharded_sweep_relays_what_a_lost_task_left(celery_runtime, monkeypatch):
    from rivet_workflows.driver import tasks

    store = celery_runtime.store
    monkeypatch.setattr(store, "relay_sources", lambda: {"default": store, "other": store}, raising=False)
    target = _relay_row(store, 4)
    tasks.sweep()
    assert [m.body for m in store.pending_messages(target, None, 10)] == [4]
    assert store.relay_pending(10) == []


@_DB
def test_one_database_runs_touch_no_relay_row(make_django_runtime):
    """Unsharded, a run whose steps send to other actors reads and writes no relay row (no extra query)."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    import rivet_workflows as rw
    from rivet_workflows import models
    from rivet_workflows.engine.runtime import executor

    async def _send(ctx):
        await ctx.step("s", lambda step: step.client().inbox.get(["near"]).send("q", 1))

    runtime = make_django_runtime(
        rw.setup(use={"inbox": rw.workflow(run=_inbox, queues=["q"]), "sender": rw.workflow(run=_send)})
    )
    near = runtime.client().inbox.get_or_create("near")
    runtime.client().sender.get_or_create("s")
    with CaptureQueriesContext(connection) as queries:
        executor.drain(runtime, timeout=2)
    assert list(
        models.QueueMessage.objects.filter(actor_id=near.actor_id).values_list("body", flat=True)
    ) == [1]
    assert not any("relaymessage" in str(q["sql"]).lower() for q in queries.captured_queries)
    assert runtime.relay_wanted is False


@_DB
def test_the_celery_dispatcher_queues_the_relay_from_a_runs_event_loop(monkeypatch):
    """A run's session calls ``relay_soon`` on its event loop after the commit: the task is queued at once
    (Django refuses ``transaction.on_commit`` there; every delivery then waited for a sweep)."""
    import asyncio

    from rivet_workflows.driver import tasks
    from rivet_workflows.driver.dispatch import HINT_PRIORITY, CeleryDispatcher

    queued: list[dict] = []
    monkeypatch.setattr(tasks.relay, "apply_async", lambda **kwargs: queued.append(kwargs))

    async def in_the_loop() -> None:
        CeleryDispatcher().relay()

    asyncio.run(in_the_loop())
    assert queued == [{"priority": HINT_PRIORITY}]
