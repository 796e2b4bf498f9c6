"""Issue 25's "done when", on two real PostgreSQL clusters (DESIGN.md section 21): shard ``default`` is one
cluster, ``shard1`` another (``two_clusters``, ``tests/shards/clusters.py``), each test on databases of its
own, migrated with ``manage.py migrate --database ALIAS`` through ``tests/shards/settings.py``.

(a) 1,000 actors created through the client spread within 10% over the two clusters (rows counted on each
    with psycopg), each on the cluster its id names;
(b) workflows on shard A whose steps create (``get_or_create``) and send to actors on shard B complete on
    real Celery workers, every message delivered once, in order per (sender, target);
(c) the same while a separate relay process (``python -m tests.shards relay-loop``) is SIGKILLed 10 times,
    half of them at random times, half just before it marks delivered rows (after the target's commit);
(d) the same while shard B's cluster is stopped for 10 s mid-run: nothing lost, all delivered once after.

The Django side (creations, the relay loop) runs in processes of its own (``python -m tests.shards``) and the
workers are ``celery -A project worker`` processes with the files broker (``tests/system/conftest.py``'s
``Cluster``); this process only reads the clusters with psycopg. Skipped until the sharded store and the
relay exist (``rivet_workflows.storage.sharded``, ``rivet_workflows.engine.runtime.relay``).
"""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psycopg
import pytest

from tests.shards import cluster_fixtures
from tests.shards.clusters import Clusters
from tests.shards.workflows import body_text, parse_body
from tests.system.conftest import Cluster, Proc

BASE_DIR = Path(__file__).resolve().parents[2]
FINISHED = ("completed", "failed", "cancelled")
BUCKETS = 256


# the fixtures of the clusters (not a conftest.py: tests/shards/conftest.py is the one-server tests')
two_clusters = cluster_fixtures.two_clusters
clusters = cluster_fixtures.clusters

pytestmark = [
    pytest.mark.system,
    pytest.mark.postgres,
]


def shard_map() -> Any:
    """The ``ShardMap`` of ``tests/shards/settings.py`` (two aliases, 256 buckets)."""
    from rivet_workflows.engine.model.shards import ShardMap

    return ShardMap(["default", "shard1"], BUCKETS)


def keys_on(name: str, alias: str, count: int, prefix: str) -> list[list[str]]:
    """``count`` keys ``[prefix<n>]`` whose actor ``name`` is created on ``alias``."""
    found: list[list[str]] = []
    n = 0
    while len(found) < count:
        key = [f"{prefix}{n}"]
        if shard_map().alias_for_key(name, key) == alias:
            found.append(key)
        n += 1
    return found


# --- the shards of one test -------------------------------------------------------------------------


@dataclass
class Shards:
    """The two clusters' databases of one test, the environment of its processes and its workers."""

    clusters: Clusters
    database: str
    tmp: Path
    workers: Cluster
    env: dict[str, str] = field(default_factory=dict)

    def run(self, *args: str, timeout: float = 120) -> subprocess.CompletedProcess:
        done = subprocess.run(
            [sys.executable, *args],
            cwd=BASE_DIR,
            env=self.env,
            capture_output=True,
            text=True,
            timeout=timeout,
        )
        assert done.returncode == 0, f"{args} exited {done.returncode}:\n{done.stdout}\n{done.stderr[-4000:]}"
        return done

    def migrate(self, alias: str) -> None:
        """``manage.py migrate --database alias``, as the manual says (docs/howto/shards.md)."""
        self.run("manage.py", "migrate", "--database", alias, "--noinput", "-v", "0")

    def create(
        self, kind: str, keys: list[list[str]] | None = None, *, count: int = 0, input: Any = None
    ) -> dict:
        """Actors made through the client in a process on the shards: key text -> actor id."""
        args = ["-m", "tests.shards", "create", kind, "--input", json.dumps(input)]
        args += ["--keys", json.dumps(keys)] if keys is not None else ["--count", str(count)]
        return json.loads(self.run(*args, timeout=300).stdout.strip().splitlines()[-1])

    def query(self, alias: str, sql: str, params: Any = None) -> list:
        return self.clusters.query(alias, sql, params, database=self.database)

    def actors(self, alias: str, *names: str) -> list[tuple[str, str, list, str, Any]]:
        """(actor_id, name, key, workflow_state, output) of the actors ``names`` on ``alias``."""
        return self.query(
            alias,
            "SELECT actor_id, name, key, workflow_state, output FROM rivet_workflows_actor WHERE name = ANY(%s)",
            [list(names)],
        )


@pytest.fixture
def shards(clusters: Clusters, tmp_path: Path, request: pytest.FixtureRequest) -> Any:
    """Fresh, migrated databases on both clusters for this test, and a workers' ``Cluster`` (files broker;
    no worker or beat started yet). Stops every process it started afterwards."""
    database = "rivet_" + request.node.name.removeprefix("test_")[:40]
    clusters.fresh_database(database)
    workers = Cluster(tmp_path, {}, lease=2.0, sweep=0.2)
    env = workers.env
    for key in ("DATABASE_URL", "REDIS_URL", "RIVET_TEST_DB", "RIVET_SQLITE_PATH"):
        env.pop(key, None)
    env.update(clusters.env(database))
    env.update(
        {
            "RIVET_REGISTRY": "tests.shards.workflows.registry",
            "RIVET_SHARD_BUCKETS": str(BUCKETS),
            "PYTHONPATH": os.pathsep.join(filter(None, [str(BASE_DIR), os.environ.get("PYTHONPATH")])),
        }
    )
    made = Shards(clusters, database, tmp_path, workers, env)
    for alias in clusters.aliases:
        made.migrate(alias)
    try:
        yield made
    finally:
        workers.stop()


# --- (a) the spread ---------------------------------------------------------------------------------


def test_both_shards_are_migrated_and_a_thousand_actors_spread_within_ten_percent(shards: Shards):
    for alias in ("default", "shard1"):
        applied = shards.query(alias, "SELECT count(*) FROM django_migrations WHERE app = 'rivet_workflows'")
        assert applied[0][0] > 0, f"rivet_workflows is not migrated on {alias}"
        assert shards.query(alias, "SELECT to_regclass('rivet_workflows_relaymessage') IS NOT NULL")[0][0]
    made = shards.create("counter", count=1000)
    assert len(made) == 1000
    rows = {
        alias: dict(shards.query(alias, "SELECT actor_id, key_text FROM rivet_workflows_actor"))
        for alias in ("default", "shard1")
    }
    assert sum(len(r) for r in rows.values()) == 1000
    for alias, found in rows.items():
        assert abs(len(found) - 500) <= 50, f"{alias} holds {len(found)} of 1,000 actors"
        # each where its id (its bucket) and its (type, key) say it is
        assert {shard_map().alias_for_actor(actor_id) for actor_id in found} == {alias}
        assert {shard_map().alias_for_key("counter", json.loads(text)) for text in found.values()} == {alias}
    assert set(rows["default"]).isdisjoint(rows["shard1"])
    assert set(made.values()) == set(rows["default"]) | set(rows["shard1"])
    # the same key again finds the actor where it lives: no second row on either shard
    again = shards.create("counter", [["k7"], ["k123"]])
    assert again == {
        json.dumps(["k7"]): made[json.dumps(["k7"])],
        json.dumps(["k123"]): made[json.dumps(["k123"])],
    }
    assert (
        sum(len(shards.query(a, "SELECT actor_id FROM rivet_workflows_actor")) for a in ("default", "shard1"))
        == 1000
    )


# --- (b), (c), (d): sends across shards ---------------------------------------------------------------


@dataclass
class Plan:
    """Senders on shard A (``default``) sending, step by step, to sinks on shard B (``shard1``) and to one on
    their own shard; half of B's sinks exist beforehand, the others are made by the steps' ``get_or_create``."""

    senders: int = 4
    messages: int = 5
    remote_targets: int = 3
    local_targets: int = 1
    pause: float = 0.0
    sender_keys: list[list[str]] = field(default_factory=list)
    remote: list[list[str]] = field(default_factory=list)
    local: list[list[str]] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.sender_keys = keys_on("sender", "default", self.senders, "from")
        self.remote = keys_on("sink", "shard1", self.remote_targets, "far")
        self.local = keys_on("sink", "default", self.local_targets, "near")

    @property
    def expected(self) -> int:
        """Messages each sink receives: one per step of every sender."""
        return self.senders * self.messages

    @property
    def relayed(self) -> int:
        """Messages that cross from shard A to shard B."""
        return self.senders * self.messages * self.remote_targets


def start(shards: Shards, plan: Plan, *, workers: int = 2) -> None:
    """Pre-create half of B's sinks, start the beat and the workers, create the senders."""
    shards.create("sink", plan.remote[: len(plan.remote) // 2], input={"expected": plan.expected})
    shards.workers.start_beat()
    for _ in range(workers):
        shards.workers.start_worker(4)
    shards.create(
        "sender",
        plan.sender_keys,
        input={
            "targets": plan.remote + plan.local,
            "messages": plan.messages,
            "expected": plan.expected,
            "pause": plan.pause,
        },
    )


def progress(shards: Shards, plan: Plan) -> tuple[int, int, list[str]]:
    """(completed actors of the plan, actors of the plan, the failed or cancelled ones described), reading
    both clusters (a cluster that is down counts as nothing finished)."""
    done, ended = 0, []
    for alias in ("default", "shard1"):
        try:
            rows = shards.query(
                alias,
                "SELECT a.name, a.key_text, a.workflow_state, a.error->>'name', "
                "(SELECT string_agg(h.key || '=' || h.status || ':' || coalesce(h.error->>'name', '') || ' ' "
                "|| left(coalesce(h.error->>'message', ''), 200), '; ') FROM rivet_workflows_historyentry h "
                "WHERE h.actor_id = a.actor_id AND h.status NOT IN ('completed', 'pending')) "
                "FROM rivet_workflows_actor a WHERE a.name IN ('sender', 'sink')",
            )
        except psycopg.OperationalError:
            continue
        done += sum(1 for row in rows if row[2] == "completed")
        ended += [f"{alias} {name}{key} {state} ({error}): {steps}" for name, key, state, error, steps in rows
                  if state in ("failed", "cancelled")]  # fmt: skip
    return done, plan.senders + plan.remote_targets + plan.local_targets, ended


def wait_done(shards: Shards, plan: Plan, timeout: float, during: Any = None) -> None:
    """Poll until every sender and sink completed (calling ``during()`` each round); fails at once when one
    failed or was cancelled, and on timeout, with the actors' errors and the worker logs."""
    deadline = time.monotonic() + timeout
    while True:
        if during is not None:
            during()
        done, total, ended = progress(shards, plan)
        if done == total:
            return
        if ended:
            pytest.fail("workflows ended without completing:\n" + "\n".join(ended))
        if time.monotonic() > deadline:
            pytest.fail(f"{done} of {total} actors completed after {timeout} s\n{shards.workers.logs()}")
        time.sleep(0.2)


def _diagnosis(shards: Shards, alias: str, sink_id: str, sink: str, messages: list[tuple[str, int]]) -> str:
    """What the stores and the senders' journal say of ``messages`` (sender key, i) sent to ``sink``: the
    journal's lines (one per step attempt that sent), shard A's relay rows and the sink's queue messages."""
    bodies = [body_text(sender, i) for sender, i in messages]
    journal = shards.workers.fault_dir / "sent.log"
    lines = journal.read_text().splitlines() if journal.exists() else []
    wanted = {f"{sender} {i} {sink}" for sender, i in messages}
    attempts = [line for line in lines if line.rsplit(" ", 1)[0] in wanted]
    relay = shards.query(
        "default",
        "SELECT id, kind, body::text, delivered_at IS NOT NULL, failed, last_error FROM rivet_workflows_relaymessage "
        "WHERE target_actor_id = %s ORDER BY id",
        [sink_id],
    )
    relay = [row for row in relay if any(body in (row[2] or "") for body in bodies)]
    stored = shards.query(
        alias,
        "SELECT id, body::text, dedup_id, status FROM rivet_workflows_queuemessage WHERE actor_id = %s ORDER BY id",
        [sink_id],
    )
    stored = [row for row in stored if any(body in (row[1] or "") for body in bodies)]
    return (
        f"journal (step attempts): {attempts}\nrelay rows on A: {relay}\nqueue messages of the sink: {stored}"
    )


def check_exactly_once(shards: Shards, plan: Plan) -> None:
    """Every sink completed with each ``sender|i`` once, each sender's in increasing ``i``; each sink is on
    the shard its key says; shard A's relay rows are all delivered (none failed), one per crossing message;
    shard B holds one queue message per delivered one; no worker exited on its own."""
    everything = {(tuple(k)[0], i) for k in plan.sender_keys for i in range(plan.messages)}
    senders = shards.actors("default", "sender")
    assert len(senders) == plan.senders and all(row[3] == "completed" for row in senders)
    for alias, keys in (("shard1", plan.remote), ("default", plan.local)):
        rows = {tuple(row[2]): row for row in shards.actors(alias, "sink")}
        assert set(rows) == {tuple(k) for k in keys}, f"sinks on {alias}: {sorted(rows)}"
        for key, (actor_id, _, _, state, output) in rows.items():
            assert state == "completed", (key, state)
            assert shard_map().alias_for_actor(actor_id) == alias
            received = [parse_body(body) for body in output]
            counts = Counter(received)
            missed = sorted(everything - set(counts))
            twice = [m for m, n in counts.items() if n > 1]
            if missed or twice:
                pytest.fail(
                    f"sink {key} missed {missed[:5]}, got twice {twice[:5]}\n"
                    + _diagnosis(shards, alias, actor_id, key[0], missed[:3] + twice[:3])
                )
            for sender, _ in everything:
                order = [i for s, i in received if s == sender]
                assert order == sorted(order), f"sink {key} got {sender}'s messages out of order: {order}"
    # one send row per crossing message, and one create row per step and remote sink (every step's
    # get_or_create of a sink on shard B rides on its commit too; a create of an existing sink is a no-op)
    for kind in ("send", "create"):
        relay = shards.query(
            "default",
            "SELECT count(*), count(delivered_at), count(*) FILTER (WHERE failed) "
            "FROM rivet_workflows_relaymessage WHERE kind = %s",
            [kind],
        )[0]
        assert relay == (plan.relayed, plan.relayed, 0), (
            f"relay {kind} rows (all, delivered, failed): {relay}"
        )
    parents = shards.query(
        "shard1", "SELECT DISTINCT parent_actor_id FROM rivet_workflows_actor WHERE name = 'sink'"
    )
    made_by_steps = {row[0] for row in parents} - {None}
    assert made_by_steps <= {row[0] for row in senders}, f"parents of B's sinks: {made_by_steps}"
    stored = shards.query(
        "shard1",
        "SELECT count(*), count(DISTINCT dedup_id) FROM rivet_workflows_queuemessage m "
        "JOIN rivet_workflows_actor a ON a.actor_id = m.actor_id WHERE a.name = 'sink'",
    )[0]
    assert stored == (plan.relayed, plan.relayed), f"queue messages on shard B (all, distinct ids): {stored}"
    for proc in [*shards.workers.workers, shards.workers.beat]:
        assert proc is not None and proc.alive(), f"{proc.name} exited on its own: {proc.tail(10)}"


def test_steps_on_one_shard_create_and_send_to_actors_on_another_exactly_once(shards: Shards):
    plan = Plan()
    start(shards, plan)
    wait_done(shards, plan, timeout=120)
    check_exactly_once(shards, plan)


def test_a_relay_killed_ten_times_still_delivers_every_message_once(shards: Shards):
    """10 SIGKILLs of a relay process of its own: the odd ones at a random moment, the even ones at the
    fault point just before it marks rows delivered (after the target shard committed them)."""
    plan = Plan(senders=4, messages=20, pause=0.5)
    start(shards, plan)
    fault_dir = shards.workers.fault_dir
    kills, at_mark, n = 0, 0, 0
    relay: Proc | None = None
    rng = random.Random(25)

    def new_relay() -> Proc:
        nonlocal n
        n += 1
        return Proc(
            f"relay-{n}",
            [sys.executable, "-m", "tests.shards", "relay-loop", "--pause", "0.01"],
            shards.env,
            shards.tmp,
        )

    try:
        while kills < 10:
            armed = kills % 2 == 0
            if armed:
                (fault_dir / "kill-relay-mark").touch()
            relay = new_relay()
            deadline = time.monotonic() + (15.0 if armed else rng.uniform(0.5, 3.0))
            while relay.alive() and time.monotonic() < deadline:
                time.sleep(0.05)
            if (fault_dir / "kill-relay-mark.taken").exists():
                at_mark += 1
                (fault_dir / "kill-relay-mark.taken").unlink()
            (fault_dir / "kill-relay-mark").unlink(missing_ok=True)
            relay.kill()
            kills += 1
        relay = new_relay()  # the last one, left alone, delivers what is still pending
        wait_done(shards, plan, timeout=180)
    finally:
        if relay is not None:
            relay.stop()
    assert kills == 10
    print(f"relay killed 10 times, {at_mark} of them between the target's commit and the source's mark")
    assert at_mark >= 1, "no kill fell between the target's commit and the source's mark"
    check_exactly_once(shards, plan)


def test_shard_b_down_for_ten_seconds_mid_run_loses_nothing_and_delivers_once(shards: Shards):
    plan = Plan(senders=4, messages=12, pause=0.5)
    start(shards, plan)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:  # mid-run: some messages crossed already
        delivered = shards.query("default", "SELECT count(delivered_at) FROM rivet_workflows_relaymessage")[
            0
        ][0]
        if delivered:
            break
        time.sleep(0.1)
    assert delivered, "no message crossed within 60 s"
    began = time.monotonic()
    shards.clusters.down_for("shard1", 10.0)
    assert time.monotonic() - began >= 10.0
    wait_done(shards, plan, timeout=180)
    check_exactly_once(shards, plan)
