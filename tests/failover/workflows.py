"""The workflow of the failover test (``python -m tests.failover``), run by real Celery worker processes
(``RIVET_REGISTRY=tests.failover.workflows.registry``).

Outside the database, every worker appends to ``$RIVET_FAULT_DIR/journal.log`` (one ``O_APPEND`` write per
line, atomic between processes, then ``fsync``, so the order of the lines is the order of the events):

* ``body <actor_id> <step> <attempt>``: a step body started;
* ``ack <actor_id> <step> <epoch seconds>``: the commit carrying that step's completion returned success to the worker,
  i.e. PostgreSQL acknowledged it (``DjangoStore.commit`` wrapped in the worker processes only).

The test's checks: every acknowledged step is on the promoted standby, and no ``body`` line of a step
follows its ``ack`` line (nothing ran again after its commit was acknowledged).
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

from rivet_workflows.engine.model.definitions import queue, setup, workflow

FAULT_DIR = os.environ.get("RIVET_FAULT_DIR", "")
#: steps of each workflow
STEPS = 6


def journal(*words: Any) -> None:
    """Append one line to the journal and fsync it (no-op without ``RIVET_FAULT_DIR``)."""
    if not FAULT_DIR:
        return
    line = (" ".join(str(w) for w in words) + "\n").encode()
    fd = os.open(Path(FAULT_DIR) / "journal.log", os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, line)
        os.fsync(fd)
    finally:
        os.close(fd)


def _body(name: str):
    def body(step: Any) -> str:
        journal("body", step.actor_id, name, step.attempt)
        time.sleep(float(step.state.get("work", 0)))
        return f"{name}-done"

    body.__name__ = f"work_{name}"
    return body


async def run_chain(ctx: Any) -> list:
    """``STEPS`` steps in a row, each sleeping ``state["work"]`` seconds (input ``{"work": s}``)."""
    return [await ctx.step(f"s{i}", _body(f"s{i}")) for i in range(STEPS)]


chain_actor = workflow(run=run_chain, create_state=lambda input: {"work": (input or {}).get("work", 0.05)})


async def run_replier(ctx: Any) -> Any:
    """Take one completable ``ask`` message, answer it in a step sleeping ``state["work"]`` seconds, complete
    the message with the answer (the waiting sender gets it)."""
    message = await ctx.queue.next("wait-ask", names=["ask"], completable=True)

    def answer(step: Any) -> str:
        journal("body", step.actor_id, "answer", step.attempt)
        time.sleep(float(step.state.get("work", 0)))
        return f"answer-{message.body}"

    response = await ctx.step("answer", answer)
    await message.complete(response)
    return response


replier_actor = workflow(
    run=run_replier,
    queues={"ask": queue()},
    create_state=lambda input: {"work": (input or {}).get("work", 1.0)},
)

registry = setup(use={"chain": chain_actor, "replier": replier_actor})


def _install_ack_hook() -> None:
    """Journal ``ack`` lines after every successful commit that completes a step (worker processes)."""
    from rivet_workflows.storage import DjangoStore

    if getattr(DjangoStore.commit, "_rivet_ack_hook", False):
        return
    original = DjangoStore.commit

    def commit(self: Any, actor_id: str, token: int, c: Any) -> Any:
        finished = [e.key for e in c.upserts if e.status == "completed" and e.kind == "step"]
        result = original(self, actor_id, token, c)
        if result.ok:
            for key in finished:
                journal("ack", actor_id, key, f"{time.time():.6f}")
        return result

    commit._rivet_ack_hook = True  # type: ignore[attr-defined]
    DjangoStore.commit = commit  # type: ignore[method-assign]


if FAULT_DIR:
    _install_ack_hook()
