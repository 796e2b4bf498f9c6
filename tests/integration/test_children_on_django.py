"""Parent and child actors on the Django stores (SQLite, or PostgreSQL under DATABASE_URL; DESIGN.md 20)."""

from __future__ import annotations

import pytest

import rivet_workflows as rw
from rivet_workflows.engine.model import ports
from rivet_workflows.engine.runtime import executor

pytestmark = pytest.mark.django_db(transaction=True)


async def _leaf(ctx):
    await ctx.queue.next("forever", names=["never"])


async def _mid(ctx):
    await ctx.step("leaf", lambda step: step.client().leaf.get_or_create([*ctx.key, "leaf"]).actor_id)
    await ctx.queue.next("forever", names=["never"])


async def _root(ctx):
    await ctx.spawn("mid", [ctx.key[0], "mid"])
    await ctx.spawn("bound", [ctx.key[0], "bound"])
    await ctx.queue.next("go", names=["go"])
    raise rw.CriticalError("the root fails")


def _registry():
    return rw.setup(
        use={
            "root": rw.workflow(run=_root, queues=["go"]),
            "mid": rw.workflow(run=_mid),
            "leaf": rw.workflow(run=_leaf),
            "bound": rw.workflow(run=_leaf, parent_close="cancel"),
        }
    )


def test_cancelling_a_parent_with_children_cancels_a_three_level_tree_and_audits_each(make_django_runtime):
    runtime = make_django_runtime(_registry())
    root = runtime.client().root.get_or_create("r")
    executor.drain(runtime, timeout=5)
    mid, bound = root.children()
    [leaf] = mid.children()
    assert leaf.parent() == mid and mid.parent() == root
    assert root.cancel(reason="stop", children=True)
    for handle in (root, mid, bound, leaf):
        assert handle.workflow_state() == ports.CANCELLED
        [row] = runtime.store.operator_actions(handle.actor_id)
        assert row.action == "cancel" and row.who == "python"


def test_a_parent_failure_cancels_its_parent_close_children_only(make_django_runtime):
    runtime = make_django_runtime(_registry())
    root = runtime.client().root.get_or_create("r")
    executor.drain(runtime, timeout=5)
    root.send("go", None)
    executor.drain(runtime, timeout=5)
    mid, bound = root.children()
    assert root.workflow_state() == ports.FAILED
    assert bound.workflow_state() == ports.CANCELLED and mid.workflow_state() == "sleeping"
    assert runtime.store.operator_actions(bound.actor_id)[0].who == "parent_close"
