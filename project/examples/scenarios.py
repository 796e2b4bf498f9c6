"""Scenarios: each example driven with real messages, and the end state the spec's code must reach.

A ``Scenario`` has ``start(run)`` (create its actors through the client and send its messages) and
``check(run)`` (the list of expectations not met yet; empty = done). The same scenarios run in the demo
(through a real Celery worker, ``demo.py``) and in ``tests/examples`` (in-process with ``drain()``).

``SKELETON_SCENARIOS`` run today; ``LATER_SCENARIOS`` need engine features of a later issue (join, race,
rollback, try blocks, versioning, on_error, cron). Enabling one is moving its name between the lists.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from rivet_workflows.engine.model import ports

from . import crash_demo, fake_service, shop_order, support_agent, timeout

# --- running a scenario --------------------------------------------------------------------------------


class ScenarioRun:
    """One run of a scenario: the client, the store (to read actor records), the fake service and the
    actor handles by label. ``suffix`` makes actor keys unique per run (see ``key``)."""

    def __init__(
        self, scenario: Scenario, client: Any, store: Any, service: fake_service.FakeService, suffix: str
    ) -> None:
        self.scenario = scenario
        self.client = client
        self.store = store
        self.service = service
        self.suffix = suffix
        self.handles: dict[str, Any] = {}
        self.results: dict[str, Any] = {}
        self.threads: list[threading.Thread] = []

    def key(self, label: str) -> str:
        """A name unique to this scenario run (actor keys, order ids): ``<scenario>-<label>-<suffix>``."""
        return f"{self.scenario.name}-{label}-{self.suffix}"

    def actor(self, label: str, type_name: str, input: Any = None) -> Any:
        """Get or create the actor ``type_name`` keyed ``[key(label)]``; remembered under ``label``."""
        handle = self.client[type_name].get_or_create([self.key(label)], input=input)
        self.handles[label] = handle
        return handle

    def record(self, label: str) -> ports.ActorRecord:
        """The stored actor row of ``label`` (state, workflow_state, output, error...)."""
        return self.store.get_actor(self.handles[label].actor_id)

    def state(self, label: str) -> Any:
        """The stored state of ``label``."""
        return self.record(label).state

    def background(self, label: str, fn: Callable[[], Any]) -> None:
        """Run ``fn()`` in a thread (e.g. a ``send(..., wait=True)``); its result or exception lands in
        ``results[label]``."""

        def target() -> None:
            try:
                self.results[label] = fn()
            except Exception as exc:  # reported by check() as an unmet expectation
                self.results[label] = exc
            finally:
                _close_db_connections()

        thread = threading.Thread(target=target, name=f"scenario-{label}", daemon=True)
        self.threads.append(thread)
        thread.start()

    def describe(self) -> str:
        """One line per actor: workflow state and error message (for failure reports)."""
        lines = []
        for label in self.handles:
            try:
                record = self.record(label)
            except Exception as exc:
                lines.append(f"{label}: unreadable ({exc})")
                continue
            error = (record.error or {}).get("message") if record.error else None
            lines.append(f"{label}: {record.workflow_state}" + (f" error={error!r}" if error else ""))
        return "; ".join(lines)

    def broken(self) -> str | None:
        """A description of an actor whose workflow failed when the scenario expects none to; else None."""
        if self.scenario.may_fail:
            return None
        for label in self.handles:
            try:
                record = self.record(label)
            except Exception:
                continue
            if record.workflow_state == ports.FAILED:
                return f"{label} failed: {(record.error or {}).get('message')}"
        return None

    def check(self) -> list[str]:
        """The unmet expectations (empty when the scenario reached its expected end state)."""
        try:
            return self.scenario.check(self)
        except Exception as exc:  # a missing actor or key error: not there yet
            return [f"{type(exc).__name__}: {exc}"]


def _close_db_connections() -> None:
    try:
        from django.db import connections
    except ImportError:  # the in-memory runtime needs no cleanup
        return
    connections.close_all()


@dataclass
class Scenario:
    """A named driving script for one example (see module docstring)."""

    name: str
    title: str
    start: Callable[[ScenarioRun], None]
    check: Callable[[ScenarioRun], list[str]]
    #: seconds the scenario may take once started (the demo and tests fail it after that)
    timeout: float = 30.0
    #: the demo SIGKILLs the worker the first time this returns True (None: never)
    crash_point: Callable[[ScenarioRun], bool] | None = None
    #: demo only: a crash scenario that needs a head start (many steps before its slow one) is started
    #: first, and the other crash and deploy scenarios only once this returns True, so that every one of
    #: them is inside its slow step or at its deploy point when the worker is killed (None: no head start)
    lead_point: Callable[[ScenarioRun], bool] | None = None
    #: demo only: the scenario starts under the old code (first worker) and must reach this point before
    #: the worker is replaced by one running the current code (None: not a deploy scenario)
    deploy_point: Callable[[ScenarioRun], bool] | None = None
    #: True when the scenario writes Django models (the example shop): not run on the in-memory store
    needs_db: bool = False
    #: True when an actor of the scenario is expected to end failed (otherwise a failed workflow ends the
    #: scenario at once instead of waiting for its timeout)
    may_fail: bool = False
    #: actors (by label) still running when the scenario is done, and why that is expected (an endless
    #: loop, a cron actor waiting for its next tick); the demo's final state says it next to the actor
    still_running: dict[str, str] = field(default_factory=dict)


class Expect:
    """Collects unmet expectations: ``e.eq("what", actual, expected)``; ``e.problems`` is the list."""

    def __init__(self) -> None:
        self.problems: list[str] = []

    def eq(self, what: str, actual: Any, expected: Any) -> Expect:
        """Expect ``actual == expected``."""
        if actual != expected:
            self.problems.append(f"{what}: {actual!r}, expected {expected!r}")
        return self

    def true(self, what: str, ok: bool, detail: Any = "") -> Expect:
        """Expect ``ok``; ``detail`` is shown when it fails."""
        if not ok:
            self.problems.append(f"{what} ({detail})" if detail != "" else what)
        return self

    def workflow(self, run: ScenarioRun, label: str, expected: str) -> Expect:
        """Expect the workflow state of ``label``."""
        return self.eq(f"{label} workflow", run.record(label).workflow_state, expected)


# --- skeleton scenarios ------------------------------------------------------------------------------


def _start_payment(run: ScenarioRun) -> None:
    run.actor("paid", "payment_actor", input={"order_id": "order-123"})
    run.actor("review", "payment_actor", input={"order_id": "declined-" + run.key("order")})


def _check_payment(run: ScenarioRun) -> list[str]:
    e = Expect().workflow(run, "paid", ports.COMPLETED).workflow(run, "review", ports.COMPLETED)
    paid, review = run.state("paid"), run.state("review")
    e.eq("paid status", paid["status"], "paid").eq("paid reason", paid["reason"], None)
    e.eq("review status", review["status"], "manual-review")
    e.true("review reason names the decline", "declined" in str(review["reason"]), review["reason"])
    return e.problems


def _start_checkpoint(run: ScenarioRun) -> None:
    handle = run.actor("payments", "checkpoint_friendly_actor")
    handle.send("payment", {"id": "p-1", "amount": 10})
    handle.send("payment", {"id": "p-2", "amount": 32})


def _check_checkpoint(run: ScenarioRun) -> list[str]:
    state = run.state("payments")
    e = Expect().eq("applied_count", state["applied_count"], 2).eq("total_amount", state["total_amount"], 42)
    return e.eq("last_payment_id", state["last_payment_id"], "p-2").problems


def _start_queue_worker(run: ScenarioRun) -> None:
    handle = run.actor("worker", "queue_worker_actor")
    handle.send("job", {"id": "job-1", "amount": 10})
    handle.send("job", {"id": "job-2", "amount": 32})


def _check_queue_worker(run: ScenarioRun) -> list[str]:
    state = run.state("worker")
    return (
        Expect().eq("processed", state["processed"], 2).eq("total_amount", state["total_amount"], 42).problems
    )


def _start_batch_drainer(run: ScenarioRun) -> None:
    handle = run.actor("metrics", "batch_drainer_actor")
    for value in (1, 2, 3, 4, 5):
        handle.send("metric", {"value": value})


def _check_batch_drainer(run: ScenarioRun) -> list[str]:
    state = run.state("metrics")
    e = Expect().eq("flushed_batches", state["flushed_batches"], 1)
    return (
        e.eq("last_batch_total", state["last_batch_total"], 15).eq("pending", state["pending"], []).problems
    )


BOUNDED_ITEMS = 12


def _start_bounded_drain(run: ScenarioRun) -> None:
    handle = run.actor("bounded", "bounded_drain_actor")
    for i in range(1, BOUNDED_ITEMS + 1):
        handle.send("work", {"id": f"w-{i}", "value": i})


def _check_bounded_drain(run: ScenarioRun) -> list[str]:
    state = run.state("bounded")
    e = Expect().eq("processed", state["processed"], BOUNDED_ITEMS)
    size = state["last_window_size"]
    return e.true("last window within the cap of 10", 1 <= size <= 10, size).problems


def _start_control_loop(run: ScenarioRun) -> None:
    handle = run.actor("control", "control_loop_actor")
    for kind in ("pause", "resume", "stop"):
        handle.send("signal", {"kind": kind})


def _check_control_loop(run: ScenarioRun) -> list[str]:
    state = run.state("control")
    return (
        Expect()
        .eq("handled_signals", state["handled_signals"], 3)
        .eq("mode", state["mode"], "stopped")
        .problems
    )


def _start_approval(run: ScenarioRun) -> None:
    approve = run.actor("approve", "approval_gate_actor", input={"order_id": run.key("order-a")})
    reject = run.actor("reject", "approval_gate_actor", input={"order_id": run.key("order-r")})
    approve.send("approval", {"approved": True})
    reject.send("approval", {"approved": False})


def _check_approval(run: ScenarioRun) -> list[str]:
    e = Expect().workflow(run, "approve", ports.COMPLETED).workflow(run, "reject", ports.COMPLETED)
    e.eq("approved order", run.state("approve")["status"], "fulfilled")
    e.eq("rejected order", run.state("reject")["status"], "cancelled")
    e.eq("fulfil calls", run.service.count(f"/orders/{run.key('order-a')}/fulfill"), 1)
    e.eq("cancel calls", run.service.count(f"/orders/{run.key('order-r')}/cancel"), 1)
    e.eq("fulfil calls for the rejected order", run.service.count(f"/orders/{run.key('order-r')}/fulfill"), 0)
    return e.problems


def _start_timeout(run: ScenarioRun) -> None:
    order_id = run.key("order")
    # the first charge call answers after the step timeout: attempt 1 times out, the retry succeeds
    run.service.delay("/v1/charges", timeout.CHARGE_TIMEOUT + 1.0, when={"orderId": order_id})
    run.actor("charges", "timeout_actor").send("charge", {"order_id": order_id})


def _check_timeout(run: ScenarioRun) -> list[str]:
    order_id = run.key("order")
    e = Expect().eq("last_charge_id", run.state("charges")["last_charge_id"], f"ch-{order_id}")
    charge_calls = sum(
        1
        for m, p, b in list(run.service.calls)
        if p == "/v1/charges" and (b or {}).get("orderId") == order_id
    )
    return e.eq("charge calls (1 timed out + 1 retry)", charge_calls, 2).problems


def _start_poll_backoff(run: ScenarioRun) -> None:
    run.actor("poller", "poll_backoff_actor")


def _check_poll_backoff(run: ScenarioRun) -> list[str]:
    state = run.state("poller")
    e = Expect().eq("status", state["status"], "healthy").eq("backoff_ms", state["backoff_ms"], 100)
    return e.true("polled at least 3 times", state["attempts"] >= 3, state["attempts"]).problems


RPC_REQUESTS = {
    "add": ({"op": "add", "args": [2, 3]}, {"result": 5}),
    "square": ({"op": "square", "args": [7]}, {"result": 49}),
}


def _start_rpc(run: ScenarioRun) -> None:
    handle = run.actor("rpc", "rpc_actor")
    for label, (body, _) in RPC_REQUESTS.items():
        run.background(label, lambda body=body: handle.send("request", body, wait=True, timeout=20))


def _check_rpc(run: ScenarioRun) -> list[str]:
    e = Expect()
    for label, (_, expected) in RPC_REQUESTS.items():
        result = run.results.get(label)
        if result is None:
            e.problems.append(f"{label}: no response yet")
            continue
        e.eq(f"{label} status", getattr(result, "status", result), "completed")
        e.eq(f"{label} response", getattr(result, "response", None), expected)
    return e.eq("handled", run.state("rpc")["handled"], len(RPC_REQUESTS)).problems


def _start_setup_teardown(run: ScenarioRun) -> None:
    run.actor("ticker", "setup_run_teardown_actor")


def _check_setup_teardown(run: ScenarioRun) -> list[str]:
    state = run.state("ticker")
    e = Expect().eq("initialized", state["initialized"], True)
    return e.true("ticked at least twice", state["ticks"] >= 2, state["ticks"]).problems


#: seconds the crash demo's slow step takes
CRASH_SLOW_SECONDS = 3.0


def _crash_count(run: ScenarioRun, name: str) -> int:
    return run.service.count(f"/counters/{crash_demo.counter_name(run.key('crash'), name)}")


def _start_crash(run: ScenarioRun) -> None:
    run.actor("crash", "crash_demo_actor", input={"slow_seconds": CRASH_SLOW_SECONDS})


def _check_crash(run: ScenarioRun) -> list[str]:
    e = Expect().workflow(run, "crash", ports.COMPLETED)
    e.eq("prepare ran", _crash_count(run, "prepare"), 1)
    e.eq("slow-work finished", _crash_count(run, "slow-work:done"), 1)
    e.eq("finish ran", _crash_count(run, "finish"), 1)
    state = run.state("crash")
    e.eq("state", state, {"prepare_runs": 1, "slow_work_runs": 1, "finish_runs": 1})
    return e.problems


def _crash_point(run: ScenarioRun) -> bool:
    return _crash_count(run, "slow-work:start") >= 1


#: seconds the support agent takes to stream its answer (the demo kills the worker meanwhile, once the
#: other crash and deploy scenarios, started when the answer began, reached their points)
AGENT_ANSWER_SECONDS = 8.0


def agent_count(run: ScenarioRun, name: str) -> int:
    """How many times the support agent's model request or tool ``name`` ran (fake-service counter)."""
    return run.service.count(f"/counters/{support_agent.counter_name(run.key('agent'), name)}")


def _start_agent(run: ScenarioRun) -> None:
    handle = run.actor(
        "agent",
        "support_agent_actor",
        input={"order_id": run.key("order"), "answer_seconds": AGENT_ANSWER_SECONDS},
    )
    handle.send("approval", {"approved": True})  # the support lead approves the refund up front


def _check_agent(run: ScenarioRun) -> list[str]:
    e = Expect().workflow(run, "agent", ports.COMPLETED)
    for name in ("model-1", "model-2", "model-3:done", "tool:lookup_order", "tool:refund"):
        e.eq(f"{name} ran", agent_count(run, name), 1)
    state = run.state("agent")
    e.eq("refunded", state["refunded"], "30.00")
    e.true("answer", "refunded 30.00 EUR" in (state["answer"] or ""), state["answer"])
    streamed = "".join(item.value for item in agent_stream(run))
    e.eq("streamed answer (items of the killed attempt skipped)", streamed, state["answer"])
    return e.problems


def agent_stream(run: ScenarioRun, include_discarded: bool = False) -> list:
    """The items of the support agent's ``answer`` stream (it is closed once the workflow finished)."""
    handle = run.handles["agent"]
    return list(handle.read_stream("answer", timeout=0.5, include_discarded=include_discarded))


def _streamed(run: ScenarioRun) -> int:
    """How many words of the answer were streamed so far (a short read: it ends 0.05 s after the last)."""
    if agent_count(run, "model-3:start") < 1:
        return 0
    return len(list(run.handles["agent"].read_stream("answer", timeout=0.05)))


def _agent_lead_point(run: ScenarioRun) -> bool:
    return _streamed(run) >= 2  # the answer is being streamed


def _agent_point(run: ScenarioRun) -> bool:
    return _streamed(run) >= 2


#: seconds the shop example's ship step takes (the demo kills the worker in it)
SHOP_SHIP_SECONDS = 3.0


def _ship_count(run: ScenarioRun) -> int:
    return run.service.count(f"/counters/{shop_order.counter_name(run.key('shop'), 'ship')}")


def shop_orders(run: ScenarioRun) -> int:
    """How many ``shop.Order`` rows the shop scenario's checkout has."""
    from project.shop.models import Order

    return Order.objects.filter(checkout=run.key("shop")).count()


def _start_shop(run: ScenarioRun) -> None:
    run.actor("shop", "shop_order_actor", input={"ship_seconds": SHOP_SHIP_SECONDS})


def _check_shop(run: ScenarioRun) -> list[str]:
    e = Expect().workflow(run, "shop", ports.COMPLETED)
    e.eq("orders placed", shop_orders(run), 1)
    state = run.state("shop")
    return e.eq("state", (state["status"], state["order_id"] is not None), ("shipped", True)).problems


def _shop_point(run: ScenarioRun) -> bool:
    return _ship_count(run) >= 1


# --- later scenarios (join, race, rollback, try blocks, versioning, on_error) --------------------------


def _start_payment_flow(run: ScenarioRun) -> None:
    run.actor("flow", "payment_flow_actor")


def _check_payment_flow(run: ScenarioRun) -> list[str]:
    state = run.state("flow")
    e = Expect().workflow(run, "flow", ports.COMPLETED).eq("ok", state["ok"], True)
    return e.eq("value", state["value"], {"auth": "auth-order-123", "capture": "capture-order-123"}).problems


def _start_fan_in_out(run: ScenarioRun) -> None:
    run.actor("fan", "fan_in_out_actor").send("refresh", {})


def _check_fan_in_out(run: ScenarioRun) -> list[str]:
    return Expect().eq("total (3 users + 5 orders + 7 invoices)", run.state("fan")["total"], 15).problems


def _start_scatter(run: ScenarioRun) -> None:
    run.actor("scatter", "scatter_gather_actor").send("scatter", {"input": 4})


def _check_scatter(run: ScenarioRun) -> list[str]:
    return Expect().eq("last_sum (3 shards x 40)", run.state("scatter")["last_sum"], 120).problems


def _start_coordinator(run: ScenarioRun) -> None:
    body = {"task_id": "t-1", "worker_id": run.key("worker"), "value": 21}
    run.actor("coordinator", "coordinator_actor").send("task", body)


def _check_coordinator(run: ScenarioRun) -> list[str]:
    state = run.state("coordinator")
    return (
        Expect()
        .eq("last_task_id", state["last_task_id"], "t-1")
        .eq("last_result", state["last_result"], 42)
        .problems
    )


def _start_children(run: ScenarioRun) -> None:
    run.actor("orchestrator", "orchestrator_actor").send("batch", {"payload": 5})


def _check_children(run: ScenarioRun) -> list[str]:
    return Expect().eq("last_total (3 children x 15)", run.state("orchestrator")["last_total"], 45).problems


def _start_timeout_fallback(run: ScenarioRun) -> None:
    run.actor("fallback", "timeout_fallback_actor").send("request", {})


def _check_timeout_fallback(run: ScenarioRun) -> list[str]:
    state = run.state("fallback")
    e = Expect().eq("last_source", state["last_source"], "fallback")
    return e.eq("last_value", state["last_value"], "fallback").problems


def _start_error_hooks(run: ScenarioRun) -> None:
    run.actor("hook", "error_hook_actor")
    run.actor("hook_rivetkit", "error_hook_rivetkit_actor")


def _check_error_hooks(run: ScenarioRun) -> list[str]:
    e = Expect()
    for label in ("hook", "hook_rivetkit"):
        e.workflow(run, label, ports.FAILED)
        state = run.state(label)
        event = (state["last_error"] or {}).get("step") or {}
        e.eq(f"{label} last event step", event.get("step_name"), "sync-ledger")
        e.eq(f"{label} last event will_retry", event.get("will_retry"), False)
        e.eq(f"{label} events (one per attempt)", state["error_events"], 4)
    return e.problems


def _start_checkout(run: ScenarioRun) -> None:
    run.actor("checkout_ok", "checkout_actor").send("orders", {"order_id": run.key("order")})
    run.actor("checkout_declined", "checkout_actor").send(
        "orders", {"order_id": "declined-" + run.key("order")}
    )


def _check_checkout(run: ScenarioRun) -> list[str]:
    e = Expect().eq("confirmed order", run.state("checkout_ok")["status"], "confirmed")
    e.workflow(run, "checkout_declined", ports.FAILED)
    e.eq(
        "reservation released once",
        run.service.count(f"/inventory/res-declined-{run.key('order')}/release"),
        1,
    )
    e.eq("nothing refunded", run.service.count("/v1/refunds"), 0)
    return e.problems


def _start_saga(run: ScenarioRun) -> None:
    run.actor("saga_ok", "checkout_saga_actor").send("order", {"order_id": run.key("order"), "amount": 25})
    run.actor("saga_failed", "checkout_saga_actor").send("order", {"order_id": run.key("bad"), "amount": 0})


def _check_saga(run: ScenarioRun) -> list[str]:
    e = Expect().eq("completed_orders", run.state("saga_ok")["completed_orders"], 1)
    e.workflow(run, "saga_failed", ports.FAILED)
    released = [b for m, p, b in list(run.service.calls) if p == "/inventory/release"]
    e.true(
        "failed saga released its reservation",
        {"reservationId": f"reserve-{run.key('bad')}"} in released,
        released,
    )
    return e.problems


def _start_versioned(run: ScenarioRun) -> None:
    run.actor("versioned", "versioned_workflow_actor")


def _check_versioned(run: ScenarioRun) -> list[str]:
    runs = run.state("versioned")["runs"]
    return Expect().true("validate-v2 then at least 2 heartbeats", runs >= 3, runs).problems


def _start_version_gate(run: ScenarioRun) -> None:
    run.actor("gate", "version_gate_actor")


def _check_version_gate(run: ScenarioRun) -> list[str]:
    state = run.state("gate")
    e = Expect().true("processed at least twice", state["processed"] >= 2, state["processed"])
    return e.true(
        "a fresh instance takes version 2", set(state["versions"]) == {2}, state["versions"]
    ).problems


def _start_versioned_deploy(run: ScenarioRun) -> None:
    run.actor("versioned", "versioned_deploy_actor")


def _versioned_deploy_point(run: ScenarioRun) -> bool:
    return run.state("versioned")["runs"] >= 2  # validate-v1 and one heartbeat ran under the old code


def _check_versioned_deploy(run: ScenarioRun) -> list[str]:
    runs = run.state("versioned")["runs"]
    e = Expect().workflow(run, "versioned", ports.SLEEPING)
    return e.true("the old instance kept looping under the new code", runs >= 4, runs).problems


def _start_cron(run: ScenarioRun) -> None:
    run.actor("cron", "cron_actor", input={"interval": 5})


def _check_cron(run: ScenarioRun) -> list[str]:
    state = run.state("cron")
    e = Expect().true("the cron job ran at least once", state["runs"] >= 1, state["runs"])
    return e.true("it recorded the scheduled instant", state["last_run_at"] is not None).problems


def _start_version_gate_deploy(run: ScenarioRun) -> None:
    run.actor("gate", "version_gate_actor")


def _version_gate_deploy_point(run: ScenarioRun) -> bool:
    return run.state("gate")["processed"] >= 1  # iteration 0 ran process-v1 and sleeps in "idle"


def _check_version_gate_deploy(run: ScenarioRun) -> list[str]:
    versions = run.state("gate")["versions"]
    e = Expect().true("processed under both versions", len(versions) >= 3, versions)
    e.eq("the iteration in flight at the deploy stayed on v1", versions[:1], [1])
    return e.true("every iteration after the deploy took v2", set(versions[1:]) == {2}, versions).problems


SCENARIOS: dict[str, Scenario] = {
    s.name: s
    for s in [
        Scenario(
            "payment", "payment actor (try_step): one paid, one manual review", _start_payment, _check_payment
        ),
        Scenario("checkpoint", "checkpoint-friendly payment loop", _start_checkpoint, _check_checkpoint),
        Scenario("queue_worker", "queue-driven worker", _start_queue_worker, _check_queue_worker),
        Scenario("batch_drainer", "batch drainer", _start_batch_drainer, _check_batch_drainer),
        Scenario(
            "bounded_drain",
            "bounded drain with a concurrency cap",
            _start_bounded_drain,
            _check_bounded_drain,
        ),
        Scenario("control_loop", "signal-driven control loop", _start_control_loop, _check_control_loop),
        Scenario(
            "approval_gate", "human approval gate (approve one, reject one)", _start_approval, _check_approval
        ),
        Scenario(
            "timeout",
            "step timeout with retries (slow first call)",
            _start_timeout,
            _check_timeout,
            timeout=45,
        ),
        Scenario("poll_backoff", "poll and backoff loop", _start_poll_backoff, _check_poll_backoff),
        Scenario("rpc", "request/response over a completable message", _start_rpc, _check_rpc),
        Scenario(
            "setup_teardown", "setup and teardown around a loop", _start_setup_teardown, _check_setup_teardown
        ),
        Scenario(
            "crash",
            "worker killed mid-step, workflow resumed",
            _start_crash,
            _check_crash,
            timeout=90,
            crash_point=_crash_point,
        ),
        Scenario(
            "shop",
            "atomic step placing an order (Django model) across a worker kill",
            _start_shop,
            _check_shop,
            timeout=90,
            crash_point=_shop_point,
            needs_db=True,
        ),
        Scenario(
            "agent",
            "pydantic-ai agent streaming its answer across a worker kill",
            _start_agent,
            _check_agent,
            timeout=90,
            crash_point=_agent_point,
            lead_point=_agent_lead_point,
        ),
        Scenario("payment_flow", "try_ block (payment flow)", _start_payment_flow, _check_payment_flow),
        Scenario("fan_in_out", "fan-out / fan-in (join)", _start_fan_in_out, _check_fan_in_out),
        Scenario("scatter_gather", "scatter-gather across actors", _start_scatter, _check_scatter),
        Scenario("coordinator", "coordinator to worker RPC", _start_coordinator, _check_coordinator),
        Scenario("child_workers", "child workers", _start_children, _check_children),
        Scenario(
            "timeout_fallback",
            "timeout and fallback (race)",
            _start_timeout_fallback,
            _check_timeout_fallback,
        ),
        Scenario(
            "error_hooks",
            "error hooks (both spellings)",
            _start_error_hooks,
            _check_error_hooks,
            may_fail=True,
        ),
        Scenario(
            "checkout",
            "rollback checkout (one confirmed, one rolled back)",
            _start_checkout,
            _check_checkout,
            may_fail=True,
        ),
        Scenario("checkout_saga", "cross-actor saga", _start_saga, _check_saga, may_fail=True),
        Scenario("versioned", "versioned workflow (removed)", _start_versioned, _check_versioned),
        Scenario("version_gate", "version gate (get_version)", _start_version_gate, _check_version_gate),
        Scenario(
            "version_gate_deploy",
            "version gate across a deploy (old instance in flight)",
            _start_version_gate_deploy,
            _check_version_gate_deploy,
            deploy_point=_version_gate_deploy_point,
        ),
        Scenario(
            "versioned_deploy",
            "versioned workflow across a deploy (validate-v1 renamed, old instance in flight)",
            _start_versioned_deploy,
            _check_versioned_deploy,
            deploy_point=_versioned_deploy_point,
        ),
        Scenario(
            "cron", "cron every 5 s bridging to the workflow queue", _start_cron, _check_cron, timeout=30
        ),
    ]
}

#: why an actor is still running when its scenario is done: the spec's examples are long-running actors
#: (loops over their queue, a cron actor, a loop across a deploy) that run until cancelled
_WAITS_FOR = "a long-running loop over its queue: it waits for its next"
for _name, _running in {
    "checkpoint": {"payments": f"{_WAITS_FOR} payment"},
    "queue_worker": {"worker": f"{_WAITS_FOR} job"},
    "batch_drainer": {"metrics": f"{_WAITS_FOR} metric values"},
    "bounded_drain": {"bounded": f"{_WAITS_FOR} work messages"},
    "control_loop": {"control": f"{_WAITS_FOR} signal"},
    "timeout": {"charges": f"{_WAITS_FOR} charge request"},
    "poll_backoff": {"poller": "a poll loop: it sleeps until its next poll of the dependency"},
    "rpc": {"rpc": f"{_WAITS_FOR} request"},
    "setup_teardown": {"ticker": "a ticking loop: it sleeps until its next tick"},
    "fan_in_out": {"fan": f"{_WAITS_FOR} refresh"},
    "scatter_gather": {"scatter": f"{_WAITS_FOR} input"},
    "coordinator": {"coordinator": f"{_WAITS_FOR} task"},
    "child_workers": {"orchestrator": f"{_WAITS_FOR} batch"},
    "timeout_fallback": {"fallback": f"{_WAITS_FOR} request"},
    "checkout": {"checkout_ok": f"{_WAITS_FOR} order"},
    "checkout_saga": {"saga_ok": f"{_WAITS_FOR} order"},
    "versioned": {
        "versioned": "an endless loop (main-loop-v2): it sleeps between iterations until cancelled"
    },
    "version_gate": {
        "gate": "an endless loop: it sleeps between iterations, each one taking version 2 of its gate"
    },
    "version_gate_deploy": {
        "gate": "an endless loop in flight across the deploy: it sleeps between iterations; the gate keeps "
        "version 1 for the iteration that was in flight and waits for a next deploy to be retired"
    },
    "versioned_deploy": {
        "versioned": "an endless loop in flight across the deploy: it sleeps between iterations, now on the "
        "deployed code"
    },
    "cron": {
        "cron": "a cron actor keeps running: it waits for its next tick (every 5 s) until its schedule is removed"
    },
}.items():
    SCENARIOS[_name].still_running.update(_running)

#: scenarios the engine supports now (run by the demo and the tests)
SKELETON_SCENARIOS = [
    "payment",
    "queue_worker",
    "batch_drainer",
    "bounded_drain",
    "control_loop",
    "approval_gate",
    "timeout",
    "poll_backoff",
    "rpc",
    "setup_teardown",
    "crash",
    "shop",
    "agent",
    "fan_in_out",
    "scatter_gather",
    "coordinator",
    "child_workers",
    "timeout_fallback",
    "error_hooks",
    "checkpoint",
    "payment_flow",
    "checkout",
    "checkout_saga",
    "versioned",
    "version_gate",
    "version_gate_deploy",
    "versioned_deploy",
    "cron",
]

#: scenarios waiting for engine features of a later issue (listed, not run); the comment names the feature
LATER_SCENARIOS: list[str] = []


def enabled() -> list[Scenario]:
    """The scenarios to run now, in demo order."""
    return [SCENARIOS[name] for name in SKELETON_SCENARIOS]
