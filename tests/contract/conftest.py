"""Fixtures for the engine contract tests: a runtime factory per store (memory here; others may be added)."""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Callable
from dataclasses import fields
from typing import Any

import pytest

from rivet_workflows.engine.model import ports
from rivet_workflows.engine.model.definitions import Registry, setup
from rivet_workflows.engine.runtime import executor
from rivet_workflows.engine.runtime.runtime import Runtime
from rivet_workflows.testing import ManualClock, MemoryStore, make_runtime

#: the contract suite checks the spec's rules (ENGINE-SEMANTICS.md), where any exception of workflow code
#: fails the workflow: ``WORKFLOW_FAILURE_TYPES = ("builtins.Exception",)``. test_suspension.py checks the
#: default, where a code error suspends the run instead (DESIGN.md section 16).
SPEC_RULE: tuple[type[BaseException], ...] = (Exception,)


class Harness:
    """Builds a runtime for a set of actor definitions and drives runs of their workflows.

    ``start(defn, key="k", input=None)`` creates the actor and returns its id; ``run(actor_id)`` is one run in
    yield mode (every wait unwinds), ``run_live(actor_id, seconds)`` one run that may wait in memory,
    ``drain()`` runs everything to quiescence. ``actor(id)`` and ``history(id)`` read the store.
    """

    def __init__(self, make: Callable[..., Runtime]) -> None:
        self._make = make
        self.runtime: Runtime | None = None
        self.clock: ManualClock | None = None

    def setup(
        self,
        *,
        manual_clock: bool = False,
        failure_types: tuple[type[BaseException], ...] = SPEC_RULE,
        **definitions: Any,
    ) -> Runtime:
        """A runtime for ``definitions``; ``failure_types`` the exceptions of workflow code that fail the
        workflow (default ``SPEC_RULE``, the spec's: every exception; ``Settings().workflow_failure_types``
        makes other exceptions suspend the run, DESIGN.md section 16)."""
        registry: Registry = setup(use=definitions)
        self.clock = ManualClock() if manual_clock else None
        self.runtime = self._make(registry, clock=self.clock)
        self.runtime.settings.workflow_failure_types = failure_types
        return self.runtime

    def start(self, name: str = "wf", key: Any = "k", input: Any = None) -> str:
        client = self.runtime.client()
        return client[name].get_or_create(key, input=input).actor_id

    def run(self, actor_id: str) -> executor.RunSummary:
        return executor.run_actor(self.runtime, actor_id)

    def run_live(self, actor_id: str, seconds: float = 5.0) -> executor.RunSummary:
        from datetime import timedelta

        until = self.runtime.store.now() + timedelta(seconds=seconds)
        return executor.run_actor(self.runtime, actor_id, live_until=until)

    def restart(self, actor_id: str) -> executor.RunSummary:
        """A new worker after a crash: take over the lease the dead run left behind (``store.handoff`` on
        its token, no clock needed, so it works on every store) and run the workflow once."""
        record = self.actor(actor_id)
        assert record.lease_owner is not None, "no crashed run holds the lease"
        token = self.runtime.store.handoff(
            actor_id, record.lease_token, "restarted-worker", self.runtime.settings.lease_seconds
        )
        assert token is not None
        return executor.run_actor(self.runtime, actor_id, token=token)

    def drain(self, timeout: float = 5.0) -> executor.DrainSummary:
        return executor.drain(self.runtime, timeout=timeout)

    def actor(self, actor_id: str) -> ports.ActorRecord:
        return self.runtime.store.get_actor(actor_id)

    def history(self, actor_id: str) -> dict[str, ports.EntryRecord]:
        return {e.key: e for e in self.runtime.store.load_history(actor_id)}

    def row(self, actor_id: str) -> dict[str, Any]:
        """Every stored column of the actor's row (lease owner, expiry and token, ``updated_at``, pause...),
        whatever the store: what a call that writes nothing must leave exactly as it was."""
        store = self.runtime.store
        if isinstance(store, MemoryStore):
            with store._lock:
                row = store._actors[actor_id]
                return {
                    f.name: copy.deepcopy(getattr(row, f.name)) for f in fields(row) if f.name != "row_lock"
                }
        from rivet_workflows import models

        return models.Actor.objects.using(store.using).filter(pk=actor_id).values().get()

    def snapshot(self, actor_id: str) -> tuple:
        """The actor's row (``row``), its history entries with every field, and its audit rows."""
        store = self.runtime.store
        history = [dataclasses.asdict(e) for e in store.load_history(actor_id)]
        audit = [dataclasses.asdict(a) for a in store.operator_actions(actor_id)]
        return self.row(actor_id), history, audit

    def send(self, actor_id: str, queue: str, body: Any, completable: bool = False) -> ports.MessageRecord:
        return self.runtime.store.send(actor_id, queue, body, completable)


def _memory(registry: Registry, clock: Any = None) -> Runtime:
    return make_runtime(registry, clock=clock)


STORES = {"memory": _memory}


@pytest.fixture(params=sorted(STORES))
def h(request: pytest.FixtureRequest) -> Harness:
    """A Harness on each store variant (the Django store may be registered in STORES by another suite)."""
    return Harness(STORES[request.param])
