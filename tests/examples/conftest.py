"""Fixtures for the example tests: a fake HTTP service, runtimes on both stores, an inline scenario driver."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import pytest

from project.examples import crash_demo, fake_service, scenarios, timeout
from project.registry import ACTORS
from rivet_workflows.engine.model.definitions import setup
from rivet_workflows.engine.runtime import executor
from rivet_workflows.testing import make_runtime


@pytest.fixture
def service(monkeypatch: pytest.MonkeyPatch):
    """A running ``FakeService`` whose URL the examples use (``RIVET_EXAMPLES_SERVICE_URL``)."""
    server = fake_service.FakeService()
    url = server.start(export=False)
    monkeypatch.setenv(fake_service.URL_ENV, url)
    yield server
    server.stop()


@pytest.fixture
def fast_examples(monkeypatch: pytest.MonkeyPatch) -> None:
    """Shorten the spec's real-time constants that only make the demo slow (timeout 5 s, slow step 3 s)."""
    monkeypatch.setattr(timeout, "CHARGE_TIMEOUT", 0.5)
    monkeypatch.setattr(scenarios, "CRASH_SLOW_SECONDS", 0.2)
    monkeypatch.setattr(scenarios, "SHOP_SHIP_SECONDS", 0.2)
    monkeypatch.setattr(scenarios, "AGENT_ANSWER_SECONDS", 0.2)
    assert crash_demo  # the crash actor reads slow_seconds from its input


def memory_runtime(**settings: Any) -> Any:
    """A runtime on the in-memory store with a fresh registry of every example actor."""
    return make_runtime(setup(use=ACTORS), **settings)


def drive(
    runtime: Any,
    scenario: scenarios.Scenario,
    service: fake_service.FakeService,
    *,
    timeout_s: float | None = None,
    drain: Callable[[Any, float], Any] | None = None,
) -> scenarios.ScenarioRun:
    """Start ``scenario`` and drain the runtime until its expectations hold; fail the test after a timeout."""
    drain = drain or (lambda rt, t: executor.drain(rt, timeout=t))
    run = scenarios.ScenarioRun(scenario, runtime.client(), runtime.store, service, "t")
    scenario.start(run)
    deadline = time.monotonic() + (timeout_s or scenario.timeout)
    problems = run.check()
    while problems:
        broken = run.broken()
        if broken:
            pytest.fail(f"scenario {scenario.name!r}: {broken} [{run.describe()}]")
        if time.monotonic() > deadline:
            pytest.fail(
                f"scenario {scenario.name!r} did not reach its end state: {problems} [{run.describe()}]"
            )
        drain(runtime, 0.3)
        time.sleep(0.02)
        problems = run.check()
    for thread in run.threads:
        thread.join(timeout=5)
    return run


def still_running_as_stated(run: Any) -> None:
    """The actors of ``run`` (a finished ``ScenarioRun``) still running are exactly those its scenario says
    why of (``Scenario.still_running``, which the demo's final state prints next to them)."""
    from rivet_workflows.engine.model import ports

    running = {
        label for label in run.handles if run.record(label).workflow_state not in ports.FINISHED_STATES
    }
    assert running == set(run.scenario.still_running), "actors still running without a stated reason"
