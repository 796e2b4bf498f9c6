"""Values are encoded once on the hot paths (DESIGN.md section 15): the serializer calls that carry a step's
output, the state a step leaves, or a sent body are counted (``serde`` patched to count)."""

from __future__ import annotations

import json
from collections import Counter

import pytest

from rivet_workflows.engine.model import serde
from rivet_workflows.engine.model.definitions import actor, queue, setup, workflow
from rivet_workflows.testing import drain, make_runtime
from tests.api.support import rivet  # noqa: F401 - fixture
from tests.api.test_api import api, post  # noqa: F401 - fixture

OUT, STATE, BODY = "output-7f3a", "state-7f3a", "body-7f3a"


@pytest.fixture
def calls(monkeypatch):
    """Counts of serializer calls by (direction, marker) for values holding one of the markers."""
    seen: Counter = Counter()
    encode, decode = serde._encode_value, serde.from_json

    def marks(value):
        text = json.dumps(value, default=lambda v: None)  # an Encoded value is not encoded again
        return [m for m in (OUT, STATE, BODY) if m in text]

    def counting_encode(value, where):
        for mark in marks(value):
            seen["encode", mark] += 1
        return encode(value, where)

    def counting_decode(data):
        for mark in marks(data):
            seen["decode", mark] += 1
        return decode(data)

    monkeypatch.setattr(serde, "_encode_value", counting_encode)
    monkeypatch.setattr(serde, "from_json", counting_decode)
    return seen


async def _one_step(ctx):
    async def body(step):
        step.state["mark"] = STATE
        return {"mark": OUT}

    await ctx.step("only", body)


def test_a_sent_body_is_encoded_once_and_the_record_is_not_decoded(calls):
    """``handle.send``: one encode of the body (its size check and the stored row share it), no decode."""
    inbox = actor(state={"mark": ""}, queues={"inbox": queue()}, run=workflow(_one_step))
    runtime = make_runtime(setup(use={"inbox": inbox}))
    handle = runtime.client().inbox.get_or_create("k")
    handle.send("inbox", {"mark": BODY})
    assert calls["encode", BODY] == 1
    assert calls["decode", BODY] == 0


async def _receive(ctx):
    message = await ctx.queue.next("got", names=["inbox"])
    await ctx.step("seen", lambda step: step.state.update(seen=sorted(message.body)))


def test_a_received_message_is_not_encoded_again_into_its_history_entry(calls):
    """A queue wait records the message's body as the store holds it: no encode of the body on receipt."""
    inbox = actor(state={}, queues={"inbox": queue()}, run=workflow(_receive))
    runtime = make_runtime(setup(use={"inbox": inbox}))
    handle = runtime.client().inbox.get_or_create("k")
    handle.send("inbox", {"mark": BODY})
    calls.clear()
    drain(runtime)
    assert handle.workflow_state() == "completed" and handle.state() == {"seen": ["mark"]}
    history = runtime.store.load_history(handle.actor_id)
    assert [e.data["body"] for e in history if e.kind == "message" and "body" in e.data] == [{"mark": BODY}]
    assert calls["encode", BODY] == 0


def test_a_step_commit_encodes_its_output_and_the_state_it_leaves(calls):
    """Counts per step commit on the in-memory store (the stores share the encoding calls)."""
    one = actor(state={"mark": ""}, run=workflow(_one_step))
    runtime = make_runtime(setup(use={"one": one}))
    handle = runtime.client().one.get_or_create("k")
    drain(runtime)
    assert handle.workflow_state() == "completed"
    assert calls["encode", OUT] == COUNTS["output"]
    assert calls["encode", STATE] == COUNTS["state"]


#: serializer calls per step commit: the output once (its round trip; the history entry reuses it) and the
#: state once for its size check and once more where the commit writes it (the run's end); the step's
#: history entry data once per write of the entry: the attempt recorded as running (the commit that takes
#: the step lock, before the body runs: a lost worker's attempt is counted from it) and its completion,
#: two different documents, the second holding the output's encoding (``reused``) as it is
COUNTS = {"output": 1, "state": 2, "entry data": 2}


def test_a_step_encodes_its_history_entry_data_once_per_write(monkeypatch):
    """The step's entry is written twice (running, then completed) and its ``data`` encoded once for each
    write; no write encodes it twice (the PostgreSQL store's ``mapper.entry_params`` and the in-memory
    store's ``encode_entry`` share the call)."""
    encode, writes = serde._encode_value, Counter()

    def counting_encode(value, where):
        if where.startswith("history entry 'only'") and type(value) is dict and "attempt_log" in value:
            writes[value["attempt_log"][-1]["outcome"]] += 1
        return encode(value, where)

    monkeypatch.setattr(serde, "_encode_value", counting_encode)
    one = actor(state={"mark": ""}, run=workflow(_one_step))
    runtime = make_runtime(setup(use={"one": one}))
    runtime.client().one.get_or_create("k")
    drain(runtime)
    assert sum(writes.values()) == COUNTS["entry data"]
    assert writes == {"running": 1, "completed": 1}


def test_an_http_send_decodes_its_body_once_and_encodes_it_once(calls, api, rivet):  # noqa: F811
    """``POST /actors/{id}/queues/{queue}``: the request body decoded once, encoded once (its size check
    and the stored row share it), the stored message not decoded back (the answer needs only its id)."""
    handle = rivet.client.waiter.get_or_create("k")
    calls.clear()
    response = post(api, f"/actors/{handle.actor_id}/queues/approval", {"body": {"mark": BODY}})
    assert response.status_code == 202, response.content
    assert (calls["decode", BODY], calls["encode", BODY]) == (1, 1)
    assert [m.body for m in rivet.runtime.store.pending_messages(handle.actor_id, None, 10)] == [
        {"mark": BODY}
    ]
