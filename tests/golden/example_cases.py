"""Golden cases for the spec's examples (project/examples): each scenario of ``scenarios.py`` driven to the
end state its ``check`` expects, one history per workflow actor it starts.

The scenarios' own ``start`` functions create the actors and send the messages; the driver then runs
everything in yield mode and moves a manual clock from deadline to deadline until the scenario's
expectations hold, so loops that poll or tick stop at the same iteration every time. Helper actors
without a workflow (shards, child workers, services) have no history and get no file.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from project.examples import fake_service, scenarios, shop_order, timeout, timeout_fallback, versioning
from project.registry import ACTORS
from rivet_workflows import actor

from .driver import Case, Driver

#: the key suffix of every scenario run (``ScenarioRun.key``)
SUFFIX = "g"
#: the step timeout of the timeout example while recording: the spec's 5 s only makes it slow; the retry
#: must answer within it (a loaded machine must not turn the golden's 2 attempts into 3)
CHARGE_TIMEOUT = 1.0

_service: fake_service.FakeService | None = None
_service_lock = threading.Lock()


def service() -> fake_service.FakeService:
    """The process's fake HTTP service (started once, its URL exported for the examples), journal reset."""
    global _service
    with _service_lock:
        if _service is None:
            _service = fake_service.FakeService()
            os.environ[fake_service.URL_ENV] = _service.start(export=False)
        _service.reset()
        return _service


def stop_service() -> None:
    """Stop the fake service if it was started (and forget its URL)."""
    global _service
    with _service_lock:
        if _service is not None:
            _service.stop()
            _service = None
            os.environ.pop(fake_service.URL_ENV, None)


@contextmanager
def _patched(module: Any, name: str, value: Any) -> Iterator[None]:
    old = getattr(module, name)
    setattr(module, name, value)
    try:
        yield
    finally:
        setattr(module, name, old)


def _definitions() -> dict:
    return dict(ACTORS)


def _workflow_labels(run: scenarios.ScenarioRun) -> list[str]:
    return [label for label, handle in run.handles.items() if handle.definition.run is not None]


def _drive(d: Driver, name: str, start: Any = None) -> scenarios.ScenarioRun:
    """Start scenario ``name`` (its own ``start``, or ``start(run)``) and advance until ``check`` passes."""
    scenario = scenarios.SCENARIOS[name]
    run = scenarios.ScenarioRun(scenario, d.client, d.store, service(), SUFFIX)
    (start or scenario.start)(run)
    d.until(lambda: not run.check(), max_advances=80)
    return run


def _scenario(name: str) -> Any:
    def record(d: Driver) -> dict:
        run = _drive(d, name)
        return {label: run.handles[label] for label in _workflow_labels(run)}

    return record


def _record_timeout(d: Driver) -> dict:
    with _patched(timeout, "CHARGE_TIMEOUT", CHARGE_TIMEOUT):
        run = _drive(d, "timeout")
    return {"charges": run.handles["charges"]}


def _record_crash(d: Driver) -> dict:
    with _patched(scenarios, "CRASH_SLOW_SECONDS", 0.0):
        run = _drive(d, "crash")
    return {"crash": run.handles["crash"]}


def _record_agent(d: Driver) -> dict:
    with _patched(scenarios, "AGENT_ANSWER_SECONDS", 0.0):
        run = _drive(d, "agent")
    return {"agent": run.handles["agent"]}


def _placed_without_a_database(step: Any) -> int:
    """``shop_order.place_order`` as the recording sees it: the in-memory store has no ``shop.Order`` table,
    so the row is left out; the step's output, state change and history are the same (order id 1)."""
    step.state["order_id"] = 1
    step.state["status"] = "placed"
    return 1


def _record_shop(d: Driver) -> dict:
    with (
        _patched(scenarios, "SHOP_SHIP_SECONDS", 0.0),
        _patched(shop_order, "place_order", _placed_without_a_database),
    ):
        scenario = scenarios.SCENARIOS["shop"]
        run = scenarios.ScenarioRun(scenario, d.client, d.store, service(), SUFFIX)
        scenario.start(run)
        d.until(lambda: run.record("shop").workflow_state == "completed", max_advances=80)
    return {"shop": run.handles["shop"]}


def _record_rpc(d: Driver) -> dict:
    """The rpc scenario sends with ``wait=True`` from threads; here the same completable messages are sent
    directly (what ``send(wait=True)`` stores) and the driver waits for their responses."""
    sent: list[str] = []

    def start(run: scenarios.ScenarioRun) -> None:
        handle = run.actor("rpc", "rpc_actor")
        for body, _ in scenarios.RPC_REQUESTS.values():
            sent.append(d.store.send(handle.actor_id, "request", body, True).id)

    run = scenarios.ScenarioRun(scenarios.SCENARIOS["rpc"], d.client, d.store, service(), SUFFIX)
    start(run)
    d.until(lambda: all(d.store.get_message(m).status == "completed" for m in sent))
    responses = [d.store.get_message(m).response for m in sent]
    assert responses == [expected for _, expected in scenarios.RPC_REQUESTS.values()], responses
    return {"rpc": run.handles["rpc"]}


def _record_timeout_fallback(d: Driver) -> dict:
    """The race of a slow primary (2 s of real time in the example) against a 0.2 s durable sleep, made
    deterministic: the primary's action blocks until the clock has moved past the sleep's deadline and
    the race has been decided for the sleep; only then does it answer (too late)."""
    primary_started = threading.Event()
    release = threading.Event()

    def gated_primary(_c: Any) -> str:
        primary_started.set()
        release.wait(timeout=30)
        return "primary"

    d.deploy({**ACTORS, "primary_service_actor": actor(actions={"fetch_value": gated_primary})})
    scenario = scenarios.SCENARIOS["timeout_fallback"]
    run = scenarios.ScenarioRun(scenario, d.client, d.store, service(), SUFFIX)
    scenario.start(run)
    failure: list[BaseException] = []

    def settle() -> None:
        try:
            d.settle()
        except BaseException as exc:  # re-raised below
            failure.append(exc)

    runner = threading.Thread(target=settle, name="golden-timeout-fallback")
    runner.start()
    try:
        assert primary_started.wait(timeout=30), "the primary branch never called the service"
        d.clock.advance(timeout_fallback.PRIMARY_TIMEOUT)  # the sleep branch's deadline passes
        deadline = threading.Event()
        for _ in range(3000):  # the race is decided once the fallback call is recorded
            entries = {e.key: e for e in d.store.load_history(run.handles["fallback"].actor_id)}
            if any(k.endswith("fallback-call") for k in entries):
                break
            deadline.wait(0.01)
    finally:
        release.set()
        runner.join(timeout=60)
    if failure:
        raise failure[0]
    d.until(lambda: not run.check())
    return {"fallback": run.handles["fallback"]}


def _deploy_scenario(name: str, old_name: str, old_definition: Any) -> Any:
    """Record a deploy scenario: the old code until the scenario's deploy point (exported as
    ``at-deploy``), then the current code until its check passes (``after-deploy``)."""

    def record(d: Driver) -> dict:
        d.deploy({**ACTORS, old_name: old_definition})
        scenario = scenarios.SCENARIOS[name]
        run = scenarios.ScenarioRun(scenario, d.client, d.store, service(), SUFFIX)
        scenario.start(run)
        d.until(lambda: scenario.deploy_point(run))
        (label,) = _workflow_labels(run)
        at_deploy = d.export(run.handles[label])
        d.deploy(ACTORS)
        d.until(lambda: not run.check(), max_advances=80)
        return {"at-deploy": at_deploy, "after-deploy": run.handles[label]}

    return record


def _case(name: str, labels: tuple[str, ...], record: Any = None, covers: str = "") -> Case:
    scenario = scenarios.SCENARIOS[name]
    return Case(
        name=f"example-{name}",
        group="examples",
        covers=covers or scenario.title,
        definitions=_definitions,
        record=record or _scenario(name),
        labels=labels,
    )


CASES = [
    _case("payment", ("paid", "review"), covers="try_step payment: one paid, one declined after retries"),
    _case("checkpoint", ("payments",)),
    _case("queue_worker", ("worker",), covers="queue-driven worker: two jobs done, in flight on the queue"),
    _case("batch_drainer", ("metrics",)),
    _case("bounded_drain", ("bounded",)),
    _case("control_loop", ("control",)),
    _case("approval_gate", ("approve", "reject")),
    _case("timeout", ("charges",), _record_timeout, "step timeout: attempt 1 timed out, the retry charged"),
    _case("poll_backoff", ("poller",)),
    _case("rpc", ("rpc",), _record_rpc, "request/response over completable messages (two answered)"),
    _case("setup_teardown", ("ticker",)),
    _case("crash", ("crash",), _record_crash, "the crash demo's three steps (run without a crash)"),
    _case("shop", ("shop",), _record_shop, "the shop's atomic step and its ship step (run without a crash)"),
    _case(
        "agent",
        ("agent",),
        _record_agent,
        "pydantic-ai agent: model requests and tool calls as steps, an approval on a queue (run without a crash)",
    ),
    _case("payment_flow", ("flow",)),
    _case("fan_in_out", ("fan",)),
    _case("scatter_gather", ("scatter",)),
    _case("coordinator", ("coordinator",)),
    _case("child_workers", ("orchestrator",)),
    _case(
        "timeout_fallback",
        ("fallback",),
        _record_timeout_fallback,
        "race of a slow primary against a 0.2 s sleep: the sleep wins, the fallback answers",
    ),
    _case("error_hooks", ("hook", "hook_rivetkit"), covers="error hooks, both spellings: 4 events, failed"),
    _case(
        "checkout",
        ("checkout_ok", "checkout_declined"),
        covers="rollback checkout: one confirmed, one rolled back",
    ),
    _case(
        "checkout_saga", ("saga_ok", "saga_failed"), covers="cross-actor saga: one completed, one compensated"
    ),
    _case("versioned", ("versioned",), covers="versioned workflow (ctx.removed) on a fresh instance"),
    _case("version_gate", ("gate",), covers="version gate (get_version) on a fresh instance"),
    _case(
        "version_gate_deploy",
        ("at-deploy", "after-deploy"),
        _deploy_scenario("version_gate_deploy", "version_gate_actor", versioning.version_gate_actor_v1),
        "version gate across a deploy: recorded by the old code, continued by the new",
    ),
    _case(
        "versioned_deploy",
        ("at-deploy", "after-deploy"),
        _deploy_scenario(
            "versioned_deploy", "versioned_deploy_actor", versioning.versioned_workflow_actor_v1
        ),
        "validate-v1 renamed across a deploy: recorded by the old code, resumed by the migrated code",
    ),
    _case("cron", ("cron",), covers="cron every 5 s bridging to the workflow queue"),
]
