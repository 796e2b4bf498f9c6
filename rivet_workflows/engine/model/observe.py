"""The engine's observer hooks: runs, step attempts, sends and creations reported to tracing and metrics.

The engine calls a ``Runtime.observer`` at a few points (DESIGN.md section 14); the defaults here do nothing,
so the engine needs neither OpenTelemetry nor prometheus-client. The adapters
(``rivet_workflows.tracing``, ``rivet_workflows.metrics``) subclass ``Observer``; ``Observers`` fans one call
out to several. An observer must not raise into the engine (the OpenTelemetry API and prometheus-client
do not raise on their hot paths).

Order of the calls, per run: ``run`` (before ``on_wake``), then per step attempt ``step`` with its
``end(status, error)``, ``message_received`` for each message a queue wait records, and the run's
``end(workflow_state)`` after its final commit (``evicted`` when it lost its lease). ``workflow_finished``
follows the commit that completed or failed the workflow, or cancelled it.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

#: the status a step attempt's observation ends with when the run unwound during it (an eviction, a
#: cancellation of the run): the attempt's outcome is not recorded
ABANDONED = "abandoned"
#: the state a run's observation ends with when it lost its lease (nothing more was written)
EVICTED = "evicted"


@dataclass
class ActorCounts:
    """The actors counted for the scrape-time gauges (``Store.actor_counts``): ``by_state`` live actors per
    ``(type, workflow_state)``; ``due`` how many are due now (``wake_at <= now``, lease free or expired);
    ``leases_expired`` how many unfinished ones still name a lease owner whose lease expired (an executor
    died or stalled: the sweep or ``rivet recover`` takes them over)."""

    by_state: dict[tuple[str, str], int] = field(default_factory=dict)
    due: int = 0
    leases_expired: int = 0


def count_actors(actors: Iterable[Any], now: datetime, finished: Iterable[str]) -> ActorCounts:
    """``ActorCounts`` of ``actors`` (``ports.ActorRecord``-like rows: name, workflow_state, wake_at,
    lease_owner, lease_expires_at) at ``now``; ``finished`` are the finished workflow states."""
    finished = frozenset(finished)
    counts = ActorCounts()
    for a in actors:
        key = (a.name, a.workflow_state)
        counts.by_state[key] = counts.by_state.get(key, 0) + 1
        lapsed = a.lease_expires_at is not None and a.lease_expires_at < now
        counts.due += a.wake_at is not None and a.wake_at <= now and (a.lease_expires_at is None or lapsed)
        counts.leases_expired += a.lease_owner is not None and lapsed and a.workflow_state not in finished
    return counts


class Observation:
    """One observed operation (a run, a step attempt, a send, a creation); the default does nothing.

    ``end`` is called once (the adapters ignore a second call; a ``with`` block calls it); ``trace_context`` is the W3C trace context (``{"traceparent": ...}``) to store
    with the actor or the message this operation creates, so the runs it causes join its trace (None: none).
    """

    __slots__ = ()

    def end(self, status: str | None = None, error: BaseException | None = None) -> None:
        """The operation finished: ``status`` (a step entry status, a workflow state), ``error`` if it
        failed (the exception is recorded)."""

    def set(self, name: str, value: Any) -> None:
        """Add the attribute ``name`` (``rivet.actor.id`` once a creation knows its actor)."""

    def trace_context(self) -> dict | None:
        """The carrier to store for the runs this operation causes, or None."""
        return None

    def __enter__(self) -> Observation:
        return self

    def __exit__(self, kind: Any, error: BaseException | None, tb: Any) -> None:
        """A ``with`` block ends the observation: with the exception that left it, if any."""
        self.end(None, error)


#: the observation every default hook returns
NOTHING = Observation()


class Observer:
    """The hooks the engine calls; every default does nothing and returns ``NOTHING``.

    Arguments: ``actor`` is the run's ``ports.ActorRecord`` (its ``trace_context`` the creation's),
    ``now`` the store clock at the run's start (None when unknown), ``name`` an actor type, ``step`` a step
    name, ``attempt`` the attempt number from 1, ``queue`` a queue name.
    """

    def run(self, actor: Any, now: datetime | None) -> Observation:
        """A run of ``actor``'s workflow starts (after the claim). ``end(workflow_state)`` after its
        final commit, ``end(EVICTED)`` when it lost its lease."""
        return NOTHING

    def step(self, actor: Any, step: str, attempt: int) -> Observation:
        """A step attempt starts; ``end(entry status, error)``: completed, failed (retried later),
        exhausted (no retry), or ``ABANDONED``."""
        return NOTHING

    def send(self, name: str, actor_id: str, queue: str) -> Observation:
        """A message to ``queue`` of actor ``actor_id`` (of type ``name``) is about to be stored; its
        ``trace_context()`` is stored with the message. ``end()`` once stored (``end(None, error)``)."""
        return NOTHING

    def create(self, name: str, key: list) -> Observation:
        """An actor of type ``name`` with ``key`` is about to be created; its ``trace_context()`` is stored
        with the actor. ``set("rivet.actor.id", id)`` and ``end()`` once created."""
        return NOTHING

    def message_received(self, actor: Any, queue: str, trace_context: dict | None) -> None:
        """The running workflow of ``actor`` received a message of ``queue`` sent with ``trace_context``."""

    def workflow_finished(self, name: str, state: str) -> None:
        """A workflow of type ``name`` ended ``state`` (completed, failed or cancelled) or was suspended."""

    def lease_taken_over(self, name: str) -> None:
        """An executor's lease on an actor of type ``name`` was taken over by another executor: this run
        found a step attempt a lost executor left running, or this run was evicted."""


class _Many(Observation):
    __slots__ = ("parts",)

    def __init__(self, parts: list[Observation]) -> None:
        self.parts = parts

    def end(self, status: str | None = None, error: BaseException | None = None) -> None:
        for part in self.parts:
            part.end(status, error)

    def set(self, name: str, value: Any) -> None:
        for part in self.parts:
            part.set(name, value)

    def trace_context(self) -> dict | None:
        for part in self.parts:
            carrier = part.trace_context()
            if carrier:
                return carrier
        return None


def _join(parts: list[Observation]) -> Observation:
    live = [p for p in parts if p is not NOTHING]
    if not live:
        return NOTHING
    return live[0] if len(live) == 1 else _Many(live)


class Observers(Observer):
    """Several observers as one, called in order (tracing first, so metrics see its context)."""

    def __init__(self, observers: Sequence[Observer]) -> None:
        self.observers = list(observers)

    def run(self, actor: Any, now: datetime | None) -> Observation:
        return _join([o.run(actor, now) for o in self.observers])

    def step(self, actor: Any, step: str, attempt: int) -> Observation:
        return _join([o.step(actor, step, attempt) for o in self.observers])

    def send(self, name: str, actor_id: str, queue: str) -> Observation:
        return _join([o.send(name, actor_id, queue) for o in self.observers])

    def create(self, name: str, key: list) -> Observation:
        return _join([o.create(name, key) for o in self.observers])

    def message_received(self, actor: Any, queue: str, trace_context: dict | None) -> None:
        for o in self.observers:
            o.message_received(actor, queue, trace_context)

    def workflow_finished(self, name: str, state: str) -> None:
        for o in self.observers:
            o.workflow_finished(name, state)

    def lease_taken_over(self, name: str) -> None:
        for o in self.observers:
            o.lease_taken_over(name)


def combine(observers: Sequence[Observer]) -> Observer:
    """One observer for ``observers``: the default (no-op) ``Observer`` for none, the one itself, or
    ``Observers``."""
    if not observers:
        return Observer()
    return observers[0] if len(observers) == 1 else Observers(observers)
