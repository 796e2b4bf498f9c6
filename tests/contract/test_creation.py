"""Creating actors (ENGINE-SEMANTICS.md section 10): one actor per key under concurrency, created due, and
``on_create`` done before the workflow can run. Runs on every store (memory here, Django in
tests/integration/test_contract_on_django.py)."""

from __future__ import annotations

import threading
from typing import Any

import pytest

from rivet_workflows.engine.model import errors, ports
from rivet_workflows.engine.model.definitions import workflow


def _in_threads(h: Any, fn: Any, count: int = 8) -> list[Any]:
    """``fn(i)`` on ``count`` threads released together; results (or the exception raised) by index."""
    barrier = threading.Barrier(count)
    results: list[Any] = [None] * count
    close = getattr(h.runtime.store, "close_thread_connection", None)

    def target(i: int) -> None:
        try:
            barrier.wait(timeout=30)
            results[i] = fn(i)
        except Exception as exc:  # checked by the test
            results[i] = exc
        finally:
            if close is not None:
                close()

    threads = [threading.Thread(target=target, args=(i,)) for i in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    return results


async def _count_once(ctx):
    await ctx.step("count", lambda step: step.state.update(runs=step.state["runs"] + 1))
    return "done"


def _counting_workflow(**options: Any) -> Any:
    return workflow(run=_count_once, state={"runs": 0}, **options)


def test_concurrent_get_or_create_of_one_key_makes_one_actor_that_runs_once(h):
    h.setup(wf=_counting_workflow())
    client = h.runtime.client()
    handles = _in_threads(h, lambda i: client.wf.get_or_create("same", input={"caller": i}))
    assert all(not isinstance(handle, Exception) for handle in handles), handles
    assert len({handle.actor_id for handle in handles}) == 1
    actor_id = handles[0].actor_id
    h.drain()
    record = h.actor(actor_id)
    assert record.workflow_state == ports.COMPLETED and record.state == {"runs": 1}
    assert h.history(actor_id)["count"].attempts == 1


def test_concurrent_create_of_one_key_succeeds_once(h):
    h.setup(wf=_counting_workflow())
    client = h.runtime.client()
    results = _in_threads(h, lambda i: client.wf.create("same", input={"caller": i}))
    created = [r for r in results if not isinstance(r, Exception)]
    refused = [r for r in results if isinstance(r, Exception)]
    assert len(created) == 1 and len(refused) == 7
    assert all(isinstance(r, errors.ActorAlreadyExistsError) for r in refused), refused
    record = h.actor(created[0].actor_id)
    assert record.input == {"caller": results.index(created[0])}  # the winner's input, not overwritten
    h.drain()
    assert h.actor(created[0].actor_id).state == {"runs": 1}


@pytest.mark.parametrize("how", ["create", "get_or_create"])
def test_created_workflow_is_due_woken_and_runs(h, how):
    h.setup(wf=_counting_workflow())
    store = h.runtime.store
    handle = getattr(h.runtime.client().wf, how)("k")
    record = handle.record()
    assert record.workflow_state == ports.PENDING and record.lease_owner is None
    assert record.wake_at is not None and record.wake_at <= store.now()
    assert h.runtime.dispatcher.woken == [handle.actor_id]
    h.drain()
    assert handle.workflow_state() == ports.COMPLETED and handle.record().output == "done"


def test_create_of_an_existing_key_changes_nothing(h):
    h.setup(wf=_counting_workflow())
    client = h.runtime.client()
    first = client.wf.create("k", input={"n": 1})
    h.drain()
    before = first.record()
    with pytest.raises(errors.ActorAlreadyExistsError):
        client.wf.create("k", input={"n": 2})
    after = first.record()
    assert (after.input, after.state, after.workflow_state, after.wake_at) == (
        before.input,
        before.state,
        before.workflow_state,
        before.wake_at,
    )
    assert h.runtime.dispatcher.woken == [first.actor_id]  # no second wake-up


@pytest.mark.parametrize("how", ["create", "get_or_create"])
def test_on_create_runs_before_the_actor_is_due_and_its_state_reaches_the_first_step(h, how):
    seen: dict[str, Any] = {}

    def on_create(c, input):
        seen["wake_at_during_on_create"] = h.runtime.store.get_actor(c.actor_id).wake_at
        c.state["greeting"] = f"hello {input['name']}"

    async def run(ctx):
        return await ctx.step("first", lambda step: dict(step.state))

    h.setup(wf=workflow(run=run, state={"n": 0}, on_create=on_create))
    handle = getattr(h.runtime.client().wf, how)("k", input={"name": "ada"})
    assert seen["wake_at_during_on_create"] is None  # not due while the hook ran
    record = handle.record()
    assert record.wake_at is not None and record.wake_at <= h.runtime.store.now()
    assert h.runtime.dispatcher.woken == [handle.actor_id]
    h.drain()
    assert handle.record().output == {"n": 0, "greeting": "hello ada"}


def test_a_failing_on_create_leaves_nothing_behind_and_the_key_can_be_created_again(h):
    """Creation and ``on_create`` succeed or fail together: a hook that raised left a half-created actor
    that never ran and whose key stayed taken (``get_or_create`` then said ``created: false``)."""
    fail = [True]

    def on_create(c):
        c.state["half"] = True
        if fail[0]:
            raise ValueError("no")

    h.setup(wf=_counting_workflow(on_create=on_create))
    for create in (
        lambda: h.runtime.client().wf.create("k"),
        lambda: h.runtime.client().wf.get_or_create("k"),
    ):
        with pytest.raises(ValueError, match="no"):
            create()
        assert h.runtime.store.find_actor("wf", ["k"]) is None
    assert h.runtime.dispatcher.woken == []
    fail[0] = False
    handle = h.runtime.client().wf.get_or_create("k")
    h.drain()
    assert h.actor(handle.actor_id).workflow_state == ports.COMPLETED
    assert h.actor(handle.actor_id).state["half"] is True


def test_create_of_an_existing_key_reports_it_even_when_the_state_cannot_be_built(h):
    def create_state(input):
        if input is None:
            raise ValueError("an input is needed")
        return {"runs": 0, "input": input}

    h.setup(wf=workflow(run=_count_once, create_state=create_state))
    client = h.runtime.client()
    client.wf.create("k", input=1)
    with pytest.raises(errors.ActorAlreadyExistsError):
        client.wf.create("k")
    with pytest.raises(ValueError):
        client.wf.create("new")
    assert h.runtime.store.find_actor("wf", ["new"]) is None


def test_ctx_input_is_none_for_an_actor_created_without_input(h):
    """docs/howto/workflows.md: ``ctx.input`` is None without input (read it with a default)."""
    seen: list = []

    async def run(ctx):
        seen.append(ctx.input)
        return (ctx.input or {}).get("sku", "none")

    h.setup(wf=workflow(run=run))
    aid = h.start()
    h.drain()
    assert seen == [None] and h.actor(aid).output == "none"
