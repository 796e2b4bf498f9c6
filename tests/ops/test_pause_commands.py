"""``manage.py rivet pause|resume|cancel --actor ID | --name TYPE`` (DESIGN.md section 12): each actor's
outcome reported, one actor's refusal never stopping the others."""

from __future__ import annotations

import io

import pytest
from django.core.management import CommandError, call_command

from tests.api.support import rivet  # noqa: F401 - fixture


def run(*args: str) -> str:
    out = io.StringIO()
    call_command("rivet", *args, stdout=out)
    return out.getvalue()


def test_pause_and_resume_by_actor_and_by_type(rivet):  # noqa: F811
    one = rivet.client.waiter.get_or_create("a")
    two = rivet.client.waiter.get_or_create("b")
    other = rivet.client.reader.get_or_create("r")
    rivet.drain()
    out = run("pause", "--actor", one.actor_id, "--reason", "deploy")
    assert f"paused: 1 {one.actor_id}" in out
    assert one.workflow_state() == "paused" and one.record().pause_reason == "deploy"
    out = run("pause", "--name", "waiter")
    assert f"paused: 1 {two.actor_id}" in out and f"unchanged: 1\n  {one.actor_id} paused already" in out
    assert other.workflow_state() != "paused"
    out = run("resume", "--name", "waiter")
    assert "resumed: 2" in out
    assert f"unchanged: 1\n  {one.actor_id} not paused; nothing to resume" in run(
        "resume", "--actor", one.actor_id
    )
    assert one.workflow_state() == two.workflow_state() == "sleeping"
    rows = rivet.runtime.store.operator_actions(one.actor_id)  # newest first; the no-ops wrote none
    assert [(r.action, r.who, r.reason) for r in rows] == [
        ("resume", "command", None),
        ("pause", "command", "deploy"),
    ]


def test_pause_needs_a_choice_and_a_known_actor(rivet):  # noqa: F811
    with pytest.raises(CommandError, match="--actor ID or --name TYPE"):
        run("pause")
    with pytest.raises(CommandError, match="1 actor was not resumed: 0{32} refused: .*no actor"):
        run("resume", "--actor", "0" * 32)


def test_cancel_by_actor_and_by_type_cancels_paused_workflows_too(rivet):  # noqa: F811
    paused = rivet.client.waiter.get_or_create("a")
    sleeping = rivet.client.waiter.get_or_create("b")
    other = rivet.client.reader.get_or_create("r")
    rivet.drain()
    assert paused.pause() is True
    out = run("cancel", "--name", "waiter", "--reason", "retired")
    assert f"cancelled: 2 {paused.actor_id} {sleeping.actor_id}" in out
    assert paused.workflow_state() == sleeping.workflow_state() == "cancelled"
    assert other.workflow_state() == "sleeping"
    row = rivet.runtime.store.operator_actions(paused.actor_id)[0]
    assert (row.action, row.who, row.reason) == ("cancel", "command", "retired")
    out = run("cancel", "--actor", paused.actor_id)
    assert f"unchanged: 1\n  {paused.actor_id} the workflow is cancelled already; nothing to cancel" in out


def test_a_refused_actor_is_reported_and_the_others_are_still_acted_on(rivet):  # noqa: F811
    first = rivet.client.waiter.get_or_create("a")
    last = rivet.client.waiter.get_or_create("b")
    rivet.drain()
    unknown = "0" * 32
    out = io.StringIO()
    with pytest.raises(CommandError, match=f"1 actor was not cancelled: {unknown} refused"):
        call_command(
            "rivet",
            "cancel",
            "--actor",
            first.actor_id,
            "--actor",
            unknown,
            "--actor",
            last.actor_id,
            stdout=out,
        )
    assert f"cancelled: 2 {first.actor_id} {last.actor_id}" in out.getvalue()
    assert f"refused: 1\n  {unknown} refused: " in out.getvalue()
    assert first.workflow_state() == last.workflow_state() == "cancelled"


def test_cancel_with_children_cancels_the_descendants_each_audited(rivet):  # noqa: F811
    store = rivet.runtime.store
    parent = rivet.client.waiter.get_or_create("p")
    child, _ = store.create_actor("waiter", ["c"], None, {}, due=True, parent_id=parent.actor_id)
    grandchild, _ = store.create_actor("waiter", ["g"], None, {}, due=True, parent_id=child.actor_id)
    rivet.drain()
    out = run("cancel", "--actor", parent.actor_id, "--children", "--reason", "retired")
    assert f"cancelled children: 2 {child.actor_id} {grandchild.actor_id}" in out
    for actor_id in (parent.actor_id, child.actor_id, grandchild.actor_id):
        assert store.get_actor(actor_id).workflow_state == "cancelled"
        assert store.operator_actions(actor_id)[0].who == "command"
