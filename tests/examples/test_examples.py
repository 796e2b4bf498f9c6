"""Every ported example reaches the end state the spec's code implies (in-memory store, drain())."""

from __future__ import annotations

import pytest

from project.examples import scenarios, setup_teardown
from rivet_workflows.engine.model import ports

from .conftest import drive, memory_runtime, still_running_as_stated

pytestmark = pytest.mark.usefixtures("fast_examples")


def _param(name: str):
    marks = []
    if name in scenarios.LATER_SCENARIOS:
        marks.append(pytest.mark.skip(reason="needs an engine feature of a later issue"))
    if scenarios.SCENARIOS[name].deploy_point is not None:
        marks.append(pytest.mark.skip(reason="swaps code between workers: run by the demo (test_demo.py)"))
    if scenarios.SCENARIOS[name].needs_db:
        marks.append(
            pytest.mark.skip(reason="writes a Django model: run on the Django store (test_examples_django)")
        )
    return pytest.param(name, marks=marks, id=name)


@pytest.mark.parametrize("name", [_param(n) for n in scenarios.SCENARIOS])
def test_example_reaches_its_expected_end_state(name, service):
    still_running_as_stated(drive(memory_runtime(), scenarios.SCENARIOS[name], service))


def test_every_example_is_in_exactly_one_list():
    assert sorted(scenarios.SKELETON_SCENARIOS + scenarios.LATER_SCENARIOS) == sorted(scenarios.SCENARIOS)


def test_queue_worker_after_jobs_10_and_32(service):
    run = drive(memory_runtime(), scenarios.SCENARIOS["queue_worker"], service)
    assert run.state("worker") == {"processed": 2, "total_amount": 42}


def test_approval_gate_fulfils_the_approved_order_and_cancels_the_rejected_one(service):
    run = drive(memory_runtime(), scenarios.SCENARIOS["approval_gate"], service)
    assert run.state("approve") == {"status": "fulfilled"}
    assert run.state("reject") == {"status": "cancelled"}
    # each order was validated exactly once, although the workflow replayed after the approval wait
    assert service.count(f"/orders/{run.key('order-a')}/validate") == 1
    assert service.count(f"/orders/{run.key('order-r')}/validate") == 1


def test_payment_failure_becomes_data_after_retries(service):
    run = drive(memory_runtime(), scenarios.SCENARIOS["payment"], service)
    review = run.state("review")
    assert review["status"] == "manual-review"
    assert review["reason"].startswith("card declined")
    assert run.record("review").workflow_state == ports.COMPLETED
    charge = {e.key: e for e in run.store.load_history(run.handles["review"].actor_id)}["charge-card"]
    assert charge.attempts == 4  # max_retries=3: the first attempt and three retries


def test_timeout_example_retries_the_timed_out_charge(service):
    run = drive(memory_runtime(), scenarios.SCENARIOS["timeout"], service)
    entries = {e.key: e for e in run.store.load_history(run.handles["charges"].actor_id)}
    charge = next(e for k, e in entries.items() if k.endswith("charge-card"))
    assert charge.status == ports.ENTRY_COMPLETED
    assert charge.attempts == 2


def test_rpc_returns_the_computed_responses(service):
    run = drive(memory_runtime(), scenarios.SCENARIOS["rpc"], service)
    assert run.results["add"].response == {"result": 5}
    assert run.results["square"].response == {"result": 49}


def test_setup_teardown_opens_on_wake_and_closes_on_sleep(service):
    before = dict(setup_teardown.RESOURCE_EVENTS)
    drive(memory_runtime(), scenarios.SCENARIOS["setup_teardown"], service)
    opened = setup_teardown.RESOURCE_EVENTS["open"] - before.get("open", 0)
    closed = setup_teardown.RESOURCE_EVENTS["close"] - before.get("close", 0)
    assert opened >= 2  # one per wake: the actor sleeps between ticks
    assert opened - closed in (0, 1)  # every sleep closed what the wake opened


def test_crash_demo_steps_each_run_once_without_a_crash(service):
    run = drive(memory_runtime(), scenarios.SCENARIOS["crash"], service)
    assert run.record("crash").output == {"prepare": 1, "slow_work": 1, "finish": 1}
