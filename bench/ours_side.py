"""Our engine's side of the benchmarks (run as ``python -m bench.ours_side P1 '{...}'``).

The parent sets ``DJANGO_SETTINGS_MODULE=bench.django_settings``, ``DATABASE_URL`` (a scratch PostgreSQL
database, already migrated) and ``REDIS_URL`` (a scratch Redis database for Celery). Work runs either
in-process through ``rivet_workflows.drain()`` or in real Celery worker processes
(``celery -A project worker``), the way a deployment runs it.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from bench import pg, proc, stats

DBNAME = os.environ.get("BENCH_OURS_DB", "rivet_bench_ours")


def _django() -> Any:
    """Load Django and return the ``rivet_workflows`` module with ``client``/``drain`` available."""
    import django

    django.setup()
    import rivet_workflows as rw
    from rivet_workflows import django_runtime

    if not hasattr(rw, "drain"):  # until the lead re-exports the Django helpers
        rw.drain = django_runtime.drain
        rw.client = django_runtime.client
    return rw


def _drain_all(rw: Any, timeout: float) -> Any:
    summary = rw.drain(timeout=timeout)
    return summary


def _listener() -> socket.socket:
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.bind(("127.0.0.1", 0))
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4 * 1024 * 1024)
    return sock


def _receive(sock: socket.socket, count: int, timeout: float) -> list[dict[str, Any]]:
    """Up to ``count`` datagrams, waiting at most ``timeout`` seconds in total."""
    got: list[dict[str, Any]] = []
    deadline = time.monotonic() + timeout
    while len(got) < count:
        left = deadline - time.monotonic()
        if left <= 0:
            break
        sock.settimeout(left)
        try:
            data, _ = sock.recvfrom(65536)
        except TimeoutError:
            break
        got.append(json.loads(data))
    return got


def _flush_redis() -> None:
    import redis

    redis.Redis.from_url(os.environ["REDIS_URL"]).flushdb()


@contextmanager
def celery_workers(
    count: int, *, beat: bool = True, env: dict[str, str] | None = None, concurrency: int = 1
) -> Iterator[float]:
    """Start ``count`` Celery worker processes (the first also runs beat, which sends the sweep every
    SWEEP_INTERVAL). ``concurrency`` 1: the solo pool (one process, one task at a time, each); above 1,
    each worker runs that many actors at once (the ``WORKER_CONCURRENCY`` setting).

    Yields the monotonic time at which every worker reported ready; stops them on exit.
    Raises ``RuntimeError`` when a worker is not ready within 60 s.
    """
    logdir = Path(os.environ.get("BENCH_LOG_DIR") or tempfile.mkdtemp(prefix="rivet-bench-"))
    procs: list[tuple[subprocess.Popen, Path]] = []
    failed = True  # the worker logs stay in ``logdir`` for the post-mortem unless all went well
    # concurrency goes through the WORKER_CONCURRENCY setting (project settings: RIVET_WORKER_CONCURRENCY),
    # which turns the solo pool of the command line into a thread pool of that size
    full_env = {**os.environ, "RIVET_WORKER_CONCURRENCY": str(max(1, concurrency)), **(env or {})}
    try:
        for i in range(count):
            log = logdir / f"rivet-bench-worker-{os.getpid()}-{i}.log"
            log.unlink(missing_ok=True)
            args = [
                sys.executable,
                "-m",
                "celery",
                "-A",
                "project",
                "worker",
                "--pool",
                "solo",
                "-l",
                "info",
                "-n",
                f"bench{i}-{os.getpid()}@%h",
                "--without-gossip",
                "--without-mingle",
                "--without-heartbeat",
                "-f",
                str(log),
            ]
            if beat and i == 0:
                args += ["-B", "-s", str(logdir / f"rivet-bench-beat-{os.getpid()}")]
            procs.append(
                (
                    subprocess.Popen(
                        args,
                        cwd=proc.ROOT,
                        env=full_env,
                        start_new_session=True,
                        stdout=subprocess.DEVNULL,
                        stderr=subprocess.DEVNULL,
                    ),
                    log,
                )
            )
        deadline = time.monotonic() + 60
        pending = list(procs)
        while pending:
            if time.monotonic() > deadline:
                raise RuntimeError("celery worker not ready after 60 s: " + str([str(p[1]) for p in pending]))
            for item in list(pending):
                p, log = item
                if p.poll() is not None:
                    raise RuntimeError(f"celery worker exited {p.returncode}; see {log}")
                if log.exists() and " ready." in log.read_text(errors="replace"):
                    pending.remove(item)
            time.sleep(0.05)
        yield time.monotonic()
        failed = False
    finally:
        # The figures are taken and the database is dropped next, so nothing needs a clean shutdown:
        # kill each worker's own process group (the worker and its embedded beat).
        for p, _ in procs:
            try:
                os.killpg(p.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        for p, _ in procs:
            p.wait()
        if not failed and "BENCH_LOG_DIR" not in os.environ:
            shutil.rmtree(logdir, ignore_errors=True)


def _sql_profile(rw: Any, create: Any) -> dict[str, int]:
    """SQL statements issued to create and run one workflow, grouped by verb and table (most first)."""
    import re

    from django.db import connection

    counts: dict[str, int] = {}

    def capture(execute: Any, sql: str, params: Any, many: bool, context: Any) -> Any:
        verb = sql.lstrip().split(None, 1)[0].upper() if sql.strip() else "?"
        table = re.search(r'(?:FROM|INTO|UPDATE)\s+"?([a-z_]+)"?', sql, re.IGNORECASE)
        label = f"{verb} {table.group(1) if table else ''}".strip()
        if "FOR UPDATE" in sql.upper():
            label += " FOR UPDATE"
        counts[label] = counts.get(label, 0) + 1
        return execute(sql, params, many, context)

    with connection.execute_wrapper(capture):
        create()
        _drain_all(rw, 60)
    counts["total"] = sum(counts.values())
    return dict(sorted(counts.items(), key=lambda kv: -kv[1]))


def _engine_only_sequential(workflows: int) -> dict[str, float]:
    """P1 on the in-memory store: the engine's own workflows/s, without the database."""
    from bench import ours_registry
    from rivet_workflows import django_runtime, testing

    runtime = testing.make_runtime(ours_registry.registry)
    client = runtime.registry.client()
    t0 = time.perf_counter()
    for i in range(workflows):
        client.bench_sequential.create(f"p1-memory-{i}")
    testing.drain(runtime, timeout=600)
    seconds = time.perf_counter() - t0
    django_runtime.reset_runtime()  # make_runtime bound the registry to the memory store
    return {"memory_workflows_per_s": workflows / seconds}


class _DropSpans:
    """A span exporter that drops what it gets: spans are recorded and batched as in production, and the
    measure is not about an exporter's network."""

    def export(self, spans: Any) -> Any:
        from opentelemetry.sdk.trace.export import SpanExportResult

        return SpanExportResult.SUCCESS

    def shutdown(self) -> None:
        return None

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return True


def _observed_overhead(rw: Any, workflows: int, rounds: int = 2) -> dict[str, Any]:
    """P1 (``workflows`` ten-step actors, one in-process drain) with tracing and metrics off, then on (an
    OpenTelemetry SDK recording every span into a batch processor, prometheus-client counting), alternated
    ``rounds`` times; the best workflows/s of each and their ratio (on / off, target >= 0.9)."""
    from django.conf import settings
    from django.test import override_settings
    from opentelemetry import trace
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    provider = TracerProvider()
    provider.add_span_processor(BatchSpanProcessor(_DropSpans()))
    trace.set_tracer_provider(provider)
    base = dict(settings.RIVET_WORKFLOWS)
    best = {"off": 0.0, "on": 0.0}
    for r in range(rounds):
        for mode in ("off", "on"):
            with override_settings(
                RIVET_WORKFLOWS={**base, "METRICS": mode == "on", "TRACING": mode == "on"}
            ):
                client = rw.client()
                t0 = time.perf_counter()
                for i in range(workflows):
                    client.bench_sequential.create(f"p1-observed-{mode}-{r}-{i}")
                rw.drain(timeout=600)
                best[mode] = max(best[mode], workflows / (time.perf_counter() - t0))
    provider.shutdown()
    return {
        "observed_workflows": workflows,
        "workflows_per_s_observed_off": best["off"],
        "workflows_per_s_observed_on": best["on"],
        "observed_ratio": best["on"] / best["off"] if best["off"] else None,
    }


def p1_sequential(
    workflows: int = 200, warmup: int = 5, idle_window: float = 2.0, observed_workflows: int | None = None
) -> dict[str, Any]:
    """Create ``workflows`` ten-step actors and run them with one in-process drain; workflows/s, commits/step."""
    rw = _django()
    from django.db import connection

    client = rw.client()
    steps = int(os.environ.get("BENCH_STEPS", "10"))
    for i in range(warmup):
        client.bench_sequential.create(f"warm-{i}")
    _drain_all(rw, 60)
    connection.close()
    meter = pg.CommitMeter(DBNAME)
    meter.measure_idle(idle_window)
    meter.start()
    t0, cpu0 = time.perf_counter(), time.process_time()
    for i in range(workflows):
        client.bench_sequential.create(f"p1-{i}")
    t_created = time.perf_counter()
    summary = _drain_all(rw, 600)
    elapsed, cpu = time.perf_counter() - t0, time.process_time() - cpu0
    connection.close()
    commits = meter.stop()
    # The same measure with workflows of twice the steps: the difference is the cost of STEPS more steps,
    # without the fixed costs (creation, claim and load, completion).
    long_workflows = max(1, workflows // 2)
    meter_long = pg.CommitMeter(DBNAME)
    meter_long.idle_rate = meter.idle_rate
    meter_long.start()
    for i in range(long_workflows):
        client.bench_sequential_long.create(f"p1-long-{i}")
    _drain_all(rw, 600)
    connection.close()
    commits_long = meter_long.stop()
    per_workflow, per_long_workflow = commits / workflows, commits_long / long_workflows
    sql = _sql_profile(rw, lambda: client.bench_sequential.create("p1-profiled"))
    memory = _engine_only_sequential(workflows)
    observed = _observed_overhead(
        rw, observed_workflows if observed_workflows is not None else workflows // 2
    )
    return {
        **memory,
        **observed,
        "sql_per_workflow": sql,
        "long_workflows": long_workflows,
        "long_steps_per_workflow": 2 * steps,
        "commits_per_long_workflow": per_long_workflow,
        "marginal_commits_per_step": (per_long_workflow - per_workflow) / steps,
        "workflows": workflows,
        "steps_per_workflow": steps,
        "seconds": elapsed,
        "create_seconds": t_created - t0,
        "workflows_per_s": workflows / elapsed,
        "steps_per_s": workflows * steps / elapsed,
        "cpu_ms_per_step": 1000 * cpu / (workflows * steps),
        "commits": commits,
        "commits_per_step": commits / (workflows * steps),
        "commits_per_workflow": commits / workflows,
        "idle_commits_per_s": meter.idle_rate,
        "connections_opened": meter.connections,
        "drain": repr(summary),
    }


def p2_wake_latency(messages: int = 200, idle_window: float = 2.0, gap: float = 0.0) -> dict[str, Any]:
    """A Celery worker runs an actor waiting on a queue; latency from ``handle.send`` to the next step.

    Also counts transactions per message (sender and worker together, the sweep's idle rate
    subtracted) and connections opened while measuring. ``gap`` (seconds, default 0) pauses before
    each send, so the run is waiting when the message comes: below ``WARM_WAIT`` a warm wait takes it,
    above it the actor was released and the message goes through the broker.
    """
    rw = _django()
    _flush_redis()
    sock = _listener()
    port = sock.getsockname()[1]
    meter = pg.CommitMeter(DBNAME)
    with celery_workers(1):
        handle = rw.client().bench_waiter.create("p2")
        samples = []
        for seq in range(messages + 5):
            if seq == 5:  # the first messages warm the worker up
                meter.measure_idle(idle_window)
                meter.start()
            if gap:
                time.sleep(gap)
            handle.send("wake", {"sent_at": time.time(), "seq": seq, "port": port})
            got = _receive(sock, 1, 30.0)
            if not got:
                raise RuntimeError(f"no wake report for message {seq} within 30 s")
            if seq >= 5:
                samples.append(got[0]["latency"])
        commits = meter.stop()
    result = stats.latency_summary(samples)
    result.update(
        commits_per_message=commits / messages,
        connections_opened=meter.connections,
        idle_commits_per_s=meter.idle_rate,
    )
    return result


def _engine_only_loop(registry_module: Any) -> dict[str, Any]:
    """The P3 loop, all ``BENCH_ITERATIONS`` of it, on the in-memory store (``rivet_workflows.testing``):
    the engine's own CPU per iteration at the start and the end, without the database (process CPU time
    still moves a little with other load on the machine)."""
    from rivet_workflows import testing

    runtime = testing.make_runtime(registry_module.registry)
    runtime.registry.client().bench_looper.create("p3-memory")
    t0 = time.perf_counter()
    testing.drain(runtime, timeout=600)
    seconds = time.perf_counter() - t0
    marks = list(registry_module.ITER_TIMES)
    registry_module.ITER_TIMES.clear()
    from rivet_workflows import django_runtime

    django_runtime.reset_runtime()  # make_runtime bound the registry to the memory store; rebind to Django
    cpu = [b[1] - a[1] for a, b in zip(marks, marks[1:], strict=False)]
    tenth = max(1, len(cpu) // 10)
    start = 1000 * sum(cpu[:tenth]) / tenth
    end = 1000 * sum(cpu[-tenth:]) / tenth
    return {
        "memory_iterations": len(marks),
        "memory_seconds": seconds,
        "memory_cpu_ms_start": start,
        "memory_cpu_ms_end": end,
        "memory_end_over_start": end / start if start else None,
    }


def p3_replay(iterations: int = 10000, cap_seconds: float = 120.0) -> dict[str, Any]:
    """One actor loops ``iterations`` times (one step each) under an in-process drain.

    Compares the last tenth of the iterations with the first tenth (after 50 warm-up iterations):
    median wall time, mean process CPU time (less sensitive to other load on the machine) and SQL
    statements per iteration; counts the history rows left at the end (the loop prunes every 20
    iterations). The loop stops after ``cap_seconds`` so a slow build still finishes
    (``iterations_done`` says how far it got).
    """
    os.environ["BENCH_ITERATIONS"] = str(iterations)
    os.environ["BENCH_DEADLINE"] = str(time.time() + cap_seconds)
    rw = _django()
    from django.db import connection

    from bench import ours_registry
    from rivet_workflows.models import HistoryEntry

    def count(execute: Any, sql: str, params: Any, many: bool, context: Any) -> Any:
        started = time.perf_counter()
        try:
            return execute(sql, params, many, context)
        finally:
            ours_registry.SQL_COUNT[0] += 1
            ours_registry.SQL_COUNT[1] += time.perf_counter() - started

    engine_only = _engine_only_loop(ours_registry)
    handle = rw.client().bench_looper.create("p3")
    t0 = time.perf_counter()
    with connection.execute_wrapper(count):
        _drain_all(rw, 900)
    elapsed = time.perf_counter() - t0
    marks = ours_registry.ITER_TIMES
    if len(marks) < 20:
        raise RuntimeError(f"loop ran only {len(marks)} of {iterations} iterations")
    gaps = [tuple(b[i] - a[i] for i in range(4)) for a, b in zip(marks, marks[1:], strict=False)]
    warm = min(50, len(gaps) // 10)
    tenth = max(1, (len(gaps) - warm) // 10)
    start, end = gaps[warm : warm + tenth], gaps[-tenth:]

    def summary(part: list[tuple[float, ...]]) -> tuple[float, float, float, float]:
        return (
            1000 * stats.percentile([g[0] for g in part], 50),
            1000 * sum(g[1] for g in part) / len(part),
            sum(g[2] for g in part) / len(part),
            1000 * sum(g[3] for g in part) / len(part),
        )

    (wall_s, cpu_s, sql_s, db_s), (wall_e, cpu_e, sql_e, db_e) = summary(start), summary(end)
    with connection.cursor() as cur:
        cur.execute(
            "SELECT relname, n_live_tup, n_dead_tup FROM pg_stat_user_tables WHERE relname IN (%s, %s)",
            ["rivet_workflows_actor", "rivet_workflows_historyentry"],
        )
        tuples = {name: {"live": live, "dead": dead} for name, live, dead in cur.fetchall()}
    rows = HistoryEntry.objects.filter(actor_id=handle.actor_id).count()
    return {
        "iterations": iterations,
        "iterations_done": len(marks),
        "seconds": elapsed,
        "iteration_ms_start": wall_s,
        "iteration_ms_end": wall_e,
        "end_over_start": wall_e / wall_s,
        "cpu_ms_start": cpu_s,
        "cpu_ms_end": cpu_e,
        "cpu_end_over_start": cpu_e / cpu_s if cpu_s else None,
        "sql_per_iteration_start": sql_s,
        "sql_per_iteration_end": sql_e,
        "sql_ms_start": db_s,
        "sql_ms_end": db_e,
        "sql_end_over_start": db_e / db_s if db_s else None,
        "tuples_at_end": tuples,
        **engine_only,
        "history_rows": rows,
        "prune_interval": ours_registry.PRUNE_INTERVAL,
    }


def _sweep_cost(rw: Any, rounds: int) -> tuple[float, int]:
    """Median seconds per ``rivet_workflows.sweep`` call and the run messages it sent in ``rounds`` calls."""
    from rivet_workflows.driver import tasks

    sent = 0
    original = tasks.run_actor.delay

    def counting_delay(*args: Any, **kwargs: Any) -> None:
        nonlocal sent
        sent += 1

    tasks.run_actor.delay = counting_delay
    times = []
    try:
        tasks.sweep()  # warm caches and the connection
        for _ in range(rounds):
            t0 = time.perf_counter()
            tasks.sweep()
            times.append(time.perf_counter() - t0)
    finally:
        tasks.run_actor.delay = original
    return stats.percentile(times, 50), sent


def _clone_sleepers(template_id: str, total: int) -> None:
    """Copy the engine-made rows of one sleeping actor until ``total`` sleepers exist (fixture speed).

    Every clone is the template's Actor row and history with a fresh id and key, so the sweep sees
    exactly what the engine would have written for ``total`` actors asleep for an hour. Then ANALYZE,
    as autovacuum would have done on a table that grew this much.
    """
    import uuid

    from django.db import connection, transaction

    from rivet_workflows.models import Actor, HistoryEntry
    from rivet_workflows.storage import key_text

    template = Actor.objects.get(pk=template_id)
    entries = list(HistoryEntry.objects.filter(actor_id=template_id))
    have = Actor.objects.filter(name=template.name).count()
    batch_actors: list[Actor] = []
    batch_entries: list[HistoryEntry] = []
    for i in range(have, total):
        clone = Actor(**{f.attname: getattr(template, f.attname) for f in Actor._meta.concrete_fields})
        clone.actor_id = uuid.uuid4().hex
        clone.key = [f"p4-clone-{i}"]
        clone.key_text = key_text(clone.key)
        batch_actors.append(clone)
        for entry in entries:
            copy = HistoryEntry(
                **{f.attname: getattr(entry, f.attname) for f in HistoryEntry._meta.concrete_fields}
            )
            copy.id = None
            copy.actor_id = clone.actor_id
            batch_entries.append(copy)
    with transaction.atomic():
        Actor.objects.bulk_create(batch_actors, batch_size=2000)
        HistoryEntry.objects.bulk_create(batch_entries, batch_size=2000)
    with connection.cursor() as cur:
        cur.execute(f"ANALYZE {Actor._meta.db_table}")
        cur.execute(f"ANALYZE {HistoryEntry._meta.db_table}")


def _explain_sweep() -> str:
    """EXPLAIN ANALYZE of the sweep's claim query (captured from one sweep call, then re-run read-only)."""
    from django.db import connection

    from rivet_workflows.driver import tasks

    captured: list[tuple[str, Any]] = []

    def capture(execute: Any, sql: str, params: Any, many: bool, context: Any) -> Any:
        if "FOR UPDATE" in sql.upper() and not captured:
            captured.append((sql, params))
        return execute(sql, params, many, context)

    original = tasks.run_actor.delay
    tasks.run_actor.delay = lambda *a, **k: None
    try:
        with connection.execute_wrapper(capture):
            tasks.sweep()
    finally:
        tasks.run_actor.delay = original
    if not captured:
        return "(no FOR UPDATE query seen)"
    sql, params = captured[0]
    with connection.cursor() as cur:
        cur.execute("EXPLAIN (ANALYZE, BUFFERS) " + sql, params)
        return "\n".join(row[0] for row in cur.fetchall())


def p4_idle(small: int = 10, large: int = 10000, rounds: int = 50) -> dict[str, Any]:
    """Sweep cost with ``small`` then ``large`` actors asleep for an hour; broker messages sent by sweeps.

    The first ``small`` sleepers are created and run by the engine (client + drain); the rest are
    clones of the first one's rows (see ``_clone_sleepers``).
    """
    rw = _django()
    client = rw.client()
    _flush_redis()
    out: dict[str, Any] = {}
    t0 = time.perf_counter()
    first = None
    for i in range(small):
        handle = client.bench_sleeper.create(f"p4-{i}")
        first = first or handle.actor_id
    _drain_all(rw, 120)
    for label, total in (("small", small), ("large", large)):
        if label == "large":
            _clone_sleepers(first, total)
        mean, sent = _sweep_cost(rw, rounds)
        out[f"sleepers_{label}"] = total
        out[f"sweep_ms_{label}"] = mean * 1000
        out[f"messages_{label}"] = sent
    out["explain_large"] = _explain_sweep()
    out["setup_seconds"] = time.perf_counter() - t0
    out["large_over_small"] = out["sweep_ms_large"] / out["sweep_ms_small"]
    return out


def _due_rows(name: str, total: int, flow: Any) -> None:
    """``total`` due actors of type ``name`` (wake_at spread over the last hour) as bulk-inserted rows with
    the flow columns ``flow(i)`` (a ``ports.Flow`` or None) would record: what ``create_actor`` writes."""
    import uuid
    from datetime import timedelta

    from django.db import transaction
    from django.utils import timezone

    from rivet_workflows import models
    from rivet_workflows.storage import key_text, mapper

    start = timezone.now() - timedelta(hours=1)
    rows = []
    for i in range(total):
        key = [f"{name}-{i}"]
        at = start + timedelta(seconds=i * 3600 / total)
        rows.append(
            models.Actor(
                actor_id=uuid.uuid4().hex,
                name=name,
                key=key,
                key_text=key_text(key),
                state={},
                workflow_state="sleeping",
                wake_at=at,
                created_at=at,
                updated_at=at,
                **mapper.flow_columns(flow(i)),
            )
        )
    with transaction.atomic():
        models.Actor.objects.bulk_create(rows, batch_size=2000)


def _claim_everything(store: Any, name: str, batch: int, *, one_by_one: int = 0) -> tuple[float, int]:
    """Seconds to claim every due actor of ``name`` (others paused meanwhile) with ``claim_due(batch)``,
    or, with ``one_by_one``, that many of them with single ``claim`` calls; and how many were claimed."""
    from django.db.models import Q
    from django.utils import timezone

    from rivet_workflows import models

    models.Actor.objects.update(lease_owner=None, lease_expires_at=None, paused_at=None)
    models.Actor.objects.filter(~Q(name=name)).update(paused_at=timezone.now())
    claimed = 0
    if one_by_one:
        ids = list(models.Actor.objects.filter(name=name).values_list("pk", flat=True)[:one_by_one])
        t0 = time.perf_counter()
        for actor_id in ids:
            claimed += store.claim(actor_id, "bench", 300) is not None
        return time.perf_counter() - t0, claimed
    t0 = time.perf_counter()
    while True:
        got = store.claim_due("bench", batch, 300)
        if not got:
            break
        claimed += len(got)
    return time.perf_counter() - t0, claimed


def p8_flow_claim(
    actors: int = 10000,
    batch: int = 100,
    rounds: int = 3,
    tenants: int = 1000,
    limit: int = 10,
    singles: int = 2000,
) -> dict[str, Any]:
    """The claim with flow limits vs without (DESIGN.md section 12): ``actors`` due actors of a plain type,
    of a type with ``Concurrency(limit, key=tenant)`` over ``tenants`` keys (``limit`` * ``tenants`` >=
    ``actors``: every actor is admitted, so both claim the same number and the ratio is the price of the
    check) and of that type with a ``RateLimit`` too. Each is claimed completely by ``claim_due(batch)``
    calls (the sweep's claim) ``rounds`` times, the kinds interleaved, the best round taken (the median is
    kept too; the best of several rounds also drops the cold first one); ``singles`` of them by ``claim`` (a run task's claim) likewise. Ratio limited / plain."""
    _django()
    from django.db import connection

    from rivet_workflows import models, storage
    from rivet_workflows.engine.model import ports

    store = storage.store_for()
    t0 = time.perf_counter()
    kinds = {
        "plain": lambda i: None,
        "limited": lambda i: ports.Flow(concurrency_key=f"t{i % tenants}", concurrency_limit=limit),
        "rated": lambda i: ports.Flow(
            concurrency_key=f"t{i % tenants}", concurrency_limit=limit, rate_count=10**6, rate_per=60.0
        ),
    }
    for name, flow in kinds.items():
        _due_rows(f"p8_{name}", actors, flow)
    with connection.cursor() as cur:
        cur.execute(f"ANALYZE {models.Actor._meta.db_table}")
    out: dict[str, Any] = {"actors": actors, "batch": batch, "tenants": tenants, "limit": limit}
    out["setup_seconds"] = time.perf_counter() - t0
    # Rounds interleave the kinds, and each kind's best round counts: the machine's other load (other
    # processes) then weighs on every kind alike instead of on whichever ran during a busy spell.
    times: dict[str, list[float]] = {name: [] for name in kinds}
    counts: dict[str, list[int]] = {name: [] for name in kinds}
    for _ in range(rounds):
        for name in kinds:
            models.FlowStart.objects.all().delete()
            seconds, claimed = _claim_everything(store, f"p8_{name}", batch)
            times[name].append(seconds)
            counts[name].append(claimed)
    for name in kinds:
        out[f"{name}_seconds"] = min(times[name])
        out[f"{name}_seconds_median"] = stats.percentile(times[name], 50)
        out[f"{name}_claimed"] = min(counts[name])
    singles_ms: dict[str, list[float]] = {name: [] for name in kinds}
    for _ in range(rounds):
        for name in kinds:
            models.FlowStart.objects.all().delete()
            seconds, claimed = _claim_everything(store, f"p8_{name}", batch, one_by_one=singles)
            singles_ms[name].append(seconds * 1000 / max(claimed, 1))
    for name in kinds:
        out[f"{name}_single_ms"] = min(singles_ms[name])
    out["limited_over_plain"] = out["limited_seconds"] / out["plain_seconds"]
    out["rated_over_plain"] = out["rated_seconds"] / out["plain_seconds"]
    out["single_limited_over_plain"] = out["limited_single_ms"] / out["plain_single_ms"]
    return out


def p5_timers(
    sleepers: int = 1000, seconds: float = 1.0, workers: int = 2, cap_seconds: float = 90.0
) -> dict[str, Any]:
    """``sleepers`` actors each sleep ``seconds``, run by ``workers`` Celery workers (the first runs the
    sweep); lateness p50/p99 of the step after the sleep. Timers not fired within ``cap_seconds`` after
    the last creation count as missed (``n`` < ``expected``)."""
    sock = _listener()
    os.environ["BENCH_REPORT_PORT"] = str(sock.getsockname()[1])
    os.environ["BENCH_TIMER_SECONDS"] = str(seconds)
    rw = _django()
    from rivet_workflows.conf import rivet_settings

    _flush_redis()
    with celery_workers(workers):
        client = rw.client()
        t0 = time.monotonic()
        for i in range(sleepers):
            client.bench_timer.create(f"p5-{i}")
        created = time.monotonic() - t0
        got = _receive(sock, sleepers, cap_seconds + seconds)
        span = time.monotonic() - t0
    result = stats.latency_summary([g["late"] for g in got if "late" in g])
    result["expected"] = sleepers
    result["workers"] = workers
    result["create_seconds"] = created
    # From the first create to the last timer firing; ideal is create_seconds + seconds. A timer waited
    # in memory holds its worker, so a long span here means sleeps were served one after another.
    result["span_seconds"] = span
    result["sweep_interval_ms"] = rivet_settings.get().SWEEP_INTERVAL * 1000
    return result


def _completion_rate(sock: socket.socket, total: int, window: float, ready: float) -> tuple[float, int]:
    """Actors finished per second from ``ready``: all ``total`` (rate up to the last), or those
    finished within ``window`` seconds (rate over the window)."""
    got = _receive(sock, total, window)
    end = time.monotonic() if len(got) == total else ready + window
    return len(got) / max(end - ready, 1e-9), len(got)


def p6_scale_out(actors: int = 1000, workers: int = 2, window: float = 30.0) -> dict[str, Any]:
    """``actors`` ten-step actors are created while no worker runs; then 1 worker process, and after it
    ``workers`` processes (solo pool each), run the due actors for at most ``window`` seconds each.

    Reports actors finished per second from the moment all workers are ready. The second round works
    on the actors the first round did not reach; finished ones are replaced by fresh ones first, so
    both rounds start from ``actors`` due actors.
    """
    sock = _listener()
    os.environ["BENCH_REPORT_PORT"] = str(sock.getsockname()[1])
    rw = _django()
    client = rw.client()
    out: dict[str, Any] = {"actors": actors, "window_seconds": window}
    made = 0
    finished = 0
    for n in (1, workers):
        _flush_redis()
        t0 = time.monotonic()
        while made - finished < actors:
            client.bench_sequential.create(f"p6-{made}")
            made += 1
        out[f"create_seconds_{n}"] = time.monotonic() - t0
        with celery_workers(n) as ready:
            rate, done = _completion_rate(sock, actors, window, ready)
        finished += done
        out[f"actors_per_s_{n}"] = rate
        out[f"finished_{n}"] = done
        time.sleep(0.5)
        while True:  # drop reports that raced the kill
            sock.settimeout(0.05)
            try:
                sock.recvfrom(65536)
            except TimeoutError:
                break
            finished += 1
    out["ratio"] = out[f"actors_per_s_{workers}"] / out["actors_per_s_1"]
    return out


def p7_throughput(
    workflows: int = 2000,
    processes: int = 2,
    concurrency: int = 8,
    cap_seconds: float = 120.0,
    single_process_workflows: int = 0,
) -> dict[str, Any]:
    """``workflows`` independent ten-step actors started at once: this process creates every actor (all
    due at once, their hints queued), then ``processes`` Celery workers, each running ``concurrency``
    actors at once, start. Steps/s from the moment every worker is ready to the last step of the last
    actor (creation not included: about one of the 13 transactions of a workflow). With ``single_process_workflows`` > 0 the same is measured
    first with one worker process (the scale-out ratio). Actors not finished within ``cap_seconds``
    count as missing (``finished`` < ``workflows``).
    """
    sock = _listener()
    os.environ["BENCH_REPORT_PORT"] = str(sock.getsockname()[1])
    rw = _django()
    from django.db import connection

    client = rw.client()
    steps = int(os.environ.get("BENCH_STEPS", "10"))
    out: dict[str, Any] = {
        "workflows": workflows,
        "processes": processes,
        "concurrency": concurrency,
        "steps_per_workflow": steps,
    }
    rounds = [(processes, workflows, "")]
    if single_process_workflows:
        rounds.insert(0, (1, single_process_workflows, "_1"))
    for n, count, suffix in rounds:
        _flush_redis()
        # Every actor is created (and due, its hint queued) before any worker runs: they all start at
        # once when the workers are ready, and creating them does not compete with the runs for the CPU.
        t0 = time.monotonic()
        for i in range(count):
            client.bench_parallel.create(f"p7{suffix}-{i}")
        created = time.monotonic() - t0
        connection.close()
        meter = pg.CommitMeter(DBNAME)
        meter.start()
        with celery_workers(n, concurrency=concurrency) as ready:
            w0 = time.time() - (time.monotonic() - ready)
            got = _receive(sock, count, cap_seconds)
            seconds = max((g["at"] for g in got), default=time.time()) - w0
        commits = meter.stop()
        out[f"create_seconds{suffix}"] = created
        out[f"seconds{suffix}"] = seconds
        out[f"finished{suffix}"] = len(got)
        out[f"expected{suffix}"] = count
        out[f"steps_per_s{suffix}"] = len(got) * steps / max(seconds, 1e-9)
        out[f"commits_per_step{suffix}"] = commits / max(1, len(got) * steps)
        if meter.wal_syncs:  # how many commits each WAL flush carried (PostgreSQL's group commit)
            out[f"commits_per_wal_flush{suffix}"] = commits / meter.wal_syncs
        time.sleep(0.3)
        while True:  # drop reports that raced the kill
            sock.settimeout(0.05)
            try:
                sock.recvfrom(65536)
            except TimeoutError:
                break
    if single_process_workflows:
        out["scale_out"] = out["steps_per_s"] / out["steps_per_s_1"]
    return out


def p9_streams(items: int = 2000, latency_items: int = 200, gap: float = 0.005) -> dict[str, Any]:
    """Durable streams (DESIGN.md section 17): items/s written by one step (``items`` writes, each committed
    on its own; best of 3 rounds), and the latency from a write to a reader in another process (``latency_items`` writes
    ``gap`` seconds apart; the reader, ``P9R``, waits on LISTEN/NOTIFY). Runs in-process with ``drain``."""
    rw = _django()
    from django.db import connection

    client = rw.client()
    client.bench_streamer.create("p9-warm", input={"items": 20, "gap": 0})
    _drain_all(rw, 60)
    rounds = []  # best of 3: each write is a commit, bound by the disk's flushes, which other load shares
    for n in range(3):
        writer = client.bench_streamer.create(f"p9-throughput-{n}", input={"items": items, "gap": 0})
        _drain_all(rw, 600)
        rounds.append(writer.record().output)
    seconds = min(rounds)
    handle = client.bench_streamer.create("p9-latency", input={"items": latency_items, "gap": gap})
    connection.close()
    reader = subprocess.Popen(
        [sys.executable, "-m", "bench.ours_side", "P9R", json.dumps({"actor_id": handle.actor_id})],
        cwd=proc.ROOT,
        env={**os.environ, "PYTHONPATH": str(proc.ROOT)},
        stdout=subprocess.PIPE,
        text=True,
    )
    line = reader.stdout.readline()
    if line.strip() != "READY":
        raise RuntimeError(f"the P9 reader did not start: {line!r}")
    time.sleep(0.5)  # the reader's first look found nothing and it waits
    _drain_all(rw, 600)
    out, _ = reader.communicate(timeout=120)
    marked = [ln for ln in out.splitlines() if ln.startswith(proc.MARK)]
    if reader.returncode != 0 or not marked:
        raise RuntimeError(f"the P9 reader exited {reader.returncode}")
    latency = json.loads(marked[-1][len(proc.MARK) :])
    return {
        "items": items,
        "write_seconds": seconds,
        "items_per_s": items / seconds,
        "items_per_s_rounds": [items / r for r in rounds],
        "latency_items": latency_items,
        "gap": gap,
        **latency,
    }


def p9_reader(actor_id: str) -> dict[str, Any]:
    """P9's reader process: follow the stream of ``actor_id`` until it closes; latency of each item."""
    rw = _django()
    handle = rw.client().bench_streamer.get_for_id(actor_id)
    samples = []
    print("READY", flush=True)
    for item in handle.read_stream("out", timeout=120):
        samples.append(time.time() - item.value)
    return stats.latency_summary(samples)


def p11_search(actors: int = 100000, matching: int = 100, rounds: int = 50) -> dict[str, Any]:
    """Listing by one search attribute (DESIGN.md section 19): ``actors`` actors, ``matching`` of them per
    value of ``customer`` (bulk-inserted rows, as ``ctx.set_attributes`` leaves them), then ``rounds`` calls
    of the store's ``find_actors`` for one customer's first 100 (what ``client().list_actors`` runs): median
    and p95 ms, and the ``EXPLAIN ANALYZE`` of the query, which should use ``rivet_actor_attributes_gin``."""
    _django()
    import uuid
    from datetime import timedelta

    from django.db import connection, transaction
    from django.utils import timezone

    from rivet_workflows import models, storage
    from rivet_workflows.engine.model import ports
    from rivet_workflows.storage import key_text

    t0 = time.perf_counter()
    customers = max(actors // matching, 1)
    start = timezone.now() - timedelta(days=1)
    rows = []
    for i in range(actors):
        key = [f"p9-{i}"]
        at = start + timedelta(seconds=i * 86400 / actors)
        rows.append(
            models.Actor(
                actor_id=uuid.uuid4().hex,
                name="bench_search",
                key=key,
                key_text=key_text(key),
                state={},
                workflow_state=("completed", "failed", "sleeping")[i % 3],
                created_at=at,
                updated_at=at,
                attributes={"customer": f"c-{i % customers}", "total": i % 1000, "region": f"r{i % 7}"},
            )
        )
        if len(rows) == 5000:
            with transaction.atomic():
                models.Actor.objects.bulk_create(rows)
            rows = []
    if rows:
        with transaction.atomic():
            models.Actor.objects.bulk_create(rows)
    with connection.cursor() as cur:
        cur.execute(f"ANALYZE {models.Actor._meta.db_table}")
    out: dict[str, Any] = {"actors": actors, "matching": matching, "setup_seconds": time.perf_counter() - t0}
    store = storage.store_for()
    times: list[float] = []
    found = 0
    for r in range(rounds):
        query = ports.ActorFilter(attributes={"customer": f"c-{(r * 37) % customers}"})
        t = time.perf_counter()
        found = len(store.find_actors(query, limit=100))
        times.append((time.perf_counter() - t) * 1000)
    out["found"] = found
    out["list_ms"] = stats.percentile(times, 50)
    out["list_ms_p95"] = stats.percentile(times, 95)
    query = ports.ActorFilter(attributes={"customer": "c-1"})
    plan = store._matching(query).order_by("created_at", "actor_id")[:100].explain(analyze=True)
    out["explain"] = plan
    out["uses_gin_index"] = "rivet_actor_attributes_gin" in plan
    return out


BENCHES = {
    "P9": p9_streams,
    "P9R": p9_reader,
    "P1": p1_sequential,
    "P2": p2_wake_latency,
    "P2G": p2_wake_latency,
    "P3": p3_replay,
    "P4": p4_idle,
    "P5": p5_timers,
    "P6": p6_scale_out,
    "P7": p7_throughput,
    "P8": p8_flow_claim,
    "P11": p11_search,
}

if __name__ == "__main__":
    proc.child_main(BENCHES)
