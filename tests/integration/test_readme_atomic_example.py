"""The manual's atomic-step example (docs/howto/atomic-steps.md) survives a replay: the replayed step
runs its body again with a new idempotency key and finds the order it placed (manual:
docs/explanation/replay-and-recover.md: side effects idempotent by a business key). On SQLite, and on PostgreSQL with DATABASE_URL."""

from __future__ import annotations

import asyncio
import re
from pathlib import Path

import pytest
from django.db import connections

from project.shop.models import Order
from rivet_workflows.engine.model.definitions import setup
from tests.api.support import rivet as rivet  # noqa: F401 - the fixture

PAGE = Path(__file__).resolve().parents[2] / "docs" / "howto" / "atomic-steps.md"


def _readme_example() -> dict:
    """The first python block of the manual's page "Exactly-once database writes" (docs/howto/atomic-steps.md),
    executed."""
    section = PAGE.read_text()
    block = re.search(r"```python\n(.*?)```", section, re.S)
    assert block, "the atomic-steps page lost its example"
    namespace: dict = {}
    exec(compile(block.group(1), str(PAGE), "exec"), namespace)
    return namespace


registry = setup(use={"checkout": _readme_example()["checkout"]})


@pytest.fixture(autouse=True)
def _close_store_thread_connections():
    yield
    from asgiref.sync import sync_to_async

    asyncio.run(sync_to_async(connections.close_all, thread_sensitive=True)())


@pytest.mark.django_db(transaction=True)
def test_the_readme_atomic_example_places_one_order_even_after_a_replay_of_its_step(rivet):
    rivet.configure(REGISTRY="tests.integration.test_readme_atomic_example.registry")
    handle = rivet.client.checkout.get_or_create("c-1")
    rivet.drain()
    first = handle.record()
    assert first.workflow_state == "completed"
    (order,) = Order.objects.filter(checkout="c-1")
    assert first.output == {"order": order.pk} and first.state["order_id"] == order.pk

    plan = handle.replay("place-order", dry_run=True)
    assert plan.rerun == ("place-order",)
    handle.replay("place-order", reason="re-place the order")
    rivet.drain()

    again = handle.record()
    assert again.workflow_state == "completed", again.error
    assert list(Order.objects.filter(checkout="c-1").values_list("pk", flat=True)) == [order.pk]
    assert again.output == {"order": order.pk}
    assert again.replay_generation == first.replay_generation + 1  # it ran with a new idempotency key
