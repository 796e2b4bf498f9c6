"""The shard tests' workflows (``tests/shards/workflows.py``) on one MemoryStore: what ``test_two_clusters``
checks across two clusters holds here on one shard (each sink gets every ``sender|i`` once, each sender's in
order), so a failure there is the shards' or the relay's, not the workflows'."""

from __future__ import annotations

from collections import Counter

from rivet_workflows.testing import drain, make_runtime
from tests.shards.workflows import body_text, parse_body, registry


def test_senders_create_their_sinks_and_every_sink_gets_each_message_once_in_order():
    runtime = make_runtime(registry)
    client = runtime.client()
    targets = [["far0"], ["far1"], ["near0"]]
    client.sink.create(["far0"], input={"expected": 6})  # made beforehand; the others by the steps
    senders = [
        client.sender.create([f"from{n}"], input={"targets": targets, "messages": 3, "expected": 6})
        for n in range(2)
    ]
    drain(runtime, timeout=10)
    assert [s.record().output for s in senders] == [9, 9]
    for key in targets:
        sink = client.sink.get(key)
        assert sink.workflow_state() == "completed"
        received = [parse_body(body) for body in sink.record().output]
        assert Counter(received) == Counter((f"from{n}", i) for n in range(2) for i in range(3))
        for n in range(2):
            assert [i for s, i in received if s == f"from{n}"] == [0, 1, 2]


def test_the_latency_pair_and_the_ten_step_workflow_of_benchmark_p10():
    runtime = make_runtime(registry)
    client = runtime.client()
    sink = client.stamp_sink.create(["t"], input={"expected": 3})
    client.stamp_sender.create(["s"], input={"target": ["t"], "messages": 3})
    steps = client.steps.create(["w"], input={"steps": 10})
    drain(runtime, timeout=10)
    latencies = sink.record().output
    assert len(latencies) == 3 and all(0 <= x < 10 for x in latencies)
    assert steps.workflow_state() == "completed"
    assert len([e for e in runtime.store.load_history(steps.actor_id) if e.kind == "step"]) == 10


def test_bodies_read_back():
    assert parse_body(body_text("a|b", 12)) == ("a|b", 12)
