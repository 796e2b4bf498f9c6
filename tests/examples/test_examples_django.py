"""Every ported example also reaches its end state on the Django store (pytest-django, real transactions)."""

from __future__ import annotations

import pytest

from project.examples import scenarios
from project.registry import ACTORS
from rivet_workflows.engine.model.definitions import setup

from .conftest import drive, still_running_as_stated

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("fast_examples")]


def _param(name: str):
    marks = []
    if name in scenarios.LATER_SCENARIOS:
        marks.append(pytest.mark.skip(reason="needs an engine feature of a later issue"))
    if scenarios.SCENARIOS[name].deploy_point is not None:
        marks.append(pytest.mark.skip(reason="swaps code between workers: run by the demo (test_demo.py)"))
    return pytest.param(name, marks=marks, id=name)


@pytest.mark.parametrize("name", [_param(n) for n in scenarios.SCENARIOS])
def test_example_reaches_its_expected_end_state_on_the_django_store(name, service, make_django_runtime):
    runtime = make_django_runtime(setup(use=ACTORS))
    still_running_as_stated(drive(runtime, scenarios.SCENARIOS[name], service))


def test_crash_demo_output_counts_each_step_once_on_the_django_store(service, make_django_runtime):
    runtime = make_django_runtime(setup(use=ACTORS))
    run = drive(runtime, scenarios.SCENARIOS["crash"], service)
    assert run.record("crash").output == {"prepare": 1, "slow_work": 1, "finish": 1}
