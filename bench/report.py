"""Turn raw benchmark results into rows (ours, DBOS, limit, ratio, target) and plain-text tables."""

from __future__ import annotations

import math
from typing import Any

Row = dict[str, Any]


def _ok(side: dict[str, Any] | None) -> dict[str, Any] | None:
    return side if side and side.get("status", "ok") == "ok" else None


def _get(side: dict[str, Any] | None, key: str) -> float | None:
    side = _ok(side)
    value = side.get(key) if side else None
    return float(value) if isinstance(value, (int, float)) and not math.isnan(value) else None


def _div(a: float | None, b: float | None) -> float | None:
    return a / b if a is not None and b not in (None, 0) else None


def _sum(a: float | None, b: float | None) -> float | None:
    return a + b if a is not None and b is not None else None


def _row(
    metric: str,
    ours: float | None,
    dbos: float | None = None,
    limit: float | None = None,
    ratio: float | None = None,
    target: str = "",
    met: bool | None = None,
) -> Row:
    return {
        "metric": metric,
        "ours": ours,
        "dbos": dbos,
        "limit": limit,
        "ratio": ratio,
        "target": target,
        "met": met,
    }


def _cmp(value: float | None, op: str, bound: float) -> bool | None:
    if value is None:
        return None
    return value >= bound if op == ">=" else value <= bound


def rows_for(bench: str, entry: dict[str, Any], limit: dict[str, Any] | None) -> list[Row]:
    """Rows for benchmark ``bench`` from ``entry`` = ``{"ours": result, "dbos": result}``.

    ``limit`` is ``pg.pgbench_commit_rate`` output (P1 only). Missing or failed sides give ``None`` cells.
    """
    ours, dbos = entry.get("ours"), entry.get("dbos")
    if bench == "P1":
        commit_tps = _get(limit, "insert_tps")
        steps = _get(ours, "steps_per_workflow") or _get(dbos, "steps_per_workflow") or 10
        o_wf, d_wf = _get(ours, "workflows_per_s"), _get(dbos, "workflows_per_s")
        o_steps = _get(ours, "steps_per_s")
        limit_wf = _div(commit_tps, steps)
        vs_dbos = _div(o_wf, d_wf)
        vs_limit = _div(o_steps, commit_tps)
        o_cps = _get(ours, "commits_per_step")
        o_marginal = _get(ours, "marginal_commits_per_step")
        d_cpw = _get(dbos, "commits_per_workflow")
        return [
            _row(
                "workflows/s (10 steps)",
                o_wf,
                d_wf,
                limit_wf,
                vs_dbos,
                ">= 1.5x DBOS",
                _cmp(vs_dbos, ">=", 1.5),
            ),
            _row(
                "steps/s vs commit limit",
                o_steps,
                _get(dbos, "steps_per_s"),
                commit_tps,
                vs_limit,
                ">= 0.5 of limit",
                _cmp(vs_limit, ">=", 0.5),
            ),
            _row(
                "process CPU ms per step (create + drain)",
                _get(ours, "cpu_ms_per_step"),
                _get(dbos, "cpu_ms_per_step"),
                None,
                _div(_get(ours, "cpu_ms_per_step"), _get(dbos, "cpu_ms_per_step")),
            ),
            _row(
                "transactions per step",
                o_cps,
                _get(dbos, "commits_per_step"),
                1.0,
                o_cps,
                "<= 1",
                _cmp(o_cps, "<=", 1.0),
            ),
            _row(
                f"marginal transactions per step ({2 * int(steps)} vs {int(steps)} steps)",
                o_marginal,
                None,
                1.0,
                o_marginal,
                "<= 1",
                _cmp(o_marginal, "<=", 1.0),
            ),
            _row("transactions per workflow", _get(ours, "commits_per_workflow"), d_cpw),
            _row("connections opened", _get(ours, "connections_opened"), _get(dbos, "connections_opened")),
            _row("engine-only workflows/s (memory store)", _get(ours, "memory_workflows_per_s")),
            _row(
                "workflows/s with tracing + metrics on (limit: off)",
                _get(ours, "workflows_per_s_observed_on"),
                None,
                _get(ours, "workflows_per_s_observed_off"),
                _get(ours, "observed_ratio"),
                ">= 0.9",
                _cmp(_get(ours, "observed_ratio"), ">=", 0.9),
            ),
        ]
    if bench == "P7":
        o_steps, d_steps = _get(ours, "steps_per_s"), _get(dbos, "steps_per_s")
        multi = _get(limit, "insert_tps_multi")
        clients = _get(limit, "multi_clients")
        vs_dbos, vs_limit = _div(o_steps, d_steps), _div(o_steps, multi)
        scale = _get(ours, "scale_out")
        procs, conc = _fmt(_get(ours, "processes")), _fmt(_get(ours, "concurrency"))
        return [
            _row(
                "workflows finished / started",
                _div(_get(ours, "finished"), _get(ours, "expected")),
                _div(_get(dbos, "finished"), _get(dbos, "workflows")),
                1.0,
            ),
            _row(
                f"steps/s ({procs} processes x {conc} concurrent), vs DBOS",
                o_steps,
                d_steps,
                None,
                vs_dbos,
                ">= 2x DBOS",
                _cmp(vs_dbos, ">=", 2.0),
            ),
            _row(
                f"steps/s vs pgbench commit rate at {_fmt(clients)} clients",
                o_steps,
                d_steps,
                multi,
                vs_limit,
                ">= 0.5 of limit",
                _cmp(vs_limit, ">=", 0.5),
            ),
            _row(
                "steps/s, 1 process / 2 processes",
                _get(ours, "steps_per_s_1"),
                None,
                None,
                scale,
                ">= 1.6x",
                _cmp(scale, ">=", 1.6),
            ),
            _row("transactions per step", _get(ours, "commits_per_step"), _get(dbos, "commits_per_step")),
            _row(
                "transactions per WAL flush (group commit)",
                _get(ours, "commits_per_wal_flush"),
                _get(dbos, "commits_per_wal_flush"),
            ),
            _row("s to create every actor (before the measure)", _get(ours, "create_seconds")),
        ]
    if bench == "P2GL":
        o50, d50 = _get(ours, "p50_ms"), _get(dbos, "p50_ms")
        o99, d99 = _get(ours, "p99_ms"), _get(dbos, "p99_ms")
        r99 = _div(o99, d99)
        label = f"wake latency under load ({entry.get('load_processes', '?')} busy processes)"
        return [
            _row(f"{label} p50 ms", o50, d50, None, _div(o50, d50)),
            _row(f"{label} p99 ms", o99, d99, None, r99, "ours/DBOS <= 3.0", _cmp(r99, "<=", 3.0)),
        ]
    if bench in ("P2", "P2G", "P5"):
        o50, d50 = _get(ours, "p50_ms"), _get(dbos, "p50_ms")
        o99, d99 = _get(ours, "p99_ms"), _get(dbos, "p99_ms")
        if bench in ("P2", "P2G"):
            r50 = _div(o50, d50)
            label = "wake latency" + (" (1 s gap: released actor)" if bench == "P2G" else "")
            return [
                _row(f"{label} p50 ms", o50, d50, None, r50, "ours/DBOS <= 1.0", _cmp(r50, "<=", 1.0)),
                _row(f"{label} p99 ms", o99, d99, None, _div(o99, d99)),
                _row(
                    "transactions per message",
                    _get(ours, "commits_per_message"),
                    _get(dbos, "commits_per_message"),
                ),
            ]
        bound = (_get(ours, "sweep_interval_ms") or 1000.0) + 50.0
        received = _get(ours, "n")
        expected = _get(ours, "expected")
        return [
            _row("timer lateness p50 ms", o50, d50, None, _div(o50, d50)),
            _row(
                "timer lateness p99 ms",
                o99,
                d99,
                bound,
                _div(o99, bound),
                f"<= {bound:.0f} ms",
                _cmp(o99, "<=", bound),
            ),
            _row(
                "timers fired / started",
                _div(received, expected),
                None,
                1.0,
                None,
                "= 1",
                None if received is None else received == expected,
            ),
            _row(
                "s from first create to last fire",
                _get(ours, "span_seconds"),
                None,
                _sum(_get(ours, "create_seconds"), _get(ours, "sleep_seconds") or 1.0),
            ),
        ]
    if bench == "P9":
        rate_o, rate_d = _get(ours, "items_per_s"), _get(dbos, "items_per_s")
        o50, d50 = _get(ours, "p50_ms"), _get(dbos, "p50_ms")
        o99, d99 = _get(ours, "p99_ms"), _get(dbos, "p99_ms")
        r_rate, r50 = _div(rate_o, rate_d), _div(o50, d50)
        return [
            _row(
                "items/s written by one step",
                rate_o,
                rate_d,
                None,
                r_rate,
                ">= 1x DBOS",
                _cmp(r_rate, ">=", 1.0),
            ),
            _row(
                "write -> reader (other process) p50 ms",
                o50,
                d50,
                None,
                r50,
                "ours/DBOS <= 1.0",
                _cmp(r50, "<=", 1.0),
            ),
            _row("write -> reader p99 ms", o99, d99, None, _div(o99, d99)),
            _row("items the reader got", _get(ours, "n"), _get(dbos, "n")),
        ]
    if bench == "P3":
        ratio = _get(ours, "end_over_start")
        rows = _get(ours, "history_rows")
        prune = _get(ours, "prune_interval") or 20
        bound = 2 * prune + 1
        return [
            _row("iterations run", _get(ours, "iterations_done"), None, _get(ours, "iterations")),
            _row("iteration ms (median) at start", _get(ours, "iteration_ms_start")),
            _row(
                "iteration ms (median) at end",
                _get(ours, "iteration_ms_end"),
                None,
                None,
                ratio,
                "end/start <= 1.2",
                _cmp(ratio, "<=", 1.2),
            ),
            _row("iteration CPU ms at start", _get(ours, "cpu_ms_start")),
            _row(
                "iteration CPU ms at end",
                _get(ours, "cpu_ms_end"),
                None,
                None,
                _get(ours, "cpu_end_over_start"),
                "end/start <= 1.2",
                _cmp(_get(ours, "cpu_end_over_start"), "<=", 1.2),
            ),
            _row("SQL statements per iteration at start", _get(ours, "sql_per_iteration_start")),
            _row("SQL statements per iteration at end", _get(ours, "sql_per_iteration_end")),
            _row("ms in SQL per iteration at start", _get(ours, "sql_ms_start")),
            _row(
                "ms in SQL per iteration at end",
                _get(ours, "sql_ms_end"),
                None,
                None,
                _get(ours, "sql_end_over_start"),
            ),
            _row("engine-only CPU ms/iteration (memory store), start", _get(ours, "memory_cpu_ms_start")),
            _row(
                "engine-only CPU ms/iteration (memory store), end",
                _get(ours, "memory_cpu_ms_end"),
                None,
                None,
                _get(ours, "memory_end_over_start"),
                "end/start <= 1.2",
                _cmp(_get(ours, "memory_end_over_start"), "<=", 1.2),
            ),
            _row("history rows at end", rows, None, bound, None, f"<= {bound:.0f}", _cmp(rows, "<=", bound)),
        ]
    if bench == "P10":
        one, two = _get(ours, "steps_per_s_1"), _get(ours, "steps_per_s_2")
        procs, conc = _fmt(_get(ours, "processes")), _fmt(_get(ours, "concurrency"))
        c50, s50 = _get(ours, "cross_p50_ms"), _get(ours, "same_p50_ms")
        c99, s99 = _get(ours, "cross_p99_ms"), _get(ours, "same_p99_ms")
        return [
            _row(
                "workflows finished / started, 1 shard",
                _div(_get(ours, "finished_1"), _get(ours, "expected_1")),
                None,
                1.0,
            ),
            _row(
                "workflows finished / started, 2 shards",
                _div(_get(ours, "finished_2"), _get(ours, "expected_2")),
                None,
                1.0,
            ),
            _row(f"steps/s, 1 shard (P7's load: {procs} processes x {conc} concurrent)", one),
            _row("steps/s, 2 shards (two clusters), ratio to 1 shard", two, None, None, _div(two, one)),
            # limit: the same send between two actors of one shard, measured at the same time
            _row(
                "send latency across shards p50 ms (limit: within one shard)", c50, None, s50, _div(c50, s50)
            ),
            _row(
                "send latency across shards p99 ms (limit: within one shard)", c99, None, s99, _div(c99, s99)
            ),
        ]
    if bench == "P11":
        ms = _get(ours, "list_ms")
        uses = None if not ours or "uses_gin_index" not in ours else bool(ours["uses_gin_index"])
        n = _fmt(_get(ours, "actors"))
        return [
            _row(
                f"list 100 of {n} actors by one attribute, ms (median)",
                ms,
                None,
                20,
                None,
                "<= 20 ms",
                _cmp(ms, "<=", 20),
            ),
            _row("same, ms (p95)", _get(ours, "list_ms_p95")),
            _row(
                "EXPLAIN shows the GIN index",
                None if uses is None else float(uses),
                None,
                None,
                None,
                "yes",
                uses,
            ),
        ]
    if bench == "P8":
        ratio = _get(ours, "limited_over_plain")
        n = _fmt(_get(ours, "actors"))
        return [
            _row(f"claim_due of {n} due actors, no limits, s (best round)", _get(ours, "plain_seconds")),
            _row(
                f"claim_due of {n} due actors, Concurrency(limit, key) on {_fmt(_get(ours, 'tenants'))} keys, s",
                _get(ours, "limited_seconds"),
                None,
                None,
                ratio,
                "limited/plain <= 1.2",
                _cmp(ratio, "<=", 1.2),
            ),
            _row(
                "claim_due, Concurrency and RateLimit, s",
                _get(ours, "rated_seconds"),
                None,
                None,
                _get(ours, "rated_over_plain"),
            ),
            _row(
                "single claim ms, limited (ratio vs plain)",
                _get(ours, "limited_single_ms"),
                None,
                _get(ours, "plain_single_ms"),
                _get(ours, "single_limited_over_plain"),
            ),
        ]
    if bench == "P4":
        ratio = _get(ours, "large_over_small")
        msgs = _get(ours, "messages_large")
        return [
            _row(
                f"sweep ms (median), {_fmt(_get(ours, 'sleepers_small'))} sleepers",
                _get(ours, "sweep_ms_small"),
            ),
            _row(
                f"sweep ms (median), {_fmt(_get(ours, 'sleepers_large'))} sleepers",
                _get(ours, "sweep_ms_large"),
                None,
                None,
                ratio,
                "large/small <= 1.5",
                _cmp(ratio, "<=", 1.5),
            ),
            _row(
                "broker messages by sweeps", msgs, None, 0, None, "= 0", None if msgs is None else msgs == 0
            ),
        ]
    if bench == "P6":
        ratio = _get(ours, "ratio")
        return [
            _row("actors finished, 1 worker", _get(ours, "finished_1"), None, _get(ours, "actors")),
            _row("actors/s, 1 worker", _get(ours, "actors_per_s_1")),
            _row(
                "actors/s, 2 workers",
                _get(ours, "actors_per_s_2"),
                None,
                None,
                ratio,
                ">= 1.6x",
                _cmp(ratio, ">=", 1.6),
            ),
        ]
    return []


def _fmt(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        if value == int(value) and abs(value) >= 10:
            return f"{int(value)}"
        return f"{value:.3g}" if abs(value) < 100 else f"{value:.0f}"
    return str(value)


def _status(entry_side: dict[str, Any] | None) -> str:
    if entry_side is None:
        return "n/a"
    return entry_side.get("status", "ok")


def table(bench: str, rows: list[Row], entry: dict[str, Any] | None = None) -> str:
    """A fixed-width text table of ``rows`` headed by the benchmark id."""
    head = ["metric", "ours", "DBOS", "limit", "ratio", "target", "met"]
    body = [
        [
            r["metric"],
            _fmt(r["ours"]),
            _fmt(r["dbos"]),
            _fmt(r["limit"]),
            _fmt(r["ratio"]),
            r["target"],
            {True: "yes", False: "NO", None: "-"}[r["met"]],
        ]
        for r in rows
    ]
    widths = [max(len(str(x)) for x in col) for col in zip(head, *body, strict=False)]
    lines = [f"\n{bench}"]
    if entry:
        lines[0] += "  (" + ", ".join(f"{s}: {_status(entry.get(s))}" for s in ("ours", "dbos")) + ")"
    lines.append("  ".join(h.ljust(w) for h, w in zip(head, widths, strict=False)))
    lines.append("  ".join("-" * w for w in widths))
    lines += ["  ".join(str(c).ljust(w) for c, w in zip(row, widths, strict=False)) for row in body]
    return "\n".join(lines)


def markdown(results: dict[str, Any]) -> str:
    """A Markdown table of every benchmark in ``results`` (for the manual's docs/explanation/benchmarks.md)."""
    out = [
        "| bench | metric | ours | DBOS | limit | ratio | target | met |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for bench in ("P1", "P2", "P2G", "P2GL", "P3", "P4", "P5", "P6", "P7", "P8", "P9", "P10", "P11"):
        for r in (results.get(bench) or {}).get("rows", []):
            out.append(
                f"| {bench} | {r['metric']} | {_fmt(r['ours'])} | {_fmt(r['dbos'])} | {_fmt(r['limit'])} | "
                f"{_fmt(r['ratio'])} | {r['target']} | {({True: 'yes', False: 'no', None: '-'})[r['met']]} |"
            )
    return "\n".join(out)
