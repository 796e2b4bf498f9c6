"""``manage.py rivet <action> --state/--name/--attr/--since/--until`` and ``rivet list --attr/--since/--until``
(DESIGN.md section 19): the action on exactly the actors the filter selects, each audited, a dry run that
writes nothing."""

from __future__ import annotations

import io

import pytest
from django.core.management import CommandError, call_command

from rivet_workflows import models
from rivet_workflows.engine.model import ports
from tests.api.support import rivet  # noqa: F401 - fixture


def run(*args: str) -> str:
    out = io.StringIO()
    call_command("rivet", *args, stdout=out, stderr=io.StringIO())
    return out.getvalue()


def _tag(rivet, actor_id: str, **attributes) -> None:  # noqa: F811
    store = rivet.runtime.store
    token = store.claim_for_operator(actor_id, "test", 30)
    assert store.commit(actor_id, token, ports.Commit(attributes=attributes, release=True)).ok


@pytest.fixture
def waiters(rivet):  # noqa: F811
    ids = {k: rivet.client.waiter.get_or_create(k).actor_id for k in ("a", "b", "c")}
    rivet.drain()
    _tag(rivet, ids["a"], customer="c-42")
    _tag(rivet, ids["b"], customer="c-42")
    _tag(rivet, ids["c"], customer="c-7")
    return ids


def test_pause_by_attribute_and_time_pauses_exactly_those_and_audits_each(rivet, waiters):  # noqa: F811
    since = rivet.runtime.store.get_actor(waiters["a"]).created_at.isoformat()
    rows = list(models.Actor.objects.order_by("pk").values())
    dry = run("pause", "--attr", "customer=c-42", "--since", since, "--dry-run")
    assert f"would be paused: 1 {waiters['b']}" in dry and "matched: 1" in dry
    assert list(models.Actor.objects.order_by("pk").values()) == rows  # the dry run wrote nothing
    assert not models.OperatorAction.objects.exists()
    out = run("pause", "--name", "waiter", "--attr", "customer=c-42", "--reason", "incident")
    assert f"paused: 2 {waiters['a']} {waiters['b']}" in out
    audited = models.OperatorAction.objects.values_list("actor_id", "action", "who", "reason")
    assert sorted(audited) == sorted((waiters[k], "bulk_pause", "command", "incident") for k in ("a", "b"))
    assert rivet.runtime.store.get_actor(waiters["c"]).workflow_state == "sleeping"
    out = run("resume", "--state", "paused")
    assert "resumed: 2" in out


def test_list_by_attribute_shows_the_attributes(rivet, waiters):  # noqa: F811
    out = run("list", "--attr", "customer=c-7")
    assert waiters["c"] in out and waiters["a"] not in out and '"customer": "c-7"' in out
    assert "0 actors" in run("list", "--attr", "customer=c-42", "--until", "2000-01-01T00:00:00Z")


def test_bad_filters_are_command_errors(rivet, waiters):  # noqa: F811
    with pytest.raises(CommandError, match="KEY=VALUE"):
        run("pause", "--attr", "customer")
    with pytest.raises(CommandError, match="ISO 8601"):
        run("cancel", "--since", "tuesday")
    with pytest.raises(CommandError, match="unknown state"):
        run("retry", "--state", "sleepy")
    with pytest.raises(CommandError, match="say which workflows to replay"):
        run("replay")
    with pytest.raises(CommandError, match="--dry-run goes with a filter"):
        run("pause", "--name", "waiter", "--dry-run")
