"""A step body's ``get_or_create`` of an actor on another shard rides on the step's commit as a relay row of
kind ``create``; the relay creates the actor through the client (DESIGN.md section 21). Two aliases on one
server (``default``, ``shard1``): SQLite, or PostgreSQL under ``DATABASE_URL``."""

from __future__ import annotations

import logging

import pytest

from rivet_workflows import models
from rivet_workflows.engine.model import errors, ports, shards
from rivet_workflows.engine.runtime import executor
from rivet_workflows.engine.runtime.relay import deliver_create, relay_runtime

from .conftest import both_databases, keys_on

pytestmark = both_databases


def _rows(alias: str = "default") -> list[tuple[str, str, str, bool, bool]]:
    """(kind, target, name, delivered, failed) of every relay row on ``alias``, in id order."""
    return [
        (r.kind, r.target_actor_id, r.name, r.delivered_at is not None, r.failed)
        for r in models.RelayMessage.objects.using(alias).order_by("id")
    ]


class Down:
    """Every store member of ``shard1`` raises ``StoreUnavailableError`` (its cluster is stopped)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, store: ports.Store) -> None:
        self.monkeypatch, self.store = monkeypatch, store
        for member in ("find_actor", "create_actor", "get_or_create_actor", "send_and_check", "send"):
            monkeypatch.setattr(store, member, self._down)

    @staticmethod
    def _down(*args, **kwargs):
        raise errors.StoreUnavailableError("the database is unavailable: connection refused")

    def up(self) -> None:
        self.monkeypatch.undo()


def test_a_step_creates_and_sends_to_an_actor_on_another_shard_while_that_shard_is_down(sharded, monkeypatch):
    store, client = sharded.store, sharded.registry.client()
    [me] = keys_on("default", "spawner", 1, "sp")
    [far] = keys_on("shard1", "inbox", 1, "far")
    expected_id = shards.actor_id_for_key("inbox", far, 256)
    assert store.actor_id_for_key("inbox", far) == expected_id
    down = Down(monkeypatch, store.stores["shard1"])
    spawner = client.spawner.get_or_create(me, {"target": far})
    executor.drain(sharded, timeout=10)
    # the step committed without reaching shard1: its create and sends wait on shard A, in order
    assert spawner.workflow_state() == ports.COMPLETED
    assert spawner.record().output == expected_id
    assert _rows() == [
        ("create", expected_id, "inbox", False, False),
        ("send", expected_id, "q", False, False),
        ("send", expected_id, "q", False, False),
    ]
    assert models.Actor.objects.using("shard1").count() == 0
    report = relay_runtime(sharded)  # shard1 still down: the create and the sends after it wait
    assert (report.delivered, report.failed, report.deferred) == (0, 0, 3)
    down.up()
    assert relay_runtime(sharded).delivered == 3
    executor.drain(sharded, timeout=10)
    inbox = client.inbox.get(far)
    assert inbox.actor_id == expected_id and store.alias_of(inbox.actor_id) == "shard1"
    record = inbox.record()
    # what a direct get_or_create does: the state, on_create once, the parent link, the input, due
    assert record.parent_id == spawner.actor_id and record.input == {"from": me}
    assert record.state == {"hooked": 1}
    assert record.workflow_state == ports.COMPLETED and record.output == [1, 2]
    assert [h.actor_id for h in spawner.children()] == [expected_id]
    assert [row[3:] for row in _rows()] == [(True, False)] * 3


def test_a_create_delivered_twice_creates_once(sharded):
    store, client = sharded.store, sharded.registry.client()
    [me] = keys_on("default", "spawner", 1, "twice")
    [far] = keys_on("shard1", "inbox", 1, "twice")
    spawner = client.spawner.get_or_create(me, {"target": far})
    row = ports.RelayRecord(
        id=1,
        source_actor_id=spawner.actor_id,
        target_actor_id=store.actor_id_for_key("inbox", far),
        name="inbox",
        body={"key": far, "input": {"from": me}},
        kind=ports.RELAY_CREATE,
    )
    deliver_create(sharded, row)
    deliver_create(sharded, row)  # the relay died before its mark: the row comes again
    assert models.Actor.objects.using("shard1").filter(name="inbox").count() == 1
    assert client.inbox.get(far).state() == {"hooked": 1}
    with pytest.raises(errors.ActorAlreadyExistsError):  # the key is someone else's id
        deliver_create(sharded, ports.RelayRecord(**{**row.__dict__, "target_actor_id": "0" * 32}))


def test_an_unknown_type_fails_the_create_for_good_and_the_sends_after_it(sharded, caplog):
    store, client = sharded.store, sharded.registry.client()
    [me] = keys_on("default", "counter", 1, "src")
    sender = client.counter.get_or_create(me).actor_id
    target = shards.actor_id_for_key("ghost", ["g"], 256)
    token = store.claim(sender, "me", 30)
    commit = ports.Commit(
        relay=[ports.RelayCreate(target, "ghost", ["g"], None, sender), (target, "q", 1, False)]
    )
    assert store.commit(sender, token, commit).relayed
    with caplog.at_level(logging.ERROR, logger="rivet_workflows"):
        report = relay_runtime(sharded)
    assert (report.delivered, report.failed) == (0, 2)
    assert [(kind, failed) for kind, _, _, _, failed in _rows()] == [("create", True), ("send", True)]
    assert "relay: create" in caplog.text and "ghost" in caplog.text


def test_get_from_a_step_names_an_actor_on_another_shard_without_reading_it(sharded, monkeypatch):
    store = sharded.store
    [far] = keys_on("shard1", "inbox", 1, "named")
    Down(monkeypatch, store.stores["shard1"])

    class Step:
        actor_id = shards.actor_id_for_key("spawner", keys_on("default", "spawner", 1, "g")[0], 256)

    types = sharded.client(step=Step())["inbox"]
    handle = types.get(far)  # no lookup on shard1 (it is down)
    assert handle.actor_id == store.actor_id_for_key("inbox", far) and handle.key == far
    [near] = keys_on("default", "inbox", 1, "near")
    with pytest.raises(errors.ActorNotFoundError):  # same shard: looked up as before
        types.get(near)


def test_create_and_get_or_create_outside_a_step_stay_direct_and_ids_repeat_after_destroy(sharded):
    client = sharded.registry.client()
    [far] = keys_on("shard1", "inbox", 1, "again")
    first = client.inbox.get_or_create(far)
    assert first.actor_id == shards.actor_id_for_key("inbox", far, 256) and first.state() == {"hooked": 1}
    first.send("q", "old")
    old_token = first.record().lease_token
    first.destroy()
    again = client.inbox.create(far)
    # the same id again, and nothing of the destroyed actor's: no message, a fresh state
    assert again.actor_id == first.actor_id
    assert sharded.store.pending_messages(again.actor_id, None, 10) == []
    assert again.state() == {"hooked": 1} and sharded.store.load_history(again.actor_id) == []
    # its fencing tokens start past the destroyed actor's: a late write of its executor is still refused
    assert again.record().lease_token > old_token > 10**15


def test_rivet_relay_lists_pending_and_failed_rows_of_every_shard(sharded, caplog):
    from io import StringIO

    from django.core.management import call_command
    from django.test import override_settings

    from .conftest import BASE, SHARDS

    store, client = sharded.store, sharded.registry.client()
    [me] = keys_on("default", "counter", 1, "cmd")
    sender = client.counter.get_or_create(me).actor_id
    target = shards.actor_id_for_key("ghost", ["g"], 256)
    token = store.claim(sender, "me", 30)
    commit = ports.Commit(relay=[ports.RelayCreate(target, "ghost", ["g"], None, sender)])
    assert store.commit(sender, token, commit).relayed

    def rivet(*args: str) -> list[str]:
        out = StringIO()
        with override_settings(RIVET_WORKFLOWS={**BASE, "SHARDS": SHARDS}):
            call_command("rivet", "relay", *args, stdout=out)
        return out.getvalue().splitlines()

    pending = rivet()
    assert pending[0] == "1 pending relay row" and "create" in pending[-1] and target in pending[-1]
    assert rivet("--failed")[0] == "0 failed relay rows"
    with caplog.at_level(logging.CRITICAL, logger="rivet_workflows"):
        relay_runtime(sharded)
    failed = rivet("--failed")
    assert failed[0] == "1 failed relay row"
    assert failed[-1].startswith("default") and "ghost" in failed[-1] and "ActorNotFoundError" in failed[-1]
    assert rivet()[0] == "0 pending relay rows"
