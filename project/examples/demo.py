"""The demo (``manage.py rivet demo``, ``make demo``): the spec's examples through a real Celery worker.

What it does, in order (every wait is bounded; it exits 1 with a message when something is late):

1. starts the fake HTTP service the examples call, and a Celery worker subprocess with beat embedded
   (``celery -A project worker -B --pool=threads``) on the project's database and broker (SQLite and the
   filesystem broker by default; PostgreSQL/Redis with ``DATABASE_URL``/``REDIS_URL``);
2. starts the crash scenarios (``crash``; ``shop``, whose atomic step placed a ``shop.Order`` row;
   ``agent``, a pydantic-ai agent streaming its answer) and SIGKILLs the worker (its whole process group)
   while the workflows are inside their slow steps, then starts a new worker;
3. starts every other scenario (``scenarios.enabled()``), sending real messages through the client, and
   prints progress until each reaches its expected end state;
4. prints each actor's final state and a trace read from history (step, status, attempts, duration) and a
   summary table; exit status 0 only if every scenario reached its expected state.

Options: ``--timeout S`` (whole demo, default 180), ``--only a,b`` (scenario names), ``--no-crash``,
``--keep`` (keep the demo actors, and the helper actors their workflows created, for the admin inspector
instead of destroying them),
``--lease-seconds S`` (worker lease, default 6: how soon the new worker takes over the crashed run).
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from datetime import datetime
from pathlib import Path
from typing import Any

from rivet_workflows.engine.model import ports
from rivet_workflows.engine.operate import inspector
from rivet_workflows.testing import GroupProcess

from . import before_deploy, fake_service, scenarios

BASE_DIR = Path(__file__).resolve().parent.parent.parent
POLL = 0.25


def _say(msg: str = "") -> None:
    print(msg, flush=True)


class Worker(GroupProcess):
    """One Celery worker subprocess with beat (own process group, so a SIGKILL takes its beat child along)."""

    def __init__(self, number: int, env: dict[str, str], log_dir: Path) -> None:
        self.number = number
        cmd = [
            sys.executable,
            "-m",
            "celery",
            "-A",
            "project",
            "worker",
            "-B",
            "-s",
            str(log_dir / f"demo-beat-{number}"),
            "--pool=threads",
            "--concurrency=8",
            "-n",
            f"demo{number}-{os.getpid()}@%h",
            "-l",
            "WARNING",
        ]
        log_path = log_dir / f"demo-worker-{number}.log"
        super().__init__(f"worker-{number}", cmd, env=env, log_path=log_path, cwd=BASE_DIR)

    def stop(self, grace: float = 8.0) -> None:
        """SIGTERM (warm shutdown), then SIGKILL after ``grace`` seconds."""
        super().stop(grace)

    def tail(self, lines: int = 15) -> str:
        """The last ``lines`` lines of this worker's log."""
        return super().tail(lines)


def _parse(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="rivet demo", description=__doc__.splitlines()[0])
    parser.add_argument("--timeout", type=float, default=180.0, help="seconds the whole demo may take")
    parser.add_argument("--only", default="", help="comma-separated scenario names")
    parser.add_argument("--no-crash", action="store_true", help="do not kill the worker")
    parser.add_argument("--keep", action="store_true", help="keep the demo actors (for the admin inspector)")
    parser.add_argument("--lease-seconds", type=float, default=6.0, help="worker lease length")
    argv = list(argv or [])
    if argv[:1] == ["--"]:  # manage.py rivet demo -- --only a,b
        argv = argv[1:]
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    """Run the demo; returns the exit status (0 = every scenario reached its expected state)."""
    args = _parse(argv)
    chosen = scenarios.enabled()
    if args.only:
        names = [n.strip() for n in args.only.split(",") if n.strip()]
        unknown = [n for n in names if n not in scenarios.SCENARIOS]
        if unknown:
            _say(f"unknown scenario(s): {', '.join(unknown)}; known: {', '.join(scenarios.SCENARIOS)}")
            return 2
        chosen = [scenarios.SCENARIOS[n] for n in names]
    return Demo(args, chosen).run()


class Demo:
    """One demo run (see the module docstring)."""

    def __init__(self, args: argparse.Namespace, chosen: list[scenarios.Scenario]) -> None:
        self.args = args
        self.chosen = chosen
        self.suffix = datetime.now().strftime("%H%M%S")
        self.service = fake_service.FakeService()
        self.workers: list[Worker] = []
        self.runs: dict[str, scenarios.ScenarioRun] = {}
        self.started: dict[str, float] = {}
        self.finished: dict[str, float] = {}
        self.failed: dict[str, str] = {}
        self.crashes: list[str] = []
        self.t0 = time.monotonic()

    # --- helpers ------------------------------------------------------------------------------------

    def elapsed(self) -> float:
        return time.monotonic() - self.t0

    def log(self, msg: str) -> None:
        _say(f"[{self.elapsed():6.1f}s] {msg}")

    def start_worker(self, registry: str | None = None) -> Worker:
        env = dict(os.environ)
        if registry:
            env["RIVET_REGISTRY"] = registry
        env["RIVET_LEASE_SECONDS"] = str(self.args.lease_seconds)
        env.setdefault("RIVET_LOG_LEVEL", "WARNING")
        env["PYTHONUNBUFFERED"] = "1"
        log_dir = Path(os.environ.get("RIVET_VAR_DIR", BASE_DIR / "var"))
        log_dir.mkdir(parents=True, exist_ok=True)
        worker = Worker(len(self.workers) + 1, env, log_dir)
        self.workers.append(worker)
        code = " with the code before the deploy" if registry else ""
        self.log(f"started Celery worker #{worker.number}{code} (pid {worker.pid}, log {worker.log_path})")
        return worker

    def start_scenario(self, scenario: scenarios.Scenario) -> None:
        run = scenarios.ScenarioRun(scenario, self.client, self.store, self.service, self.suffix)
        self.runs[scenario.name] = run
        self.started[scenario.name] = time.monotonic()
        try:
            scenario.start(run)
        except Exception as exc:
            self.failed[scenario.name] = f"start failed: {type(exc).__name__}: {exc}"
            self.log(f"FAIL  {scenario.name}: {self.failed[scenario.name]}")
            return
        self.log(f"start {scenario.name}: {scenario.title}")

    def poll(self) -> None:
        """Check every running scenario once; record finished and timed-out ones."""
        for name, run in self.runs.items():
            if name in self.finished or name in self.failed:
                continue
            problems = run.check()
            took = time.monotonic() - self.started[name]
            broken = run.broken() if problems else None
            if broken:
                self.failed[name] = broken
                self.log(f"FAIL  {name}: {broken}")
            elif not problems:
                self.finished[name] = took
                self.log(f"done  {name} ({took:.1f}s)")
            elif took > run.scenario.timeout:
                self.failed[name] = "; ".join(problems)
                self.log(f"FAIL  {name}: not reached after {took:.0f}s: {self.failed[name]}")

    def pending(self) -> list[str]:
        return [n for n in self.runs if n not in self.finished and n not in self.failed]

    # --- the run ------------------------------------------------------------------------------------

    def run(self) -> int:
        from rivet_workflows.django_runtime import get_runtime

        runtime = get_runtime()
        self.registry = runtime.registry
        self.client = runtime.registry.client()
        self.store = runtime.store
        self.started_at = self.store.now()  # database clock: helper actors created after it are the demo's
        url = self.service.start()
        _say("rivet_workflows demo: the spec's examples on a real Celery worker")
        _say(f"  database: {_database_label()}   broker: {_broker_label()}")
        _say(f"  fake HTTP service: {url}   actor keys end with -{self.suffix}")
        _say(f"  scenarios: {', '.join(s.name for s in self.chosen)}")
        if scenarios.LATER_SCENARIOS:
            _say(f"  not run yet (need a later engine issue): {', '.join(scenarios.LATER_SCENARIOS)}")
        _say()
        try:
            return self._run()
        except KeyboardInterrupt:
            self.log("interrupted")
            return 130
        finally:
            for worker in self.workers:
                worker.stop()
            if self.args.keep:
                _say("kept the demo actors: open /admin/rivet_workflows/actor/ (python manage.py runserver)")
            else:
                self._destroy_actors()
            self.service.stop()

    def _run(self) -> int:
        deadline = self.t0 + self.args.timeout
        crashes = [s for s in self.chosen if s.crash_point is not None]
        deploys = [s for s in self.chosen if s.deploy_point is not None]
        first = crashes + deploys
        rest = [s for s in self.chosen if s not in first]
        # the first worker runs the code "before the deploy" when a deploy scenario is chosen
        self.start_worker(registry=before_deploy.REGISTRY_PATH if deploys else None)
        if crashes and not self.args.no_crash:
            # every crash and deploy scenario must be at its point when the worker is killed: start those
            # whose point lasts longest first (a head start, then slow steps of seconds) and the deploy
            # scenarios, whose point lasts about a second (a loop's idle sleep), last
            leads = [s for s in crashes if s.lead_point is not None]
            self._start_and_wait(leads, "lead_point", deadline)
            self._start_and_wait([s for s in crashes if s not in leads], "crash_point", deadline)
            for scenario in deploys:
                self.start_scenario(scenario)
        else:
            for scenario in first:
                self.start_scenario(scenario)
        if first:
            self._restart_phase(crashes, deploys, deadline)
        for scenario in rest:
            self.start_scenario(scenario)
        last_report = 0.0
        while self.pending() and time.monotonic() < deadline:
            self.poll()
            if not self.workers[-1].alive():
                self.log("the worker exited unexpectedly; its log ends with:\n" + self.workers[-1].tail())
                self.start_worker()
            if time.monotonic() - last_report > 5 and self.pending():
                last_report = time.monotonic()
                self.log(
                    f"{len(self.finished)}/{len(self.runs)} done; waiting for {', '.join(self.pending())}"
                )
            time.sleep(POLL)
        for name in self.pending():
            problems = self.runs[name].check()
            self.failed[name] = "demo timeout; " + ("; ".join(problems) or "?")
        self.report()
        ok = not self.failed and len(self.finished) == len(self.chosen)
        _say()
        _say("ALL SCENARIOS REACHED THEIR EXPECTED STATE" if ok else "SOME SCENARIOS FAILED")
        if not ok:
            _say(f"worker log: {self.workers[-1].log_path}\n{self.workers[-1].tail()}")
        return 0 if ok else 1

    def _start_and_wait(self, chosen: list[scenarios.Scenario], point: str, deadline: float) -> None:
        """Start ``chosen`` and wait (at most 30 s) until each reached its ``point`` (a Scenario field)."""
        for scenario in chosen:
            self.start_scenario(scenario)
        limit = min(deadline, time.monotonic() + 30)
        while chosen and time.monotonic() < limit:
            if all(s.name in self.failed or self._reached(s, getattr(s, point)) for s in chosen):
                return
            time.sleep(0.05)
        if chosen:
            self.log(f"{', '.join(s.name for s in chosen)}: {point} not reached in time; going on")

    def _reached(self, scenario: scenarios.Scenario, point: Any) -> bool:
        try:
            return bool(point(self.runs[scenario.name]))
        except Exception:  # not readable yet
            return False

    def _restart_phase(
        self, crashes: list[scenarios.Scenario], deploys: list[scenarios.Scenario], deadline: float
    ) -> None:
        """Wait until every crash scenario is inside its slow step and every deploy scenario reached its
        deploy point, then replace the worker: SIGKILL (a crash), or SIGTERM when crashing is off."""
        kill = bool(crashes) and not self.args.no_crash
        if not kill and not deploys:
            return
        waiting = (crashes if kill else []) + deploys
        limit = min(deadline, time.monotonic() + 60)
        while time.monotonic() < limit:
            reached = [s for s in waiting if s.name not in self.failed and self._at_point(s)]
            if len(reached) == len([s for s in waiting if s.name not in self.failed]):
                break
            if not self.workers[-1].alive():
                self.log(
                    "the worker exited before the crash point; its log ends with:\n" + self.workers[-1].tail()
                )
                break
            time.sleep(0.05)
        else:
            self.log("the crash/deploy point was not reached in time; replacing the worker anyway")
        worker = self.workers[-1]
        if kill:
            worker.kill()
            names = " and ".join(repr(s.name) for s in crashes)
            msg = f"SIGKILLed worker #{worker.number} (pid {worker.pid}) while {names} were inside their slow steps"
            self.crashes.append(msg)
            self.log(msg)
        else:
            worker.stop()
            self.log(f"stopped worker #{worker.number}")
        self.start_worker()
        if deploys:
            self.log("the new worker runs the current code: this restart is also a deploy")
        if kill:
            self.log(
                f"it takes the crashed run over once the dead worker's lease ({self.args.lease_seconds:g}s) expires"
            )

    def _at_point(self, scenario: scenarios.Scenario) -> bool:
        point = scenario.crash_point or scenario.deploy_point
        try:
            return bool(point and point(self.runs[scenario.name]))
        except Exception:  # not readable yet
            return False

    # --- output -------------------------------------------------------------------------------------

    def report(self) -> None:
        _say()
        _say("=" * 100)
        _say("Final state and trace of every demo actor")
        _say("=" * 100)
        for name, run in self.runs.items():
            for label, handle in run.handles.items():
                try:
                    record = self.store.get_actor(handle.actor_id)
                    entries = self.store.load_history(handle.actor_id)
                except Exception as exc:
                    _say(f"\n{name}/{label}: cannot read ({type(exc).__name__}: {exc})")
                    continue
                _say(f"\n{handle.name} {record.key}  workflow: {record.workflow_state}")
                if record.workflow_state not in ports.FINISHED_STATES:
                    why = run.scenario.still_running.get(label)
                    _say(f"  still running, as expected: {why}" if why else "  still running: NOT expected")
                _say(f"  state: {_short(record.state, 200)}")
                if record.error:
                    _say(f"  error: {_short(record.error.get('message'), 200)}")
                for line in format_trace(entries):
                    _say("  " + line)
        if "crash" in self.runs:
            self._crash_report(self.runs["crash"])
        if "shop" in self.runs:
            self._shop_report(self.runs["shop"])
        if "agent" in self.runs:
            self._agent_report(self.runs["agent"])
        _say()
        _say("=" * 100)
        _say(f"{'scenario':<18} {'result':<7} {'time':>7}  detail")
        _say("-" * 100)
        for name, run in self.runs.items():
            if name in self.finished:
                _say(f"{name:<18} {'ok':<7} {self.finished[name]:>6.1f}s  {run.scenario.title}")
            else:
                _say(f"{name:<18} {'FAILED':<7} {'':>7}  {_short(self.failed.get(name, '?'), 70)}")
        _say("-" * 100)
        _say(
            f"{len(self.finished)}/{len(self.chosen)} scenarios ok in {self.elapsed():.1f}s; "
            f"{len(self.crashes)} worker crash(es); {len(self.workers)} worker(s) started"
        )

    def _crash_report(self, run: scenarios.ScenarioRun) -> None:
        counts = {
            n: scenarios._crash_count(run, n)
            for n in ("prepare", "slow-work:start", "slow-work:done", "finish")
        }
        _say()
        _say("Crash recovery (side effects counted by the fake service, which outlived the worker):")
        _say(f"  prepare ran {counts['prepare']}x (completed before the crash: not re-run)")
        _say(
            f"  slow-work started {counts['slow-work:start']}x, finished {counts['slow-work:done']}x "
            "(the killed attempt is retried)"
        )
        _say(f"  finish ran {counts['finish']}x")

    def _shop_report(self, run: scenarios.ScenarioRun) -> None:
        try:
            orders, ships = scenarios.shop_orders(run), scenarios._ship_count(run)
        except Exception as exc:  # the report is best effort
            _say(f"\nShop order: cannot read ({type(exc).__name__}: {exc})")
            return
        _say()
        _say("Atomic step across the crash (the Order row commits with the step, or not at all):")
        _say(f"  shop.Order rows for the checkout: {orders} (placed before the kill: not placed again)")
        _say(f"  ship started {ships}x (the killed attempt is retried)")

    def _agent_report(self, run: scenarios.ScenarioRun) -> None:
        names = ("model-1", "tool:lookup_order", "model-2", "tool:refund", "model-3:start", "model-3:done")
        try:
            counts = {n: scenarios.agent_count(run, n) for n in names}
        except Exception as exc:  # the report is best effort
            _say(f"\nSupport agent: cannot read ({type(exc).__name__}: {exc})")
            return
        _say()
        _say("Durable agent across the crash (model requests and tool calls counted by the fake service):")
        _say(
            f"  model request 1 sent {counts['model-1']}x, lookup_order called {counts['tool:lookup_order']}x, "
            f"model request 2 sent {counts['model-2']}x, refund paid {counts['tool:refund']}x "
            "(completed before the crash: not repeated)"
        )
        _say(
            f"  model request 3 (the streamed answer) started {counts['model-3:start']}x, "
            f"finished {counts['model-3:done']}x (the killed request is sent again)"
        )
        try:
            items = scenarios.agent_stream(run, include_discarded=True)
        except Exception as exc:  # the report is best effort
            _say(f"  stream 'answer': cannot read ({type(exc).__name__}: {exc})")
            return
        discarded = [i for i in items if i.discarded]
        kept = "".join(str(i.value) for i in items if not i.discarded)
        _say(
            f"  stream 'answer': {len(items)} items, {len(discarded)} of the killed attempt marked discarded; "
            f"a reader sees: {_short(kept, 60)}"
        )

    def _destroy_actors(self) -> None:
        """Destroy the scenarios' actors and the helper actors their workflows created during this run
        (shards, child workers, inventory, ...: example types created after the demo started). Best effort."""
        from rivet_workflows import models

        destroyed = 0
        for run in self.runs.values():
            for handle in run.handles.values():
                try:
                    handle.destroy()
                    destroyed += 1
                except Exception:  # best effort: a demo actor left behind is harmless
                    pass
        helpers = models.Actor.objects.filter(
            destroyed=False, created_at__gte=self.started_at, name__in=list(self.registry.names())
        ).values_list("name", "actor_id")
        for name, actor_id in list(helpers):
            try:
                self.client[name].get_for_id(actor_id).destroy()
                destroyed += 1
            except Exception:
                pass
        _say(f"destroyed {destroyed} demo actor(s) (--keep keeps them for the admin inspector)")


def format_trace(entries: list[Any], limit: int = 16) -> list[str]:
    """Trace lines for a history (``ports.EntryRecord`` list): entry, kind, status, attempts, duration and
    a detail (step output or error, loop iteration, sleep deadline, received message body).

    Long histories (loops) show their first and last entries with a count of the ones left out.
    """
    entries = sorted(entries, key=lambda e: e.seq)
    by_key = {e.key: e for e in entries}
    rows = [
        f"{e.key:<44.44} {_KINDS.get(e.kind, e.kind):<10.10} {inspector.entry_status(e, by_key):<11} "
        f"{_attempts(e):>3}  "
        f"{_duration(e):>8}  {_detail(e)}"
        for e in entries
    ]
    header = [f"{'entry':<44} {'kind':<10} {'status':<11} {'att':>3}  {'took':>8}  detail"]
    if len(rows) > limit:
        head, tail = rows[:4], rows[-(limit - 5) :]
        rows = [*head, f"... {len(entries) - len(head) - len(tail)} more entries ...", *tail]
    return header + [row.rstrip() for row in rows]


_KINDS = {"rollback_checkpoint": "checkpoint", "version_check": "version"}


def _attempts(entry: Any) -> str:
    return str(entry.attempts) if entry.kind == "step" else ""


def _detail(entry: Any) -> str:
    text = _data_detail(entry)
    if entry.rollback_completed_at is not None:
        text += "  [compensated]"
    if entry.rollback_error:
        text += "  [compensation failed: " + _short(entry.rollback_error.get("message"), 40) + "]"
    return text


def _data_detail(entry: Any) -> str:
    data = entry.data or {}
    if entry.error:
        return "error: " + _short(entry.error.get("message"), 50)
    if entry.kind == "step":
        return "-> " + _short(data.get("output"), 50) if "output" in data else ""
    if entry.kind == "loop":
        return f"iteration {data.get('iteration')}"
    if entry.kind == "version_check":
        return f"v{data.get('resolved')} (latest {data.get('latest')})"
    if entry.kind == "sleep" and data.get("state") == "pending" and data.get("deadline"):
        return f"until {data['deadline']:%H:%M:%S}"
    if entry.kind == "message":
        if "count" in data:
            return f"{data['count']} message(s)"
        return f"{data.get('name')}: {_short(data.get('body'), 45)}"
    return ""


def _duration(entry: Any) -> str:
    start = entry.created_at
    end = entry.completed_at
    if start is None or end is None:
        return "-"
    ms = (end - start).total_seconds() * 1000
    return f"{ms:.0f} ms" if ms < 10_000 else f"{ms / 1000:.1f} s"


def _short(value: Any, width: int) -> str:
    text = value if isinstance(value, str) else repr(value)
    return text if len(text) <= width else text[: width - 3] + "..."


def _database_label() -> str:
    from django.db import connection

    return f"{connection.vendor} ({connection.settings_dict.get('NAME')})"


def _broker_label() -> str:
    from urllib.parse import urlsplit

    from django.conf import settings

    url = str(getattr(settings, "CELERY_BROKER_URL", "?"))
    parts = urlsplit(url)
    if parts.password:  # never print credentials
        url = url.replace(f":{parts.password}@", ":***@")
    return url


if __name__ == "__main__":  # python -m project.examples.demo
    import django

    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "project.settings")
    django.setup()
    sys.exit(main(sys.argv[1:]))
