"""A deterministic driver for recording golden histories: MemoryStore, a manual clock, runs in yield mode.

Every run unwinds at its first wait (no wait is held in memory), due actors run one after another in
the order the store hands them out, and time moves only when ``advance`` moves the clock to the next
deadline. So the same driving script records the same history on every machine, up to ids and the
microseconds a step takes.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from rivet_workflows.engine.actor import firing
from rivet_workflows.engine.client.client import ActorHandle
from rivet_workflows.engine.model import ports
from rivet_workflows.engine.model.definitions import setup
from rivet_workflows.engine.runtime import executor
from rivet_workflows.engine.runtime.runtime import Runtime
from rivet_workflows.testing import ManualClock, MemoryStore, golden, make_runtime

#: the manual clock's start: every golden history begins at this instant
EPOCH = datetime(2026, 1, 1, tzinfo=UTC)
#: runs in one ``settle`` before it gives up (a workflow that never waits would loop forever)
MAX_RUNS = 400


@dataclass(frozen=True)
class Case:
    """One recorded history per actor label: ``record(driver)`` drives a fresh ``Driver`` and returns the
    actor to export (``labels`` empty) or ``{label: actor}``. ``definitions()`` are the actor definitions
    the history must replay on (the current code; ``record`` may start on older code and ``deploy``).

    Files: ``<group dir>/<name>.json``, or ``<name>.<label>.json`` per label.
    """

    name: str
    group: str
    covers: str
    definitions: Callable[[], dict[str, Any]]
    record: Callable[[Driver], Any]
    labels: tuple[str, ...] = ()
    #: ``engine.runtime.Settings`` fields the recording runs with (``Driver(**settings)``)
    settings: tuple[tuple[str, Any], ...] = ()

    def file_stems(self) -> list[str]:
        """The file names (without ``.json``) this case writes."""
        return [f"{self.name}.{label}" for label in self.labels] if self.labels else [self.name]


class Driver:
    """A runtime on a MemoryStore with a ``ManualClock`` at ``EPOCH``; runs every wait in yield mode.

    ``start(name, key, input)`` creates an actor (a handle), ``settle()`` runs everything due now,
    ``advance(seconds=None)`` moves the clock (to the next deadline by default) and settles, ``until(pred)``
    advances until ``pred()`` holds, ``deploy(definitions)`` swaps the code (same store and clock).
    """

    def __init__(self, definitions: dict[str, Any], **settings: Any) -> None:
        self.clock = ManualClock(EPOCH)
        self.store = MemoryStore(clock=self.clock, poll_interval=0.005)
        self.settings = {"poll_interval": 0.005, "live_wait_threshold": 0.0, **settings}
        self.runtime = self._runtime(definitions)

    def _runtime(self, definitions: dict[str, Any]) -> Runtime:
        return make_runtime(setup(use=dict(definitions)), store=self.store, **self.settings)

    def deploy(self, definitions: dict[str, Any]) -> None:
        """New code on the same store: later runs use ``definitions`` (as after a deploy)."""
        self.runtime = self._runtime(definitions)

    @property
    def client(self) -> Any:
        return self.runtime.client()

    def start(self, name: str, key: Any = "k", input: Any = None) -> ActorHandle:
        """Get or create the actor ``name`` keyed ``key`` (nothing runs until ``settle``)."""
        return self.client[name].get_or_create(key, input=input)

    def settle(self) -> int:
        """Run due schedules and due actors (one after another, yield mode) until nothing is due now;
        returns the number of runs. ``RuntimeError`` after ``MAX_RUNS`` runs."""
        runs = 0
        while True:
            fired = firing.sweep_schedules(self.runtime, 32)
            claimed = self.store.claim_due(self.runtime.owner, 32, self.runtime.settings.lease_seconds)
            for actor_id, token in claimed:
                executor.run_actor(self.runtime, actor_id, owner=self.runtime.owner, token=token)
                runs += 1
            if not claimed and not fired:
                return runs
            if runs > MAX_RUNS:
                raise RuntimeError(f"still due after {MAX_RUNS} runs: a workflow that never waits?")

    def advance(self, seconds: float | None = None) -> None:
        """Move the clock ``seconds`` forward, or to the next deadline when None (``RuntimeError`` if there
        is none), then ``settle``."""
        if seconds is None:
            deadline = firing.next_deadline(self.store)
            if deadline is None:
                raise RuntimeError("nothing to wait for: no deadline is set")
            self.clock.set(max(deadline, self.clock()))
        else:
            self.clock.advance(timedelta(seconds=seconds))
        self.settle()

    def until(self, predicate: Callable[[], bool], max_advances: int = 60) -> None:
        """``settle``, then ``advance`` to each next deadline until ``predicate()`` holds."""
        self.settle()
        for _ in range(max_advances):
            if predicate():
                return
            self.advance()
        if not predicate():
            raise RuntimeError(f"not reached after {max_advances} deadlines")

    def record(self, handle: ActorHandle | str) -> ports.ActorRecord:
        """The stored actor."""
        return self.store.get_actor(handle if isinstance(handle, str) else handle.actor_id)

    def export(self, handle: ActorHandle | str) -> dict:
        """``export_history`` of the actor on this driver's runtime."""
        return golden.export_history(handle, runtime=self.runtime)
