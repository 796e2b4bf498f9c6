"""Workflows of the shard tests on two real clusters (``test_two_clusters.py``) and of benchmark P10
(DESIGN.md section 21). ``RIVET_REGISTRY=tests.shards.workflows.registry`` (``tests/shards/settings.py``'s
default).

* ``sender``: ``messages`` steps; step ``i`` sends ``"<sender key>|<i>"`` to each of its ``targets``
  (``sink`` keys), creating the target first with ``get_or_create`` (a create and a send from a step body:
  to a target on another shard both go through the sender's outbox and the relay). ``pause`` seconds
  between steps (an outage or a kill then falls mid-run). Its output: the number of sends.
* ``sink``: receives ``expected`` ``ping`` messages (batches) and completes with their bodies in the order
  received: exactly once means each ``sender|i`` once; order per (sender, target) means each sender's ``i``
  increasing.
* ``counter``: an actor without a workflow (the spread of 1,000 creations needs no worker).

Every message a step sends is also journaled, outside the database, by the worker that ran the step body
(``$RIVET_FAULT_DIR/sent.log``: ``<sender key> <i> <target key> <attempt>``): a body that ran again (its
commit was lost) appears twice there, yet must be delivered once.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

from rivet_workflows.engine.model.definitions import actor, queue, setup, workflow

FAULT_DIR = os.environ.get("RIVET_FAULT_DIR", "")


def journal(line: str) -> None:
    """Append ``line`` to ``$RIVET_FAULT_DIR/sent.log`` (one O_APPEND write: atomic between processes);
    nothing without RIVET_FAULT_DIR."""
    if not FAULT_DIR:
        return
    fd = os.open(Path(FAULT_DIR) / "sent.log", os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, f"{line}\n".encode())
    finally:
        os.close(fd)


def body_text(sender_key: str, i: int) -> str:
    """The body step ``i`` of the sender ``sender_key`` sends: ``"<sender key>|<i>"``."""
    return f"{sender_key}|{i}"


def parse_body(body: str) -> tuple[str, int]:
    """``body_text``'s inverse: ``(sender key, i)``."""
    sender, _, i = body.rpartition("|")
    return sender, int(i)


async def sender_run(ctx: Any) -> int:
    spec = ctx.input or {}
    targets = [list(t) for t in spec.get("targets", [])]
    expected = int(spec.get("expected", 0))
    pause = float(spec.get("pause", 0.0))
    me = ctx.key[0]
    sent = 0
    for i in range(int(spec.get("messages", 1))):

        def send_all(step: Any, i: int = i) -> int:
            client = step.client()
            for target in targets:
                handle = client.sink.get_or_create(target, input={"expected": expected})
                handle.send("ping", body_text(me, i))
                journal(f"{me} {i} {target[0]} {step.attempt}")
            return len(targets)

        sent += await ctx.step(f"send{i}", send_all)
        if pause and i + 1 < int(spec.get("messages", 1)):
            await ctx.sleep(f"pause{i}", pause)
    return sent


async def sink_run(ctx: Any) -> list[str]:
    expected = int((ctx.input or {}).get("expected", 1))
    got: list[str] = []
    batch_no = 0
    while len(got) < expected:
        batch = await ctx.queue.next_batch(f"in{batch_no}", names=["ping"], count=expected - len(got))
        got.extend(message.body for message in batch)
        batch_no += 1
    return got


# benchmark P10: a ten-step workflow of trivial steps, the last one stamps its end (P7's, on the shards)
async def _trivial(step: Any) -> int:
    return 1


async def steps_run(ctx: Any) -> float:
    steps = int((ctx.input or {}).get("steps", 10))
    for i in range(steps - 1):
        await ctx.step(f"s{i}", _trivial)
    return await ctx.step(f"s{steps - 1}", lambda step: time.time())


# benchmark P10: a step that stamps the wall clock into the message it sends across shards; the sink of
# the latency (``stamp_sink``) records, in its step, how long the message took to arrive
async def stamp_sender_run(ctx: Any) -> None:
    spec = ctx.input or {}
    for i in range(int(spec.get("messages", 1))):
        await ctx.step(
            f"send{i}",
            lambda step, i=i: (
                step.client().stamp_sink.get(spec["target"]).send("stamp", {"i": i, "sent_at": time.time()})
            ),
        )
        if spec.get("gap"):
            await ctx.sleep(f"gap{i}", float(spec["gap"]))


async def stamp_sink_run(ctx: Any) -> list[float]:
    expected = int((ctx.input or {}).get("expected", 1))
    latencies: list[float] = []
    for n in range(expected):
        message = await ctx.queue.next(f"in{n}", names=["stamp"])
        latencies.append(await ctx.step(f"seen{n}", lambda step, m=message: time.time() - m.body["sent_at"]))
    return latencies


registry = setup(
    use={
        "sender": workflow(run=sender_run),
        "sink": workflow(run=sink_run, queues={"ping": queue()}),
        "counter": actor(state={"n": 0}, actions={"bump": lambda c: c.state.update(n=c.state["n"] + 1)}),
        "steps": workflow(run=steps_run),
        "stamp_sender": workflow(run=stamp_sender_run),
        "stamp_sink": workflow(run=stamp_sink_run, queues={"stamp": queue()}),
    }
)
