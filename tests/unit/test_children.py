"""Parent and child actors (DESIGN.md section 20) on MemoryStore: creations from inside a run record their
parent, ``ctx.spawn`` is replay-safe, ``cancel(children=True)`` cancels the tree with an audit row each, and
``parent_close="cancel"`` follows a parent's failure or cancel."""

from __future__ import annotations

import pytest

import rivet_workflows as rw
from rivet_workflows.engine.model import ports
from rivet_workflows.testing import drain, make_runtime

CREATED: list = []


async def _leaf(ctx):
    await ctx.queue.next("forever", names=["never"])


async def _mid(ctx):
    # a child made with step.client() inside a step body
    await ctx.step("leaf", lambda step: step.client().leaf.get_or_create([*ctx.key, "leaf"]).actor_id)
    await ctx.queue.next("forever", names=["never"])


async def _root(ctx):
    child = await ctx.spawn("mid", [ctx.key[0], "mid"], {"from": "root"})
    CREATED.append(child.actor_id)
    await ctx.queue.next("go", names=["go"])
    if ctx.input == "fail":
        raise rw.CriticalError("the parent fails")


def _runtime(**extra):
    types = {
        "root": rw.workflow(run=_root, queues=["go"]),
        "mid": rw.workflow(run=_mid),
        "leaf": rw.workflow(run=_leaf),
        **extra,
    }
    return make_runtime(rw.setup(use=types))


@pytest.fixture(autouse=True)
def _reset():
    CREATED.clear()


def test_spawn_and_step_client_record_the_parent_and_a_replay_creates_nothing_again():
    runtime = _runtime()
    client = runtime.client()
    root = client.root.get_or_create("r")
    drain(runtime, timeout=1)
    [mid] = root.children()
    assert mid.name == "mid" and mid.key == ["r", "mid"] and mid.record().input == {"from": "root"}
    [leaf] = mid.children()
    assert leaf.key == ["r", "mid", "leaf"] and leaf.children() == []
    assert leaf.parent() == mid and mid.parent() == root and root.parent() is None
    assert [e.key for e in runtime.store.load_history(root.actor_id)][:1] == ["spawn mid r mid"]
    root.send("go", None)  # the root runs again: it replays the spawn from its history
    drain(runtime, timeout=1)
    assert root.workflow_state() == "completed"
    assert CREATED == [mid.actor_id, mid.actor_id]  # the same child, both times
    assert len(runtime.store.list_actors("mid")) == 1


def test_an_actor_created_from_outside_a_run_has_no_parent():
    runtime = _runtime()
    handle = runtime.client().leaf.get_or_create("alone")
    assert handle.record().parent_id is None and handle.parent() is None


def test_cancelling_a_parent_with_children_cancels_a_three_level_tree_and_audits_each():
    runtime = _runtime()
    root = runtime.client().root.get_or_create("r")
    drain(runtime, timeout=1)
    [mid] = root.children()
    [leaf] = mid.children()
    assert {h.workflow_state() for h in (root, mid, leaf)} == {"sleeping"}
    assert root.cancel(reason="shutting down", children=True) is True
    for handle in (root, mid, leaf):
        assert handle.workflow_state() == ports.CANCELLED
        [row] = runtime.store.operator_actions(handle.actor_id)
        assert (row.action, row.who) == ("cancel", "python")
    assert runtime.store.operator_actions(root.actor_id)[0].reason == "shutting down"
    assert runtime.store.operator_actions(mid.actor_id)[0].reason == (
        f"cancelled with its parent {root.actor_id}: shutting down"
    )
    assert runtime.store.operator_actions(leaf.actor_id)[0].reason.startswith(
        f"cancelled with its parent {mid.actor_id}"
    )


def test_cancelling_without_children_abandons_them():
    runtime = _runtime()
    root = runtime.client().root.get_or_create("r")
    drain(runtime, timeout=1)
    assert root.cancel() is True
    [mid] = root.children()
    assert mid.workflow_state() == "sleeping" and runtime.store.operator_actions(mid.actor_id) == []
    # a finished parent: children=True still cancels its unfinished descendants
    assert root.cancel(children=True) is False
    assert mid.workflow_state() == ports.CANCELLED and mid.children()[0].workflow_state() == ports.CANCELLED


@pytest.mark.parametrize("ending", ["fail", "cancel"])
def test_parent_close_cancel_cancels_the_child_when_the_parent_fails_or_is_cancelled(ending):
    async def parent(ctx):
        await ctx.spawn("bound", "b")
        await ctx.spawn("free", "f")
        await ctx.queue.next("go", names=["go"])
        raise rw.CriticalError("the parent fails")

    runtime = _runtime(
        parent=rw.workflow(run=parent, queues=["go"]),
        bound=rw.workflow(run=_mid, parent_close="cancel"),
        free=rw.workflow(run=_leaf),
    )
    handle = runtime.client().parent.get_or_create("p")
    drain(runtime, timeout=1)
    bound, free = handle.children()
    assert (bound.name, free.name) == ("bound", "free")
    if ending == "fail":
        handle.send("go", None)
        drain(runtime, timeout=1)
        assert handle.workflow_state() == ports.FAILED
    else:
        handle.cancel()
    assert bound.workflow_state() == ports.CANCELLED
    [row] = runtime.store.operator_actions(bound.actor_id)
    assert row.action == "cancel" and row.who == ("parent_close" if ending == "fail" else "python")
    assert free.workflow_state() == "sleeping"  # parent_close="abandon", the default
    assert bound.children()[0].workflow_state() == "sleeping"  # the leaf's type abandons


def test_parent_close_is_validated():
    with pytest.raises(ValueError, match="parent_close"):
        rw.workflow(run=_leaf, parent_close="kill")
