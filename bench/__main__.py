"""Run the benchmarks: ``python -m bench [--smoke] [--only P1,P2] [--skip-ours] [--skip-dbos]``.

Every benchmark runs our engine and its peer (DBOS Transact) in the same invocation against the same
PostgreSQL, prints a table and writes ``bench/results/<id>.json`` (plus ``summary.json``).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
import traceback
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from bench import pg, proc, report

# Scratch databases are named per run (pid) unless BENCH_DB_PREFIX is set, so two runs on one server
# (a developer's and CI's) never drop each other's databases.
PREFIX = os.environ.get("BENCH_DB_PREFIX", f"rivet_bench_{os.getpid()}")
OURS_DB = f"{PREFIX}_ours"
OURS_TEMPLATE = f"{PREFIX}_ours_template"
DBOS_DB = f"{PREFIX}_dbos"
REDIS_URL = os.environ.get("BENCH_REDIS_URL", "redis://127.0.0.1:6379/13")

FULL: dict[str, dict[str, Any]] = {
    "pgbench": {"seconds": 10},
    # the tracing + metrics overhead is a ratio of two in-process drains: 400 workflows each (about 5 s)
    # keep it steady now that 100 take a second
    "P1": {"ours": {"workflows": 200, "observed_workflows": 400}, "dbos": {"workflows": 200}},
    "P2": {"ours": {"messages": 200}, "dbos": {"messages": 200}},
    "P3": {"ours": {"iterations": 10000, "cap_seconds": 60.0}},
    "P4": {"ours": {"small": 10, "large": 10000, "rounds": 200}},
    "P5": {
        "ours": {"sleepers": 1000, "seconds": 1.0, "workers": 2, "cap_seconds": 40.0},
        "dbos": {"sleepers": 1000, "seconds": 1.0},
    },
    "P6": {"ours": {"actors": 1000, "workers": 2, "window": 30.0}},
    "P2G": {
        "ours": {"messages": 20, "gap": 1.0},
        "dbos": {"messages": 20, "gap": 1.0},
    },
    # P2G beside a CPU load the harness runs (LOAD_PROCESSES busy processes, one per core here)
    "P2GL": {
        "ours": {"messages": 40, "gap": 1.0},
        "dbos": {"messages": 40, "gap": 1.0},
    },
    "P7": {
        "ours": {
            "workflows": 2000,
            "processes": 2,
            "concurrency": 8,
            "single_process_workflows": 1000,
            "cap_seconds": 60.0,
        },
        "dbos": {"workflows": 2000, "processes": 2, "concurrency": 8},
    },
    "P8": {
        "ours": {"actors": 10000, "batch": 100, "rounds": 4, "tenants": 1000, "limit": 10, "singles": 500}
    },
    "P9": {
        "ours": {"items": 1000, "latency_items": 200, "gap": 0.005},
        "dbos": {"items": 1000, "latency_items": 200, "gap": 0.005},
    },
    "P11": {"ours": {"actors": 100000, "matching": 100, "rounds": 50}},
    # P7's load on one shard and on two (PostgreSQL clusters of its own), then the cross-shard send latency;
    # skipped until sharding (issue 25) is merged; not in the smoke run (it starts three clusters)
    "P10": {
        "ours": {"workflows": 2000, "processes": 2, "concurrency": 8, "cap_seconds": 90.0, "messages": 100}
    },
}
SMOKE: dict[str, dict[str, Any]] = {
    "pgbench": {"seconds": 1},
    "P1": {
        "ours": {"workflows": 5, "warmup": 1, "idle_window": 0, "observed_workflows": 3},
        "dbos": {"workflows": 5, "warmup": 1, "idle_window": 0},
    },
    "P2": {"ours": {"messages": 5, "idle_window": 0}, "dbos": {"messages": 5, "idle_window": 0}},
    "P3": {"ours": {"iterations": 60, "cap_seconds": 20.0}},
    "P4": {"ours": {"small": 3, "large": 20, "rounds": 5}},
    "P5": {
        "ours": {"sleepers": 4, "seconds": 1.0, "workers": 2, "cap_seconds": 15.0},
        "dbos": {"sleepers": 4, "seconds": 1.0},
    },
    "P6": {"ours": {"actors": 6, "workers": 2, "window": 15.0}},
    "P2G": {
        "ours": {"messages": 2, "gap": 1.0, "idle_window": 0},
        "dbos": {"messages": 2, "gap": 1.0, "idle_window": 0},
    },
    "P2GL": {
        "ours": {"messages": 2, "gap": 1.0, "idle_window": 0},
        "dbos": {"messages": 2, "gap": 1.0, "idle_window": 0},
    },
    "P7": {
        "ours": {"workflows": 20, "processes": 2, "concurrency": 2, "single_process_workflows": 10},
        "dbos": {"workflows": 20, "processes": 2, "concurrency": 2},
    },
    "P8": {"ours": {"actors": 200, "batch": 50, "rounds": 1, "tenants": 20, "limit": 10, "singles": 50}},
    "P9": {
        "ours": {"items": 20, "latency_items": 5, "gap": 0.005},
        "dbos": {"items": 20, "latency_items": 5, "gap": 0.005},
    },
    "P11": {"ours": {"actors": 2000, "matching": 20, "rounds": 5}},
}
ORDER = ["P1", "P2", "P2G", "P2GL", "P3", "P4", "P5", "P6", "P7", "P8", "P9", "P10", "P11"]
# Benchmarks whose "ours" side runs on servers of its own (bench/shards.py), not on the scratch database.
OWN_SERVERS = {"P10": "bench.shards"}


# P2GL's CPU load: this many processes spinning in a loop beside both sides (default: one per core).
LOAD_PROCESSES = int(os.environ.get("BENCH_LOAD_PROCESSES", str(os.cpu_count() or 2)))
# Benchmarks that run another one's workload under the harness's CPU load.
UNDER_LOAD = {"P2GL": "P2G"}


def cpu_load(processes: int) -> list[subprocess.Popen]:
    """Start ``processes`` interpreters that spin until killed (the "other work" of a loaded machine)."""
    return [
        subprocess.Popen([sys.executable, "-c", "while True: pass"], stdout=subprocess.DEVNULL)
        for _ in range(processes)
    ]


def stop(load: list[subprocess.Popen]) -> None:
    """Kill and reap the load processes of ``cpu_load``."""
    for child in load:
        child.kill()
    for child in load:
        child.wait()


def ours_env() -> dict[str, str]:
    """Environment of every "ours" child: bench settings, the scratch database and Redis database."""
    return {
        "DJANGO_SETTINGS_MODULE": "bench.django_settings",
        "DATABASE_URL": pg.url(OURS_DB),
        "REDIS_URL": REDIS_URL,
        "BENCH_OURS_DB": OURS_DB,
        "RIVET_LOG_LEVEL": "WARNING",
    }


def migrate_template() -> None:
    """Create the migrated template database (``manage.py migrate`` in a child, once per run).

    Raises ``RuntimeError`` with the command's output when migrate fails.
    """
    pg.create_database(OURS_TEMPLATE)
    env = {**os.environ, **ours_env(), "DATABASE_URL": pg.url(OURS_TEMPLATE)}
    done = subprocess.run(
        [sys.executable, "manage.py", "migrate", "--no-input", "-v", "0"],
        cwd=proc.ROOT,
        env=env,
        capture_output=True,
        text=True,
    )
    if done.returncode != 0:
        pg.drop_database(OURS_TEMPLATE)
        raise RuntimeError("manage.py migrate failed:\n" + (done.stderr or done.stdout)[-3000:])


def fresh_ours_db() -> None:
    """Recreate the "ours" database as a copy of the migrated template (migrating it first if needed)."""
    with pg.admin_connect() as conn:
        exists = conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", (OURS_TEMPLATE,)).fetchone()
    if not exists:
        migrate_template()
    pg.create_database(OURS_DB, template=OURS_TEMPLATE)


def run_side(side: str, bench: str, params: dict[str, Any], timeout: float) -> dict[str, Any]:
    """Run one side in a fresh database; returns its result, or ``{"status": "pending"|"error", ...}``."""
    t0 = time.monotonic()
    try:
        if side == "ours" and bench in OWN_SERVERS:
            env = {"REDIS_URL": REDIS_URL, "RIVET_LOG_LEVEL": "WARNING"}
            result = proc.run_child(OWN_SERVERS[bench], bench, params, env=env, timeout=timeout)
        elif side == "ours":
            fresh_ours_db()
            result = proc.run_child("bench.ours_side", bench, params, env=ours_env(), timeout=timeout)
        else:
            pg.create_database(DBOS_DB)
            result = proc.run_child(
                "bench.dbos_side", bench, params, env={"BENCH_DBOS_DB": DBOS_DB}, timeout=timeout
            )
        result.setdefault("status", "ok")
    except Exception as exc:  # one failing side must not hide the others' figures
        detail = "".join(traceback.format_exception_only(exc)).strip()
        pending = side == "ours" and any(
            marker in detail
            for marker in ("ImportError", "ModuleNotFoundError", "AttributeError", "NotImplementedError")
        )
        result = {"status": "pending" if pending else "error", "detail": detail[-3000:]}
    finally:
        if bench not in OWN_SERVERS:
            pg.drop_database(OURS_DB if side == "ours" else DBOS_DB)
    result["wall_seconds"] = time.monotonic() - t0
    return result


def main(argv: list[str] | None = None) -> int:
    """Parse arguments, run the selected benchmarks, print tables and write JSON; exit 1 on any error."""
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__)
    parser.add_argument("--smoke", action="store_true", help="tiny sizes (CI: keeps the harness alive)")
    parser.add_argument("--only", default="", help="comma-separated benchmark ids, e.g. P1,P2")
    parser.add_argument("--skip-ours", action="store_true")
    parser.add_argument("--skip-dbos", action="store_true")
    parser.add_argument(
        "--param",
        action="append",
        default=[],
        help="override a size of both sides, e.g. --param P7.concurrency=1 (repeatable; JSON values)",
    )
    parser.add_argument("--out", default=str(proc.ROOT / "bench" / "results"), help="JSON output folder")
    args = parser.parse_args(argv)
    sizes = json.loads(json.dumps(SMOKE if args.smoke else FULL))
    for item in args.param:
        target, _, value = item.partition("=")
        bench_id, _, key = target.partition(".")
        for side in sizes[bench_id.upper()].values():
            side[key] = json.loads(value)
    selected = [b.strip().upper() for b in args.only.split(",") if b.strip()] or ORDER
    left_out = [b for b in selected if b not in sizes]
    if left_out:  # P10 has no smoke sizes: it starts clusters of its own
        print(f"not run in this mode: {', '.join(left_out)}", flush=True)
        selected = [b for b in selected if b in sizes]
    timeout = 120.0 if args.smoke else 600.0
    os.makedirs(args.out, exist_ok=True)

    started = time.monotonic()
    pg.drop_database(OURS_TEMPLATE)  # migrations may have changed since the last run
    results: dict[str, Any] = {"mode": "smoke" if args.smoke else "full", "started": time.time()}
    if args.smoke:
        fresh_ours_db()  # migrate once up front, not inside a timed side
        pg.drop_database(OURS_DB)
    if "P1" in selected or "P7" in selected:
        p7 = sizes["P7"]["ours"] if "P7" in selected else {}
        clients = p7.get("processes", 0) * p7.get("concurrency", 0)
        try:
            results["limit"] = pg.pgbench_commit_rate(
                sizes["pgbench"]["seconds"], dbname=f"{PREFIX}_pgbench", clients=clients
            )
        except Exception as exc:
            results["limit"] = {"status": "error", "detail": str(exc)}
    for bench in selected:
        sides = [
            side
            for side in ("ours", "dbos")
            if side in sizes[bench]
            and not (side == "ours" and args.skip_ours)
            and not (side == "dbos" and args.skip_dbos)
        ]
        workload = UNDER_LOAD.get(bench, bench)
        load = cpu_load(LOAD_PROCESSES) if bench in UNDER_LOAD else []
        try:
            if args.smoke:
                # Smoke figures mean nothing, so the two sides run at the same time to keep CI short.
                with ThreadPoolExecutor(len(sides) or 1) as pool:
                    futures = {
                        side: pool.submit(run_side, side, workload, sizes[bench][side], timeout)
                        for side in sides
                    }
                entry: dict[str, Any] = {side: futures[side].result() for side in sides}
            else:
                entry = {side: run_side(side, workload, sizes[bench][side], timeout) for side in sides}
        finally:
            stop(load)
        if load:
            entry["load_processes"] = len(load)
        results[bench] = entry
        rows = report.rows_for(bench, entry, results.get("limit"))
        entry["rows"] = rows
        print(report.table(bench, rows, entry), flush=True)
        for side in sides:
            if entry[side].get("status") == "skipped":
                print(f"  {bench} {side}: skipped: {entry[side].get('detail', '')}", flush=True)
        with open(os.path.join(args.out, f"{bench}{'-smoke' if args.smoke else ''}.json"), "w") as fh:
            json.dump({"mode": results["mode"], "limit": results.get("limit"), **entry}, fh, indent=2)
    pg.drop_database(OURS_TEMPLATE)
    results["seconds"] = time.monotonic() - started
    with open(os.path.join(args.out, f"summary{'-smoke' if args.smoke else ''}.json"), "w") as fh:
        json.dump(results, fh, indent=2, default=str)
    suffix = "-smoke" if args.smoke else ""
    with open(os.path.join(args.out, f"table{suffix}.md"), "w") as fh:
        fh.write(report.markdown(results) + "\n")
    print(f"\nbench finished in {results['seconds']:.1f} s; JSON in {args.out}")
    errors = [
        f"{b}/{s}"
        for b in selected
        for s, r in results[b].items()
        if isinstance(r, dict) and r.get("status") == "error"
    ]
    if errors:
        print("errors in: " + ", ".join(errors), file=sys.stderr)
        for b in selected:
            for s, r in results[b].items():
                if isinstance(r, dict) and r.get("status") in ("error", "pending"):
                    print(f"--- {b}/{s} ({r['status']}):\n{r.get('detail', '')}", file=sys.stderr)
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
