"""Fork (DESIGN.md section 19): a new actor of the same type starts from a copy of another's history, with
its own input and state; the copied steps replay, the rest runs fresh; the source is untouched."""

from __future__ import annotations

import dataclasses

import pytest

from rivet_workflows.engine.model import errors, ports
from rivet_workflows.engine.model.definitions import queue, workflow
from rivet_workflows.engine.model.errors import CriticalError
from rivet_workflows.engine.operate import forks


def _checkout(h, calls: list):
    """A checkout whose ``charge`` step fails (no retries) for a negative amount in the input."""

    def charge(step, amount):
        calls.append(("charge", amount))
        if amount < 0:
            raise CriticalError(f"bad amount {amount}")
        return f"charged {amount}"

    async def run(ctx):
        amount = ctx.input["amount"]
        await ctx.step("validate", lambda s: calls.append(("validate", None)) or "ok")
        await ctx.step("reserve", lambda s: calls.append(("reserve", None)) or "r-1")
        return await ctx.step("charge", lambda s: charge(s, amount), max_retries=0)

    h.setup(wf=workflow(run=run))


def test_a_fork_of_a_failed_run_with_corrected_input_completes_while_the_source_stays_failed(h):
    calls: list = []
    _checkout(h, calls)
    source = h.runtime.client().wf.get_or_create("order-1", input={"amount": -5})
    h.drain()
    assert source.workflow_state() == ports.FAILED
    before = h.snapshot(source.actor_id)

    forked = source.fork(input={"amount": 5}, reason="typo in the amount")
    h.drain()

    assert forked.actor_id != source.actor_id and forked.name == "wf"
    assert forked.key[0] == "order-1" and forked.key[1].startswith(forks.FORK_SUFFIX)
    assert forked.workflow_state() == ports.COMPLETED
    assert forked.record().output == "charged 5" and forked.record().input == {"amount": 5}
    # the copied steps replayed; only the failed one ran again, with the new amount
    assert calls == [("validate", None), ("reserve", None), ("charge", -5), ("charge", 5)]
    # the source: still failed, row, history and audit as they were but for its one fork row
    row, history, audit = h.snapshot(source.actor_id)
    assert source.workflow_state() == ports.FAILED
    assert (row, history) == before[:2] and audit[1:] == before[2]
    assert audit[0]["action"] == "fork" and audit[0]["who"] == "python"
    assert repr(forked.key) in audit[0]["reason"] and "typo in the amount" in audit[0]["reason"]
    [new_row] = h.runtime.store.operator_actions(forked.actor_id)
    assert new_row.action == "fork" and source.actor_id in new_row.reason
    assert "typo in the amount" in new_row.reason


def test_a_fork_at_a_step_reruns_that_step_and_what_follows_only(h):
    calls: list = []
    _checkout(h, calls)
    source = h.runtime.client().wf.get_or_create("order-2", input={"amount": 7})
    h.drain()
    assert source.record().output == "charged 7"
    calls.clear()

    forked = source.fork("reserve", key="order-2-again")
    assert forked.key == ["order-2-again"]
    assert list(h.history(forked.actor_id)) == ["validate"]  # up to, not including, reserve
    h.drain()

    assert forked.record().output == "charged 7"
    assert calls == [("reserve", None), ("charge", 7)]  # validate was not called again
    assert h.history(forked.actor_id)["validate"].data == h.history(source.actor_id)["validate"].data
    assert source.workflow_state() == ports.COMPLETED


def test_each_fork_gets_its_own_key_and_a_taken_key_is_refused(h):
    calls: list = []
    _checkout(h, calls)
    source = h.runtime.client().wf.get_or_create("order-3", input={"amount": 1})
    h.drain()
    first, second = source.fork(), source.fork()
    assert first.key != second.key and first.actor_id != second.actor_id
    audit_before = h.runtime.store.operator_actions(source.actor_id)

    with pytest.raises(errors.ActorAlreadyExistsError) as caught:
        source.fork(key=first.key)
    assert caught.value.http_status == 409
    with pytest.raises(errors.ActorAlreadyExistsError):
        source.fork(key="order-3")  # the source's own key
    assert h.runtime.store.operator_actions(source.actor_id) == audit_before


@pytest.mark.parametrize(
    ("entry_id", "error", "status"),
    [("nope", errors.EntryNotFoundError, 404), ("nap", errors.InvalidReplayTargetError, 400)],
)
def test_a_fork_at_an_unknown_or_non_step_entry_is_refused_and_writes_nothing(h, entry_id, error, status):
    async def run(ctx):
        await ctx.step("a", lambda s: 1)
        await ctx.sleep("nap", 3600)
        return "done"

    h.setup(wf=workflow(run=run))
    source = h.runtime.client().wf.get_or_create("s")
    h.drain()
    before = h.snapshot(source.actor_id)
    count = len(h.runtime.store.list_actors())
    with pytest.raises(error) as caught:
        source.fork(entry_id)
    assert caught.value.http_status == status
    assert h.snapshot(source.actor_id) == before and len(h.runtime.store.list_actors()) == count


def test_a_fork_copies_received_messages_from_history_and_waits_on_its_own_queue(h):
    """The messages the source received are in its history entries (bodies included): the fork replays
    them without having them in its queue; a message still pending for the source is not the fork's."""

    async def run(ctx):
        [first] = await ctx.queue.next_batch("first", names="go")
        [second] = await ctx.queue.next_batch("second", names="go")
        return f"{first.body}+{second.body}"

    h.setup(wf=workflow(run=run, queues={"go": queue()}))
    source = h.runtime.client().wf.get_or_create("s")
    h.drain()
    h.send(source.actor_id, "go", "one")
    h.drain()
    assert source.workflow_state() != ports.COMPLETED

    forked = source.fork()
    assert h.runtime.store.pending_messages(forked.actor_id, None, 10) == []
    h.drain()
    assert forked.workflow_state() not in ports.FINISHED_STATES  # waits for its own second message
    h.send(forked.actor_id, "go", "fork-two")
    h.drain()
    assert forked.record().output == "one+fork-two"
    h.send(source.actor_id, "go", "two")
    h.drain()
    assert source.record().output == "one+two"


def test_a_fork_does_not_complete_the_sources_completable_message(h):
    """A completable message the source received and had not answered: its sender waits on the source,
    so the fork's copy is closed and the fork's ``complete`` answers nobody (no error either)."""
    seen: list = []

    async def run(ctx):
        [msg] = await ctx.queue.next_batch("ask", names="go", completable=True)
        await ctx.sleep("pause", 3600)
        seen.append(msg.completed)
        await msg.complete("answer")
        return msg.body

    h.setup(wf=workflow(run=run, queues={"go": queue()}))
    source = h.runtime.client().wf.get_or_create("s")
    h.drain()
    message = h.send(source.actor_id, "go", "q", completable=True)
    h.drain()
    forked = source.fork(state=None)
    entries = h.history(forked.actor_id)
    assert entries["ask:0"].data["body"] == "q" and entries["ask:0"].data["completed"] is True
    assert not h.history(source.actor_id)["ask:0"].data["completed"]
    assert h.runtime.store.get_message(message.id).status == ports.MESSAGE_RECEIVED


def test_a_fork_of_a_rolled_back_run_keeping_a_compensated_step_is_refused(h):
    calls: list = []

    async def run(ctx):
        await ctx.rollback_checkpoint("start")
        await ctx.step("reserve", lambda s: "r", rollback=lambda s, out: calls.append("release"))
        await ctx.step("notify", lambda s: (_ for _ in ()).throw(CriticalError("down")))
        return "ok"

    h.setup(wf=workflow(run=run))
    source = h.runtime.client().wf.get_or_create("s")
    h.drain()
    assert source.workflow_state() == ports.FAILED and calls == ["release"]
    before = h.snapshot(source.actor_id)
    with pytest.raises(errors.WorkflowRolledBackError) as caught:
        source.fork()
    assert caught.value.metadata["replay_from"] == "reserve"
    with pytest.raises(errors.WorkflowRolledBackError):
        source.fork("notify")
    assert h.snapshot(source.actor_id) == before
    forked = source.fork("reserve")  # keeps only what the rollback did not undo
    copied = h.history(forked.actor_id)
    assert "reserve" not in copied and "notify" not in copied


def test_a_fork_with_a_given_state_starts_with_it(h):
    async def run(ctx):
        return await ctx.step("read", lambda s: s.state)

    h.setup(wf=workflow(run=run, state={"n": 1}))
    source = h.runtime.client().wf.get_or_create("s")
    h.drain()
    forked = source.fork(state={"n": 41}, key=["s", 2])
    kept = source.fork("read")
    h.drain()
    assert forked.record().output == {"n": 1}  # the whole history: read replays its recorded output
    assert kept.record().output == {"n": 1}
    again = source.fork("read", state={"n": 41})
    h.drain()
    assert again.record().output == {"n": 41} and again.state() == {"n": 41}
    assert source.state() == {"n": 1}


def test_the_fork_copy_keeps_the_recorded_entries_fields(h):
    calls: list = []
    _checkout(h, calls)
    source = h.runtime.client().wf.get_or_create("order-9", input={"amount": 2})
    h.drain()
    forked = source.fork("charge")
    original, copy = h.history(source.actor_id), h.history(forked.actor_id)
    assert list(copy) == ["validate", "reserve"]
    for key in copy:
        a, b = dataclasses.asdict(original[key]), dataclasses.asdict(copy[key])
        a.pop("seq"), b.pop("seq")
        assert a == b
    assert copy["validate"].seq < copy["reserve"].seq


def test_a_fork_whose_new_input_takes_another_branch_is_refused_as_diverged(h):
    async def run(ctx):
        if ctx.input["express"]:
            await ctx.step("courier", lambda s: "courier")
        else:
            await ctx.step("post", lambda s: "post")
        return await ctx.step("done", lambda s: "done")

    h.setup(wf=workflow(run=run))
    source = h.runtime.client().wf.get_or_create("s", input={"express": True})
    h.drain()
    count = len(h.runtime.store.list_actors())
    with pytest.raises(errors.HistoryDivergedError) as caught:
        source.fork(input={"express": False})
    assert caught.value.http_status == 409 and caught.value.metadata["operation"] == "fork"
    assert len(h.runtime.store.list_actors()) == count
    assert h.runtime.store.operator_actions(source.actor_id) == []
    forked = source.fork("courier", input={"express": False})  # nothing of the branch copied: allowed
    h.drain()
    assert "post" in h.history(forked.actor_id) and forked.record().output == "done"


def test_afork_is_the_async_twin(h):
    import asyncio

    async def run(ctx):
        return await ctx.step("a", lambda s: ctx.input)

    h.setup(wf=workflow(run=run))
    source = h.runtime.client().wf.get_or_create("s", input=1)
    h.drain()
    forked = asyncio.run(source.afork("a", input=2))
    h.drain()
    assert forked.record().output == 2 and source.record().output == 1


def test_a_fork_of_a_sleeping_run_keeps_the_recorded_deadline(h):
    calls: list = []

    async def run(ctx):
        await ctx.step("before", lambda s: calls.append("before"))
        await ctx.sleep("nap", 60)
        return await ctx.step("after", lambda s: calls.append("after") or "woke")

    h.setup(wf=workflow(run=run), manual_clock=True)
    source = h.runtime.client().wf.get_or_create("s")
    h.drain()
    deadline = h.history(source.actor_id)["nap"].data["deadline"]
    h.clock.advance(30)
    forked = source.fork()
    h.drain()
    assert forked.workflow_state() == ports.SLEEPING and forked.record().wake_at == deadline
    assert calls == ["before"]
    h.clock.advance(31)
    h.drain()
    assert forked.record().output == "woke" and source.record().output == "woke"
    assert calls == ["before", "after", "after"]


def _traced(h, calls: list):
    """A run that sets attributes twice, writes to streams from workflow code and from a step whose first
    attempt fails (its items discarded), closes ``log``, then runs ``after`` and sets one more attribute."""

    def think(step):
        calls.append(("think", step.attempt))
        for token in ("a", "b"):
            step.stream("tokens").write(f"{token}{step.attempt}")
        if step.attempt == 1:
            raise RuntimeError("the model call failed")
        return "ok"

    def after(step):
        calls.append(("after", step.attempt))
        step.stream("tokens").write("late")
        return "done"

    async def run(ctx):
        await ctx.set_attributes({"customer": "c-0"})
        await ctx.set_attributes({"customer": "c-42", "plan": "pro"})
        await ctx.stream("log").write("started")
        await ctx.step("think", think, retry_backoff_base=0)
        summary = await ctx.stream("tokens").write("summary")
        await ctx.stream("log").close()
        await ctx.step("after", after)
        await ctx.set_attributes({"stage": "late"})
        return summary

    h.setup(wf=workflow(run=run))


def _items(handle, name: str) -> list:
    return [(i.offset, i.value, i.attempt) for i in handle.read_stream(name, timeout=0)]


def test_a_fork_starts_with_the_attributes_and_stream_items_its_copied_history_wrote(h):
    calls: list = []
    _traced(h, calls)
    source = h.runtime.client().wf.get_or_create("trace-1")
    h.drain()
    assert source.record().output == 4  # a1, b1 (discarded), a2, b2, then the summary
    calls.clear()

    forked = source.fork("after")

    # before it runs: the attributes its copied entries set (merged in order) and their stream items,
    # the failed attempt's items left behind and the rest renumbered from 0; log's close was copied
    assert forked.attributes() == {"customer": "c-42", "plan": "pro"}
    assert _items(forked, "tokens") == [(0, "a2", 2), (1, "b2", 2), (2, "summary", None)]
    assert [i.value for i in forked.read_stream("log")] == ["started"]  # closed: the read ends
    h.drain()

    assert forked.workflow_state() == ports.COMPLETED
    assert forked.record().output == 2  # the copied write replays at its offset in the fork
    assert calls == [("after", 1)]  # think was not run again
    assert [i.value for i in forked.read_stream("tokens")] == ["a2", "b2", "summary", "late"]
    assert forked.attributes() == {"customer": "c-42", "plan": "pro", "stage": "late"}
    # the source keeps its own items
    assert [i.value for i in source.read_stream("tokens")] == ["a2", "b2", "summary", "late"]
    assert [i.offset for i in source.read_stream("tokens")] == [2, 3, 4, 5]
    found = h.runtime.client().list_actors(attributes={"customer": "c-42"})
    assert {a.actor_id for a in found.items} == {source.actor_id, forked.actor_id}


def test_a_fork_of_the_whole_history_carries_every_attribute_and_item(h):
    calls: list = []
    _traced(h, calls)
    source = h.runtime.client().wf.get_or_create("trace-2")
    h.drain()
    calls.clear()

    forked = source.fork()
    assert forked.attributes() == source.attributes() == {"customer": "c-42", "plan": "pro", "stage": "late"}
    h.drain()

    assert forked.workflow_state() == ports.COMPLETED and calls == []
    assert [i.value for i in forked.read_stream("tokens")] == ["a2", "b2", "summary", "late"]
    assert [i.value for i in forked.read_stream("log")] == ["started"]
    found = h.runtime.client().list_actors(attributes={"stage": "late"})
    assert {a.actor_id for a in found.items} == {source.actor_id, forked.actor_id}


def test_a_fork_before_a_stream_write_leaves_its_item_behind(h):
    _traced(h, [])
    source = h.runtime.client().wf.get_or_create("trace-3")
    h.drain()

    forked = source.fork("think")
    assert forked.attributes() == {"customer": "c-42", "plan": "pro"}
    assert _items(forked, "tokens") == []
    assert _items(forked, "log") == [(0, "started", None)]
    h.drain()
    assert forked.record().output == 4  # think ran afresh in the fork: its first attempt failed again
    assert [i.value for i in forked.read_stream("tokens")] == ["a2", "b2", "summary", "late"]
