"""The dry run's read-only store: an explicit ``BaseStore`` that reads through and refuses every write."""

from __future__ import annotations

import inspect

import pytest

from rivet_workflows.engine.model import base_store, errors, ports
from rivet_workflows.engine.model.definitions import setup, workflow
from rivet_workflows.engine.operate import dry_run
from rivet_workflows.testing import ManualClock, make_runtime

READS = {
    "now": (),
    "get_actor": ("ACTOR",),
    "find_actor": ("w", ["a"]),
    "list_actors": (),
    "list_children": ("ACTOR",),
    "actor_counts": (),
    "find_actors": (ports.ActorFilter(),),
    "count_actors": (ports.ActorFilter(state="pending"),),
    "suspended_by_other_version": ("v1", 10),
    "load_history": ("ACTOR",),
    "load_for_run": ("ACTOR",),
    "next_deadline": (),
    "pending_messages": ("ACTOR", None, 10),
    "cron_list": (),
    "cron_due": (10,),
    "cron_next_deadline": (),
    "schedule_get": ("s",),
    "schedule_list": (),
    "schedule_due": (10,),
    "schedule_fires": ("s",),
    "schedule_next_deadline": (),
    "schedule_stale_fires": (None, 10),
    "flow_retry_at": ("ACTOR",),
    "operator_actions": ("ACTOR",),
    "stream_read": ("ACTOR", "s", 0, 10),
    "stream_names": ("ACTOR",),
    "stream_tail": ("ACTOR", "s", 5),
    "same_shard": ("ACTOR", "ACTOR"),
    "actor_id_for_key": ("order", ["k"]),
    "relay_pending": (10,),
}
WRITES = {
    "get_or_create_actor": ("w", ["b"], None, dict),
    "create_actor": ("w", ["b"], None, {}),
    "destroy_actor": ("ACTOR",),
    "defer_start": ("ACTOR", None, ports.UNSET, 5.0, None),
    "fork_actor": ("ACTOR", "w", ["f"], None, None, []),
    "claim": ("ACTOR", "me", 30.0),
    "claim_and_load": ("ACTOR", "me", 30.0),
    "claim_for_operator": ("ACTOR", "me", 30.0),
    "claim_due": ("me", 10, 30.0),
    "renew": ("ACTOR", 1, 30.0),
    "handoff": ("ACTOR", 1, "me", 30.0),
    "release": ("ACTOR", 1),
    "commit": ("ACTOR", 1, ports.Commit()),
    "run_in_commit": ("ACTOR", 1, ports.Commit),
    "send": ("ACTOR", "jobs", 1),
    "send_and_check": ("ACTOR", "jobs", 1),
    "complete_message": ("m1", None),
    "wait_for_messages": ("ACTOR", ["jobs"], 0.1),
    "watch_sends": ("ACTOR",),
    "wait_for_wakes": (0.1,),
    "run_action": ("ACTOR", lambda state: None, 1.0),
    "cron_upsert": (ports.CronRecord(actor_id="ACTOR", name="c", action="tick"),),
    "cron_delete": ("ACTOR", "c"),
    "cron_advance": ("c1", None, None),
    "cron_record_fire": ("c1", None, 1),
    "schedule_create": (ports.ScheduleRecord(schedule_id="s", actor="w"),),
    "schedule_set_paused": ("s", True, None),
    "schedule_delete": ("s",),
    "schedule_advance": ("s", None, None),
    "schedule_claim_tick": (None,),
    "schedule_retake_fire": ("s", None, None, None),
    "schedule_fire_done": ("s", None, "ok", None, None),
    "set_paused": ("ACTOR", True),
    "record_operator_action": (ports.OperatorActionRecord(actor_id="ACTOR", action="pause", who="me"),),
    "stream_write": ("ACTOR", "s", 1),
    "stream_close": ("ACTOR", "s"),
    "stream_close_all": ("ACTOR",),
    "stream_discard": ("ACTOR", "step", 2),
    "watch_stream": ("ACTOR",),
    "relay_sources": (),
    "relay_mark_delivered": ([1],),
    "relay_mark_failed": (1, "boom", True),
}


async def _run(ctx):
    await ctx.step("one", lambda step: 1)


@pytest.fixture
def stores():
    runtime = make_runtime(setup(use={"w": workflow(run=_run)}), clock=ManualClock())
    handle = runtime.client().w.get_or_create("a")
    return runtime.store, dry_run.ReadOnlyStore(runtime.store), handle.actor_id


def _args(args, actor_id):
    return tuple(actor_id if a == "ACTOR" else a for a in args)


def test_read_only_store_is_an_explicit_store():
    assert issubclass(dry_run.ReadOnlyStore, base_store.BaseStore)
    assert "__getattr__" not in vars(dry_run.ReadOnlyStore)
    assert not inspect.isabstract(dry_run.ReadOnlyStore)


def test_every_member_of_the_port_is_a_read_or_a_refused_write():
    members = {
        name for name, value in vars(ports.Store).items() if callable(value) and not name.startswith("_")
    }
    assert members - {"get_message", "cron_fires", "close_thread_connection", "release_connection"} == set(
        READS
    ) | set(WRITES)


@pytest.mark.parametrize("name", sorted(READS))
def test_reads_go_to_the_wrapped_store(stores, name):
    store, read_only, actor_id = stores
    args = _args(READS[name], actor_id)
    assert read_only.__class__.__dict__.get(name) is not None
    assert getattr(read_only, name)(*args) == getattr(store, name)(*args)


@pytest.mark.parametrize("name", sorted(WRITES))
def test_every_write_is_refused_and_changes_nothing(stores, name):
    store, read_only, actor_id = stores
    before = (store.get_actor(actor_id), store.load_history(actor_id), store.cron_list())
    with pytest.raises(errors.DryRunStop, match=name):
        getattr(read_only, name)(*_args(WRITES[name], actor_id))
    assert (store.get_actor(actor_id), store.load_history(actor_id), store.cron_list()) == before
