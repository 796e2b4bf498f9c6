"""Benchmark P10, shards (DESIGN.md section 21): ``python -m bench.shards P10 '{...}'`` (run by ``python -m
bench``, which reads its one JSON line).

P7's load (``workflows`` independent ten-step workflows created at once, then ``processes`` Celery workers
of ``concurrency`` concurrent runs each) on one shard and on two, each shard a PostgreSQL cluster of its own
started in a temporary folder (``tests/shards/clusters.py``; ``fsync`` as the machine's server has it, on by
default), with the settings of ``tests/shards/settings.py`` (``SHARDS``, the router, ``migrate --database``
per shard, persistent connections, DEBUG off). Steps/s from the moment every worker is ready to the last
step of the last workflow (the last step stamps its wall clock in the workflow's output), for each.

Then, on the two shards with the workers still running, the latency of a send from a step body to an actor
on the other shard (``stamp_sender`` on ``default`` -> ``stamp_sink`` on ``shard1``: the outbox, the relay,
the target's wake), ``messages`` sends ``gap`` seconds apart, measured from the sending step's body to the
receiving step's body; and beside it, at the same time, the same between two actors of one shard (no relay).

Needs PostgreSQL's server programs (initdb, pg_ctl) and the sharded store and relay of issue 25; without
them it reports ``{"status": "skipped", "detail": why}`` at once.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from typing import Any

from bench import proc, stats

BUCKETS = 256


def missing() -> str | None:
    """Why P10 cannot run here (None: it can): PostgreSQL's server programs are needed for its clusters."""
    from tests.shards.clusters import Clusters

    if not Clusters.available():
        return "PostgreSQL's server programs (initdb, pg_ctl, postgres) are not installed"
    return None


class Shards:
    """N clusters for one round, the environment of the processes on them, and reads with psycopg."""

    def __init__(self, count: int, fsync: bool) -> None:
        from tests.shards.clusters import Clusters

        self.clusters = Clusters(count)  # in a temporary folder of its own, removed by ``remove``
        self.fsync = fsync
        self.env: dict[str, str] = {}

    def start(self) -> None:
        self.clusters.start()
        if self.fsync:  # the harness's clusters run with fsync off; a benchmark measures real commits
            for server in self.clusters.servers:
                server.stop("fast")
                server.start("-c fsync=on -c full_page_writes=on")
        var = self.clusters.folder / "var"
        self.env = {
            **os.environ,
            **self.clusters.env(),
            "PYTHONPATH": str(proc.ROOT),
            "RIVET_REGISTRY": "tests.shards.workflows.registry",
            "RIVET_SHARD_BUCKETS": str(BUCKETS),
            "RIVET_CONN_MAX_AGE": "none",
            "RIVET_VAR_DIR": str(var),
            "DJANGO_DEBUG": "0",
            "DJANGO_SECRET_KEY": "bench-p10-" + "x" * 40,
            "RIVET_LOG_LEVEL": "WARNING",
        }
        self.env.pop("DATABASE_URL", None)
        for alias in self.clusters.aliases:
            self.run("manage.py", "migrate", "--database", alias, "--noinput", "-v", "0")

    def run(self, *args: str, timeout: float = 600) -> str:
        done = subprocess.run(
            [sys.executable, *args],
            cwd=proc.ROOT,
            env=self.env,
            capture_output=True,
            text=True,
            timeout=timeout,
        )
        if done.returncode != 0:
            raise RuntimeError(f"{args} exited {done.returncode}:\n{(done.stderr or done.stdout)[-3000:]}")
        return done.stdout

    def create(self, kind: str, keys: list[list[str]] | None = None, *, count: int = 0, prefix: str = "k",
               input: Any = None) -> dict[str, str]:  # fmt: skip
        args = ["-m", "tests.shards", "create", kind, "--input", json.dumps(input), "--prefix", prefix]
        args += ["--keys", json.dumps(keys)] if keys is not None else ["--count", str(count)]
        return json.loads(self.run(*args).strip().splitlines()[-1])

    def finished(self, name: str) -> tuple[int, float]:
        """(completed actors of type ``name``, the largest number in their outputs) over every shard."""
        count, last = 0, 0.0
        for alias in self.clusters.aliases:
            n, top = self.clusters.query(
                alias,
                "SELECT count(*), max((output #>> '{}')::float8) FROM rivet_workflows_actor "
                "WHERE name = %s AND workflow_state = 'completed'",
                [name],
            )[0]
            count += n
            last = max(last, top or 0.0)
        return count, last

    def output(self, alias: str, name: str, key: list[str]) -> Any:
        rows = self.clusters.query(
            alias,
            "SELECT output FROM rivet_workflows_actor WHERE name = %s AND key_text = %s AND workflow_state = 'completed'",
            [name, json.dumps(key, separators=(",", ":"))],
        )
        return rows[0][0] if rows else None

    def per_shard(self, name: str) -> list[int]:
        return [
            self.clusters.count(alias, "SELECT count(*) FROM rivet_workflows_actor WHERE name = %s", [name])
            for alias in self.clusters.aliases
        ]

    def remove(self) -> None:
        self.clusters.remove()


def _keys_on(name: str, alias: str, count: int, prefix: str) -> list[list[str]]:
    from rivet_workflows.engine.model.shards import ShardMap

    shard_map = ShardMap(["default", "shard1"], BUCKETS)
    found, n = [], 0
    while len(found) < count:
        key = [f"{prefix}{n}"]
        if shard_map.alias_for_key(name, key) == alias:
            found.append(key)
        n += 1
    return found


def _throughput(shards: Shards, workflows: int, processes: int, concurrency: int, cap: float,
                latency: dict[str, Any] | None) -> dict[str, Any]:  # fmt: skip
    """One round of P7's load on ``shards``; with ``latency`` (messages, gap) the send latencies after it."""
    from bench.ours_side import _flush_redis, celery_workers

    out: dict[str, Any] = {}
    _flush_redis()
    t0 = time.monotonic()
    shards.create("steps", count=workflows, prefix="w", input={"steps": 10})
    out["create_seconds"] = time.monotonic() - t0
    out["per_shard"] = shards.per_shard("steps")
    saved = dict(os.environ)
    os.environ.clear()
    os.environ.update(shards.env)  # celery_workers starts the workers with this process's environment
    try:
        with celery_workers(processes, concurrency=concurrency) as ready:
            w0 = time.time() - (time.monotonic() - ready)
            deadline = time.monotonic() + cap
            done, last = shards.finished("steps")
            while done < workflows and time.monotonic() < deadline:
                time.sleep(0.25)
                done, last = shards.finished("steps")
            out["finished"] = done
            out["expected"] = workflows
            out["seconds"] = (last or time.time()) - w0
            out["steps_per_s"] = done * 10 / max(out["seconds"], 1e-9)
            if latency:
                out.update(_latency(shards, **latency))
    finally:
        os.environ.clear()
        os.environ.update(saved)
    return out


def _latency(shards: Shards, messages: int, gap: float, cap: float = 120.0) -> dict[str, Any]:
    """Send latencies from a step body to a step body, across shards and within one, at the same time."""
    far = _keys_on("stamp_sink", "shard1", 1, "far")[0]
    near = _keys_on("stamp_sink", "default", 1, "near")[0]
    shards.create("stamp_sink", [far, near], input={"expected": messages})
    senders = _keys_on("stamp_sender", "default", 2, "from")
    shards.create("stamp_sender", [senders[0]], input={"target": far, "messages": messages, "gap": gap})
    shards.create("stamp_sender", [senders[1]], input={"target": near, "messages": messages, "gap": gap})
    deadline = time.monotonic() + cap
    got: dict[str, Any] = {"cross": None, "same": None}
    while time.monotonic() < deadline and None in got.values():
        got = {
            "cross": shards.output("shard1", "stamp_sink", far),
            "same": shards.output("default", "stamp_sink", near),
        }
        time.sleep(0.25)
    out: dict[str, Any] = {}
    for kind, seconds in got.items():
        summary = stats.latency_summary(seconds or [])
        out.update({f"{kind}_{k}": v for k, v in summary.items()})
    return out


def p10_shards(
    workflows: int = 2000,
    processes: int = 2,
    concurrency: int = 8,
    cap_seconds: float = 120.0,
    messages: int = 100,
    gap: float = 0.05,
    fsync: bool = True,
    shard_counts: list[int] | None = None,
) -> dict[str, Any]:
    """P7's load on one shard, then on two (clusters of their own), then the send latencies on two.
    ``shard_counts`` ``[1]`` runs the one-shard round only."""
    counts = shard_counts or [1, 2]
    why = missing()
    if why:
        return {"status": "skipped", "detail": why}
    out: dict[str, Any] = {"workflows": workflows, "processes": processes, "concurrency": concurrency}
    for count in counts:
        shards = Shards(count, fsync)
        try:
            shards.start()
            latency = {"messages": messages, "gap": gap} if count == 2 else None
            result = _throughput(shards, workflows, processes, concurrency, cap_seconds, latency)
        finally:
            shards.remove()
        for key, value in result.items():
            out[key if key.startswith(("cross_", "same_")) else f"{key}_{count}"] = value
    if "steps_per_s_1" in out and "steps_per_s_2" in out:
        out["two_over_one"] = out["steps_per_s_2"] / max(out["steps_per_s_1"], 1e-9)
    return out


BENCHES = {"P10": p10_shards}

if __name__ == "__main__":
    proc.child_main(BENCHES)
