"""The manual's first workflow (docs/tutorial/first-workflow.md, ``mysite/registry.py``) runs as the page says."""

from __future__ import annotations

import re
from pathlib import Path

from rivet_workflows.testing import ManualClock, drain, make_runtime

PAGE = Path(__file__).resolve().parents[2] / "docs" / "tutorial" / "first-workflow.md"


def _readme_registry():
    text = PAGE.read_text()
    block = re.search(r"```python\n# mysite/registry.py\n(.*?)```", text, re.S)
    assert block, "the first-workflow page lost its registry example"
    namespace: dict = {}
    exec(compile(block.group(1), str(PAGE), "exec"), namespace)
    return namespace["registry"]


def test_readme_order_workflow_is_approved_charged_and_completes_after_its_cool_down():
    clock = ManualClock()
    runtime = make_runtime(_readme_registry(), clock=clock)
    order = runtime.registry.client().order_actor.get_or_create(["order-1"])

    drain(runtime, timeout=1)
    assert order.get_state() == {"status": "awaiting_approval", "order_id": "order-1"}

    order.send("approval", {"approved": True})
    drain(runtime, timeout=1)
    assert order.get_state()["status"] == "fulfilled"
    assert runtime.store.get_actor(order.actor_id).workflow_state == "sleeping"

    clock.advance(61)
    drain(runtime, timeout=1)
    actor = runtime.store.get_actor(order.actor_id)
    assert actor.workflow_state == "completed"
    assert actor.output == "charge-order-1"


def test_readme_order_workflow_rejected_is_cancelled():
    runtime = make_runtime(_readme_registry())
    order = runtime.registry.client().order_actor.get_or_create("order-2")
    order.send("approval", {"approved": False})
    drain(runtime, timeout=1)
    actor = runtime.store.get_actor(order.actor_id)
    assert (actor.workflow_state, actor.output, order.get_state()["status"]) == (
        "completed",
        "cancelled",
        "cancelled",
    )
