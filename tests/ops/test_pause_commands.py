"""``manage.py rivet pause|resume --actor ID | --name TYPE`` (DESIGN.md section 12)."""

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
    assert f"paused: 1 {two.actor_id}" in out and "unchanged (paused already or finished): 1" in out
    assert other.workflow_state() != "paused"
    out = run("resume", "--name", "waiter")
    assert "resumed: 2" in out
    assert "unchanged (not paused): 1" in run("resume", "--actor", one.actor_id)
    assert one.workflow_state() == two.workflow_state() == "sleeping"
    rows = rivet.runtime.store.operator_actions(one.actor_id)  # newest first; the no-ops wrote none
    assert [(r.action, r.who, r.reason) for r in rows] == [
        ("resume", "command", None),
        ("pause", "command", "deploy"),
    ]


def test_pause_needs_a_choice_and_a_known_actor(rivet):  # noqa: F811
    with pytest.raises(CommandError, match="--actor ID or --name TYPE"):
        run("pause")
    with pytest.raises(CommandError, match="ActorNotFoundError"):
        run("resume", "--actor", "0" * 32)
