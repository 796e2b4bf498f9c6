"""The executor's entry points: ``run_actor`` (one actor, ``engine.worker``) and ``drain`` (every due actor in
this process until none has work due soon, DESIGN.md section 9)."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from datetime import timedelta
from typing import TYPE_CHECKING

from ..actor import firing
from ..model import ports
from ..model.errors import StoreUnavailableError
from ..operate import retrying
from ..run.worker import RunSummary, run_actor
from . import relay

if TYPE_CHECKING:
    from ..model.roles import RuntimeRole

__all__ = ["DrainSummary", "RunSummary", "StoreUnavailableError", "drain", "run_actor"]


@dataclass
class DrainSummary:
    """What ``drain`` did: ``actors_run`` (distinct actors), ``steps_executed`` and ``still_waiting`` (ids of
    run actors that were neither completed, failed, cancelled nor suspended when drain returned)."""

    actors_run: int = 0
    steps_executed: int = 0
    still_waiting: list[str] = field(default_factory=list)


def drain(runtime: RuntimeRole, timeout: float = 10.0, *, limit: int = 32) -> DrainSummary:
    """Run every due actor in this process until none has work due within ``timeout`` seconds (DESIGN.md 9).

    First retries, once, the runs suspended on another code version (``retrying.retry_on_new_code``).
    Claims due actors (``store.claim_due``) and runs them with ``run_actor`` (same leases as workers), and
    after a commit that wrote relay rows (``runtime.relay_wanted``) runs a relay pass (DESIGN.md 21); while
    the earliest deadline (``store.next_deadline``) falls within the timeout it sleeps until then and goes
    on. Starts no step, live wait or actor after ``timeout``: a step already running cannot be interrupted,
    so drain returns within ``timeout`` plus the time of the step running at the deadline (a workflow with
    more to do stays due and the next drain or a worker goes on). Returns a ``DrainSummary``.
    """
    store, settings = runtime.store, runtime.settings
    owner = runtime.owner
    end = time.monotonic() + timeout
    summary = DrainSummary()
    seen: dict[str, str | None] = {}
    retrying.retry_on_new_code(runtime, limit)  # runs a code error suspended under another code version
    while True:
        remaining = end - time.monotonic()
        if remaining <= 0:
            break
        fired = firing.sweep_schedules(runtime, limit)  # due cron and scheduled actions
        claimed = store.claim_due(owner, limit, settings.lease_seconds)
        if claimed:  # the timeout's end as a store-clock instant, read once per batch (not per actor)
            end_on_store_clock = store.now() + timedelta(seconds=end - time.monotonic())
        for actor_id, token in claimed:
            remaining = end - time.monotonic()
            if remaining <= 0:  # past the timeout: start nothing more; hand the claim back (still due)
                store.commit(actor_id, token, ports.Commit(release=True))
                continue
            live_until = end_on_store_clock
            result = run_actor(
                runtime, actor_id, owner=owner, token=token, live_until=live_until, stop_at=end
            )
            summary.steps_executed += result.steps_executed
            seen[actor_id] = result.workflow_state
        relayed = runtime.relay_wanted and relay.relay_runtime(runtime).delivered > 0
        if claimed or fired or relayed:
            continue
        deadline = firing.next_deadline(store)
        if deadline is None:
            break
        wait = (deadline - store.now()).total_seconds()
        remaining = end - time.monotonic()
        if wait > remaining:
            break
        time.sleep(min(max(wait, settings.poll_interval), max(remaining, 0.0)))
    summary.actors_run = len(seen)
    summary.still_waiting = [a for a, s in seen.items() if s not in ports.HALTED_STATES]
    return summary
