"""Workflows of the system tests, run by real Celery worker subprocesses (RIVET_REGISTRY points here).

Side effects are appended as lines to ``$RIVET_FAULT_DIR/effects.log`` (``O_APPEND`` writes of one line are
atomic between processes): ``<actor_id> <what> <detail>``. Faults are armed by flag files in
``$RIVET_FAULT_DIR``: the first process that renames ``kill-<point>`` to ``kill-<point>.taken`` SIGKILLs its
whole process group (the worker). ``always-kill-<point>`` kills every time. Points:

* ``body-<step>``: inside the step body, after its "start" effect and before its "done" effect;
* ``before-commit-<step>``: the step body returned, the commit carrying its outcome is about to be written
  (for an atomic step: inside its transaction, after the body's rows were written, before the commit);
* ``after-commit-<step>``: that commit was written;
* ``rollback-<step>``: inside the step's rollback handler.

The commit hooks wrap ``DjangoStore.commit`` (and, for atomic steps, ``DjangoStore._apply`` inside
``run_in_commit``'s transaction and ``run_in_commit`` itself) when this module is imported by a process
that has ``RIVET_FAULT_DIR`` set (the workers); the test process leaves the store alone.
"""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path
from typing import Any

from project.examples.cron import cron_actor
from rivet_workflows.engine.model import errors
from rivet_workflows.engine.model.definitions import Concurrency, RateLimit, queue, setup, workflow

FAULT_DIR = os.environ.get("RIVET_FAULT_DIR", "")


def effect(actor_id: str, what: str, detail: Any = "") -> None:
    """Append one effect line (no-op without RIVET_FAULT_DIR)."""
    if not FAULT_DIR:
        return
    line = f"{actor_id} {what} {detail}\n".encode()
    fd = os.open(Path(FAULT_DIR) / "effects.log", os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, line)
    finally:
        os.close(fd)


def maybe_kill(point: str) -> None:
    """SIGKILL this worker (its whole process group) if the fault ``point`` is armed."""
    if not FAULT_DIR:
        return
    base = Path(FAULT_DIR)
    if (base / f"always-kill-{point}").exists():
        _die(point)
    flag = base / f"kill-{point}"
    try:
        os.rename(flag, base / f"kill-{point}.taken")
    except FileNotFoundError:
        return
    _die(point)


def _die(point: str) -> None:
    effect("-", "killed", point)
    try:
        os.killpg(os.getpgrp(), signal.SIGKILL)
    finally:
        os.kill(os.getpid(), signal.SIGKILL)


# --- steps shared by the workflows --------------------------------------------------------------------


def _work(name: str, seconds_key: str | None = None):
    def body(step: Any) -> str:
        effect(step.actor_id, f"start-{name}", step.idempotency_key)
        maybe_kill(f"body-{name}")
        if seconds_key:
            time.sleep(float(step.state.get(seconds_key, 0) or 0))
        effect(step.actor_id, f"done-{name}", step.idempotency_key)
        step.state.setdefault("done", []).append(name)
        return name

    body.__name__ = f"work_{name}"
    return body


async def run_steps(ctx: Any) -> list:
    """Three steps; the first sleeps ``state["sleep"]`` seconds (input ``{"sleep": s}``)."""
    out = [await ctx.step("one", _work("one", "sleep"))]
    out.append(await ctx.step("two", _work("two")))
    out.append(await ctx.step("three", _work("three")))
    return out


steps_actor = workflow(
    run=run_steps,
    create_state=lambda input: {"sleep": (input or {}).get("sleep", 0), "done": []},
)


# --- rollback ---------------------------------------------------------------------------------------


def _undo(name: str):
    def undo(step: Any, output: Any) -> None:
        effect(step.actor_id, f"undo-start-{name}")
        maybe_kill(f"rollback-{name}")
        effect(step.actor_id, f"undo-done-{name}")

    return undo


def _fail(step: Any) -> None:
    raise RuntimeError("card declined")


async def run_saga(ctx: Any) -> None:
    """Checkpoint, two steps with rollback handlers, then a failing step: the handlers run in reverse."""
    await ctx.rollback_checkpoint("start")
    await ctx.step(name="reserve", run=_work("reserve"), rollback=_undo("reserve"))
    await ctx.step(name="charge", run=_work("charge"), rollback=_undo("charge"))
    await ctx.step(name="ship", run=_fail, max_retries=0)


saga_actor = workflow(run=run_saga, state={})


# --- queue wait with a timeout ----------------------------------------------------------------------


async def run_waiter(ctx: Any) -> str:
    """Wait up to ``state["timeout"]`` seconds for an ``approval``; a step records which branch ran."""
    timeout = float(await ctx.step("read-timeout", lambda step: step.state["timeout"]))
    batch = await ctx.queue.next_batch("wait-approval", names=["approval"], count=1, timeout=timeout)
    outcome = "approved" if batch else "timed-out"

    def record(step: Any) -> str:
        effect(step.actor_id, f"outcome-{outcome}")
        step.state["outcome"] = outcome
        return outcome

    return await ctx.step("record", record)


waiter_actor = workflow(
    run=run_waiter,
    queues={"approval": queue()},
    create_state=lambda input: {"timeout": (input or {}).get("timeout", 3), "outcome": None},
)


# --- a step that kills its worker every attempt -------------------------------------------------------


def _doom(step: Any) -> None:
    effect(step.actor_id, "start-doom", step.attempt)
    maybe_kill("body-doom")
    effect(step.actor_id, "done-doom", step.attempt)


async def run_doomed(ctx: Any) -> None:
    await ctx.step(name="doom", run=_doom, max_retries=2, retry_backoff_base=0.1, retry_backoff_max=0.5)


def _on_error(c: Any, event: dict) -> None:
    kind = next(iter(event))
    effect(c.actor_id, f"on_error-{kind}", event[kind].get("step_name", ""))


doomed_actor = workflow(run=run_doomed, on_error=_on_error, state={})


# --- timers -------------------------------------------------------------------------------------------


async def run_sleeper(ctx: Any) -> float:
    """Sleep until ``state["at"]`` (epoch seconds) and record the lateness of the wake-up."""
    at = await ctx.step("read-at", lambda step: step.state["at"])
    from datetime import UTC, datetime

    await ctx.sleep_until("nap", datetime.fromtimestamp(at, UTC))

    def woke(step: Any) -> float:
        lateness = time.time() - at
        effect(step.actor_id, "woke", f"{lateness:.4f}")
        return lateness

    return await ctx.step("woke", woke)


sleeper_actor = workflow(run=run_sleeper, create_state=lambda input: {"at": (input or {})["at"]})


# --- a long step body (the database connection sits idle meanwhile) ------------------------------------


def _slow(step: Any) -> str:
    effect(step.actor_id, "start-slow", step.attempt)
    time.sleep(float(step.state["sleep"]))
    effect(step.actor_id, "done-slow", step.attempt)
    return "slept"


async def run_slow(ctx: Any) -> str:
    """One step whose body sleeps ``state["sleep"]`` seconds (input ``{"sleep": s}``), then a short one."""
    slept = await ctx.step(name="slow", run=_slow, max_retries=3)
    await ctx.step("after", lambda step: effect(step.actor_id, "after"))
    return slept


slow_actor = workflow(run=run_slow, create_state=lambda input: {"sleep": (input or {}).get("sleep", 4)})


# --- a step body that watches step.cancelled (a paused worker's body after its lease was lost) ----------


def _watchful(step: Any) -> str:
    """Tick every 0.1 s, ``state["sleep"]`` seconds' worth of ticks, unless ``step.cancelled`` is set;
    effects carry the attempt and the worker's pid (``start-watch``, then ``cancelled-watch`` or
    ``done-watch``). Ticks, not a deadline: a worker stopped (SIGSTOP) mid-body has its ticks left when
    it resumes, however long it was stopped."""
    me = f"{step.attempt}:{os.getpid()}"
    effect(step.actor_id, "start-watch", me)
    for _ in range(int(float(step.state["sleep"]) * 10)):
        if step.cancelled.wait(0.1):
            effect(step.actor_id, "cancelled-watch", me)
            step.state["writer"] = f"cancelled {me}"  # must never land: this run lost its lease
            return "cancelled"
    effect(step.actor_id, "done-watch", me)
    step.state["writer"] = me
    return me


async def run_watchful(ctx: Any) -> str:
    """One step that watches ``step.cancelled`` (input ``{"sleep": s}``), then a short one."""
    out = await ctx.step(name="watch", run=_watchful, timeout=120, max_retries=3)
    await ctx.step("after", lambda step: effect(step.actor_id, "after"))
    return out


watchful_actor = workflow(
    run=run_watchful, create_state=lambda input: {"sleep": (input or {}).get("sleep", 8), "writer": None}
)
# --- an atomic step writing a row of the example shop ------------------------------------------------------


def _place_order(step: Any) -> int:
    from project.shop.models import Order

    effect(step.actor_id, "start-place-order", step.attempt)
    order = Order.objects.create(checkout=step.key[0], item="book", attempt=step.attempt)
    effect(step.actor_id, "done-place-order", step.attempt)
    return order.pk


async def run_atomic_order(ctx: Any) -> int:
    """One atomic step that creates a ``shop.Order`` row for the actor's key, then a plain step."""
    order = await ctx.step("place-order", _place_order, atomic=True, max_retries=3, retry_backoff_base=0.1)
    await ctx.step("after", lambda step: effect(step.actor_id, "after"))
    return order


atomic_order_actor = workflow(run=run_atomic_order, state={})


# --- a rolling deploy: the code of ``deploy`` depends on the worker (RIVET_DEPLOY_CODE old | new) ---------

#: which code of the ``deploy`` actor this process runs: "old" (before the deploy) or "new" (after it:
#: ``validate-v3`` behind a version gate, the example of docs/howto/versioning.md); a worker sets it with RIVET_CODE_VERSION
DEPLOY_CODE = os.environ.get("RIVET_DEPLOY_CODE", "new")


def _deploy_step(name: str):
    def body(step: Any) -> str:
        effect(step.actor_id, name, DEPLOY_CODE)
        return name

    return body


async def run_deploy_old(ctx: Any) -> str:
    await ctx.step("validate-v2", _deploy_step("validate-v2"))
    message = await ctx.queue.next("wait", names=["go"])
    await ctx.step("ship", _deploy_step("ship"))
    return str(message.body)


async def run_deploy_new(ctx: Any) -> str:
    if await ctx.get_version("validate", 2) == 2:
        await ctx.step("validate-v3", _deploy_step("validate-v3"))
    else:  # runs the old code started before the deploy
        await ctx.step("validate-v2", _deploy_step("validate-v2"))
    message = await ctx.queue.next("wait", names=["go"])
    await ctx.step("ship", _deploy_step("ship"))
    return str(message.body)


deploy_actor = workflow(
    run=run_deploy_old if DEPLOY_CODE == "old" else run_deploy_new, queues={"go": queue()}, state={}
)


# --- a code error suspends, a deploy with the fix retries it (DESIGN.md section 16) --------------------


def _order_step(name: str):
    def body(step: Any) -> str:
        effect(step.actor_id, name, DEPLOY_CODE)
        return name

    return body


def _order_undo(step: Any, output: Any) -> None:
    effect(step.actor_id, f"undo-{output}", DEPLOY_CODE)


async def run_typo(ctx: Any) -> str:
    """Reserve and charge (with compensations), then, in the old code, a typo: ``ctx.input`` is None for an
    actor created without input, so ``.get`` raises AttributeError (a code error: the run suspends); the
    new code has the fix and ships."""
    await ctx.rollback_checkpoint("order")
    await ctx.step("reserve", _order_step("reserve"), rollback=_order_undo)
    await ctx.step("charge", _order_step("charge"), rollback=_order_undo)
    if DEPLOY_CODE == "old":
        ctx.input.get("address")
    await ctx.step("ship", _order_step("ship"))
    return "shipped"


typo_actor = workflow(run=run_typo, state={})


# --- flow controls (DESIGN.md section 12) ------------------------------------------------------------


def _timed(label: str):
    def body(step: Any) -> str:
        effect(step.actor_id, f"{label}-start", f"{time.time():.4f}")
        time.sleep(float(step.state.get("hold", 0.3)))
        effect(step.actor_id, f"{label}-end", f"{time.time():.4f}")
        return label

    body.__name__ = f"timed_{label}"
    return body


async def run_limited(ctx: Any) -> str:
    """One step that records its start and end instants (``flow-start``/``flow-end``) and holds 0.3 s."""
    return await ctx.step("work", _timed("flow"))


#: at most 2 actors of this type hold a lease at once across every worker
limited_actor = workflow(run=run_limited, concurrency=2, create_state=lambda input: {"hold": 0.3})


def _tenant(c: Any) -> str:
    return c.state["tenant"]


#: at most 1 per tenant
per_tenant_actor = workflow(
    run=run_limited,
    concurrency=Concurrency(1, key=_tenant),
    create_state=lambda input: {"hold": 0.3, "tenant": (input or {})["tenant"]},
)


async def run_rated(ctx: Any) -> str:
    return await ctx.step("work", _timed("rate"))


#: at most 3 run starts in any 2 s window
rated_actor = workflow(run=run_rated, rate_limit=RateLimit(3, 2.0), create_state=lambda input: {"hold": 0})


def _gated(step: Any) -> str:
    """Record the start, hold until the file ``$RIVET_FAULT_DIR/release-<actor id>`` exists, record the end."""
    effect(step.actor_id, "gated-start")
    gate = Path(FAULT_DIR) / f"release-{step.actor_id}"
    deadline = time.monotonic() + 60
    while not gate.exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    effect(step.actor_id, "gated-end")
    return "first"


async def run_pausable(ctx: Any) -> str:
    await ctx.step("first", _gated)
    await ctx.step("second", lambda step: effect(step.actor_id, "second"))
    return "done"


pausable_actor = workflow(run=run_pausable, state={})


async def run_overdue(ctx: Any) -> str:
    """Sleeps an hour (``state["wait"]`` "sleep") or waits on ``go`` ("queue"); its 2 s timeout fails it."""
    mode = await ctx.step("mode", lambda step: step.state["wait"])
    if mode == "sleep":
        await ctx.sleep("nap", 3600)
    else:
        await ctx.queue.next("wait-go", names=["go"])
    return "never"


overdue_actor = workflow(
    run=run_overdue,
    timeout=2.0,
    queues={"go": queue()},
    on_error=_on_error,
    create_state=lambda input: {"wait": (input or {}).get("wait", "sleep")},
)


# --- durable streams ----------------------------------------------------------------------------------

#: items the ``speak`` step writes per attempt; the kill point ``stream-mid`` fires after the tenth
STREAM_TOKENS = 20


def _speak(step: Any) -> str:
    for n in range(STREAM_TOKENS):
        step.stream("tokens").write(f"t{n}")
        effect(step.actor_id, "token", f"{step.attempt}:{n}")
        if n == 9:
            maybe_kill("stream-mid")
        time.sleep(0.02)
    return "spoken"


async def run_streamer(ctx: Any) -> str:
    """A recorded write, a step streaming ``STREAM_TOKENS`` items, a recorded write; the end closes it."""
    await ctx.stream("tokens").write("begin")
    await ctx.step("speak", _speak, retry_backoff_base=0.05)
    await ctx.stream("tokens").write("end")
    return "done"


streamer_actor = workflow(run=run_streamer)


registry = setup(
    use={
        "streamer": streamer_actor,
        "limited": limited_actor,
        "per_tenant": per_tenant_actor,
        "rated": rated_actor,
        "pausable": pausable_actor,
        "overdue": overdue_actor,
        "watchful": watchful_actor,
        "atomic_order": atomic_order_actor,
        "deploy": deploy_actor,
        "typo": typo_actor,
        "slow": slow_actor,
        "steps": steps_actor,
        "saga": saga_actor,
        "waiter": waiter_actor,
        "doomed": doomed_actor,
        "sleeper": sleeper_actor,
        "cron_actor": cron_actor,
    }
)


# --- commit fault hooks (workers only) ----------------------------------------------------------------


def _install_commit_hooks() -> None:
    from rivet_workflows.storage import DjangoStore

    if getattr(DjangoStore.commit, "_rivet_fault_hook", False):
        return
    original = DjangoStore.commit

    def commit(self: Any, actor_id: str, token: int, c: Any) -> Any:
        finished = [e.key for e in c.upserts if e.status == "completed" and e.kind == "step"]
        for key in finished:
            maybe_kill(f"before-commit-{key}")
        result = original(self, actor_id, token, c)
        if result.ok:
            for key in finished:
                maybe_kill(f"after-commit-{key}")
        return result

    commit._rivet_fault_hook = True  # type: ignore[attr-defined]
    DjangoStore.commit = commit  # type: ignore[method-assign]

    # atomic steps: ``run_in_commit`` applies the commit with ``_apply`` inside the transaction the body's
    # writes are in (``in_atomic_block``); a plain commit enters ``_apply`` outside any transaction
    import threading

    from django.db import connections

    original_apply = DjangoStore._apply
    original_run_in_commit = DjangoStore.run_in_commit
    seen = threading.local()  # the step keys the atomic commit of this thread carries

    def apply(self: Any, actor_id: str, token: int, c: Any) -> Any:
        if connections[self.using].in_atomic_block:
            finished = [e.key for e in c.upserts if e.status == "completed" and e.kind == "step"]
            for key in finished:
                maybe_kill(f"before-commit-{key}")
            seen.keys = finished
        return original_apply(self, actor_id, token, c)

    def run_in_commit(self: Any, actor_id: str, token: int, body: Any) -> Any:
        seen.keys = []
        result = original_run_in_commit(self, actor_id, token, body)
        if result.ok:
            for key in seen.keys:
                maybe_kill(f"after-commit-{key}")
        return result

    DjangoStore._apply = apply  # type: ignore[method-assign]
    DjangoStore.run_in_commit = run_in_commit  # type: ignore[method-assign]


if FAULT_DIR:
    _install_commit_hooks()

__all__ = ["errors", "registry"]
