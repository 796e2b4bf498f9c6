"""The client: get or create actors, call their actions, send to their queues (DESIGN.md section 2, "Client")."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Callable, Iterator
from datetime import datetime
from typing import TYPE_CHECKING, Any

from ..actor import actions, bridge, data_schedules, queries
from ..actor.cancel import cancel as cancel_workflow
from ..actor.delivery import send_message
from ..actor.flow import flow_of
from ..model import errors, ports, serde
from ..model.keys import MAX_KEY_INT as MAX_KEY_INT
from ..model.keys import display_part as display_part
from ..model.keys import normalize_key as normalize_key
from ..model.settings import to_seconds
from ..operate import forks, repairs, retrying, search
from ..run import streams
from ..run.reentrancy import check_not_reentrant
from .sending import MAX_SEND_POLL_SECONDS as MAX_SEND_POLL_SECONDS
from .sending import SendResult as SendResult
from .sending import WaitingSend, created_with_step, remote_id, sent_with_step, waiting_send_slot

if TYPE_CHECKING:
    from ..model.definitions import ActorDefinition
    from ..model.roles import RuntimeRole

logger = logging.getLogger("rivet_workflows")


ActorAlreadyExistsError = errors.ActorAlreadyExistsError  # re-exported for older imports
_twin = bridge.twin  # the ``a``-prefixed async twin of a sync client method


class Client:
    """Entry point to the actors of one runtime: ``client.payment_actor`` or ``client["payment_actor"]``
    (an ``ActorTypeClient``). Unknown names raise ``AttributeError`` / ``ActorNotFoundError``.

    ``parent_id``: the actor whose run uses this client (``step.client()``): every actor it creates records
    it as its parent (``ActorHandle.children``; DESIGN.md section 20). None for a client from outside a run.
    ``step``: the ``StepContext`` of ``step.client()`` (``sending.sent_with_step``), or None."""

    def __init__(self, runtime: RuntimeRole, parent_id: str | None = None, step: Any = None) -> None:
        self.runtime = runtime
        self.parent_id = parent_id
        self.step = step

    def __getitem__(self, name: str) -> ActorTypeClient:
        return ActorTypeClient(self.runtime, self.runtime.registry.get(name), self.parent_id, self.step)

    @property
    def schedules(self) -> data_schedules.SchedulesClient:
        """Schedules stored as data (``create``/``get``/``list``/``pause``/``resume``/``trigger``/``backfill``/
        ``delete``; DESIGN.md section 20). An actor type named ``schedules`` is reached as
        ``client["schedules"]``."""
        return data_schedules.SchedulesClient(self.runtime)

    def __getattr__(self, name: str) -> ActorTypeClient:
        runtime = self.__dict__.get("runtime")
        if name.startswith("_") or runtime is None or name not in runtime.registry:
            raise AttributeError(
                f"no actor type named {name!r} (registered: {self.runtime.registry.names()})"
            )
        return self[name]

    def __dir__(self) -> list[str]:
        return [*super().__dir__(), *self.runtime.registry.names()]

    # --- operating many runs (DESIGN.md section 19, docs/howto/operating-many-runs.md) ----------------

    def list_actors(
        self,
        name: str | None = None,
        state: str | None = None,
        attributes: dict[str, Any] | None = None,
        created_after: datetime | None = None,
        created_before: datetime | None = None,
        updated_after: datetime | None = None,
        updated_before: datetime | None = None,
        limit: int = 100,
        cursor: str | None = None,
    ) -> search.ActorPage:
        """One page of the live actors the filter selects, oldest first: ``ActorPage(items, next_cursor)``,
        items ``ActorSummary(actor_id, name, key, workflow_state, attributes, created_at, updated_at)``.

        ``name``: the actor type; ``state``: a shown workflow state (``paused`` included); ``attributes``:
        ``{"customer": "c-42"}`` matches actors whose attribute equals that value (every key given must
        match); ``created_*``/``updated_*``: aware datetimes, exclusive bounds. ``limit``: 1..1000. Pass
        ``next_cursor`` as ``cursor`` for the next page (keyset on ``(created_at, actor_id)``: no actor
        is skipped or repeated while others are created). ``InvalidFilterError``/``InvalidAttributesError``
        (both ``ValueError``) for a bad filter, limit or cursor."""
        query = search.make_filter(
            name, state, attributes, created_after, created_before, updated_after, updated_before
        )
        return search.list_actors(self.runtime, query, limit=limit, cursor=cursor)

    def bulk(
        self,
        action: str,
        *,
        name: str | None = None,
        state: str | None = None,
        attributes: dict[str, Any] | None = None,
        created_after: datetime | None = None,
        created_before: datetime | None = None,
        reason: str | None = None,
        dry_run: bool = False,
    ) -> search.BulkResult:
        """Do ``action`` (``recover``, ``cancel``, ``pause``, ``resume``, ``retry`` or ``replay``: replay the
        whole workflow) to every actor the filter selects (the filter as ``list_actors``); returns
        ``BulkResult(matched, changed, unchanged, actor_ids, refused)``.

        Each actor gets the engine call of its own button, with an audit row ``bulk_<action>`` (who
        ``"python"``, ``reason``); an actor with nothing to do or that refuses (in flight, rolled back...)
        is ``unchanged`` (a refusal's reason in ``refused``) and the others go on. Actors are read 200 at a
        time by keyset: no lock is held on more than one actor at once. ``dry_run=True`` writes nothing
        and reports the actors the action would change. ``InvalidFilterError`` for an unknown action or a
        bad filter, before anything is touched."""
        query = search.make_filter(name, state, attributes, created_after, created_before)
        return search.bulk_by_filter(self.runtime, action, query, reason=reason, dry_run=dry_run)

    alist_actors = _twin(list_actors)
    abulk = _twin(bulk)


#: the longest ``debounce`` delay and ``max_delay`` (seconds): a year
MAX_DEBOUNCE_SECONDS = 365 * 86400.0


class ActorTypeClient:
    """Handles on actors of one type (``client.payment_actor``); sync methods with ``a``-prefixed twins."""

    def __init__(
        self,
        runtime: RuntimeRole,
        definition: ActorDefinition,
        parent_id: str | None = None,
        step: Any = None,
    ) -> None:
        self.runtime = runtime
        self.definition = definition
        self.name = definition.name or ""
        #: recorded as the parent of the actors this creates (``Client.parent_id``); ``step``: ``Client.step``
        self.parent_id, self.step = parent_id, step

    def _handle(self, record: ports.ActorRecord) -> ActorHandle:
        return ActorHandle(self.runtime, self.definition, record.actor_id, record.key, step=self.step)

    def get_or_create(self, key: Any, input: Any = None) -> ActorHandle:
        """The actor with ``key`` (str or list), creating it with ``input`` if needed.

        From a step body (``step.client()``) to an actor on another shard under ``SHARDS`` it is committed
        with the step and created by the relay (``sending.created_with_step``): the handle's id is computed
        from the key and returned at once; sends through it follow the create (DESIGN.md section 21).

        Creation order (ENGINE-SEMANTICS.md section 10): state (``create_state``/``state``), ``on_create(c)``
        or ``on_create(c, input)`` (serialised like an action), then, for a workflow actor, it is due (created
        due in one store write, or made due by ``on_create``'s own write, so the hook always runs before the
        workflow) and handed to the dispatcher (vars and ``on_wake`` run in the executor). Raises
        ``SerializationError``/``PayloadTooLargeError`` for an unserializable or oversized input/state."""
        key = normalize_key(key)
        if (relayed := created_with_step(self, key, input)) is not None:
            return ActorHandle(self.runtime, self.definition, relayed, key, step=self.step)
        handle, _ = self._get_or_create(key, input, lookup_first=True)
        return handle

    def create(self, key: Any, input: Any = None) -> ActorHandle:
        """Create a new actor with ``key``; ``ActorAlreadyExistsError`` if one exists. See ``get_or_create``;
        from a step body to another shard it is a direct write there (it must tell whether the key exists).

        The initial state is built before the insert (one store write creates the actor, already due for
        a workflow actor without ``on_create``), so ``create_state`` also runs when the key turns out to
        exist; ``on_create`` runs only for the actor actually created."""
        handle, created = self._get_or_create(normalize_key(key), input, lookup_first=False)
        if not created:
            raise ActorAlreadyExistsError(
                f"actor {self.name!r} with key {handle.key!r} already exists", name=self.name, key=handle.key
            )
        return handle

    def get(self, key: Any) -> ActorHandle:
        """The existing actor with ``key``; ``ActorNotFoundError`` if there is none. From a step body to an
        actor on another shard whose id its key gives, no lookup: a relayed send to a missing actor fails
        at delivery (marked failed, logged; ``sending.remote_id``)."""
        key = normalize_key(key)
        if (remote := remote_id(self, key)) is not None:
            return ActorHandle(self.runtime, self.definition, remote, key, step=self.step)
        record = self.runtime.store.find_actor(self.name, key)
        if record is None:
            raise errors.ActorNotFoundError(
                f"no actor {self.name!r} with key {key!r}", name=self.name, key=key
            )
        return self._handle(record)

    def get_for_id(self, actor_id: str) -> ActorHandle:
        """The existing actor with id ``actor_id``; ``ActorNotFoundError`` if unknown or of another type."""
        record = self.runtime.store.get_actor(actor_id)
        if record.name != self.name:
            raise errors.ActorNotFoundError(
                f"actor {actor_id} is a {record.name!r}, not a {self.name!r}", actor_id=actor_id
            )
        return self._handle(record)

    def debounce(self, key: Any, input: Any = None, delay: Any = 5.0, max_delay: Any = None) -> ActorHandle:
        """Start the workflow of ``key`` once a burst of calls is over (DESIGN.md section 20;
        docs/howto/flow-control.md): it starts ``delay`` seconds (float or timedelta) after the last call,
        each call replacing its input with ``input`` (and its initial state, built again from it, for a type
        without ``on_create``) and pushing the start back, but never later than ``max_delay`` seconds
        after the first call of the burst (None: no bound). A call once the workflow started, or is due to
        start now, behaves as ``get_or_create`` (the input is ignored). Returns the actor's handle.

        The start is the actor's deferred wake-up (``wake_at``; ``store.defer_start``): the sweep of any
        worker (or ``drain``) starts it when it comes, as it ends a sleep. ``on_create`` runs once, at the
        first call. Raises ``TypeError`` for a type without a workflow, ``ValueError`` for a negative
        delay or one over ``MAX_DEBOUNCE_SECONDS`` (a year), and what ``get_or_create`` raises."""
        runtime, definition = self.runtime, self.definition
        if definition.run is None:
            raise TypeError(f"actor type {self.name!r} has no workflow (no run function) to debounce")
        seconds = to_seconds(delay)
        bound = to_seconds(max_delay)
        assert seconds is not None
        for label, value in (("delay", seconds), ("max_delay", bound)):
            if value is not None and not value <= MAX_DEBOUNCE_SECONDS:
                raise ValueError(
                    f"{label} must be at most {MAX_DEBOUNCE_SECONDS:g} s (a year), got {value!r}"
                )
        key = normalize_key(key)
        limit = runtime.settings.max_payload_bytes
        serde.to_json(key, where="actor key (MAX_KEY_BYTES)", max_bytes=runtime.settings.max_key_bytes)
        input = serde.roundtrip(input, where="actor input", max_bytes=limit)

        def create_state() -> Any:
            state = definition.initial_state(serde.roundtrip(input), key=key)
            serde.to_json(state, where="initial actor state", max_bytes=limit)
            return state

        store = runtime.store
        hooked = definition.on_create is not None
        # a new actor is created with its deferred start in the same write (nothing is left without a
        # start by a crash); with on_create it is created not due, the hook runs, then defer_start sets it
        first_start = None if hooked else min(seconds, bound) if bound is not None else seconds
        with runtime.observer.create(self.name, key) as observation:
            record, created = store.get_or_create_actor(
                self.name,
                key,
                input,
                create_state,
                start_after=first_start,
                trace_context=observation.trace_context(),
                flow=(lambda state: flow_of(runtime, definition, key, state))
                if definition.has_flow
                else None,
                parent_id=self.parent_id,
            )
            observation.set("rivet.actor.id", record.actor_id)
        if created and not hooked:
            return self._handle(record)
        if created:
            actions.run_create_hook(runtime, definition, record.actor_id, key, input, make_due=False)
        state = ports.UNSET if created or hooked else create_state()
        store.defer_start(record.actor_id, input, state, seconds, bound)
        return self._handle(record)

    aget_or_create = _twin(get_or_create)
    acreate = _twin(create)
    aget = _twin(get)
    aget_for_id = _twin(get_for_id)
    adebounce = _twin(debounce)

    def _get_or_create(self, key: list, input: Any, *, lookup_first: bool = True) -> tuple[ActorHandle, bool]:
        """Get or create the actor; ``lookup_first`` False builds the state up front and inserts at once
        (``store.create_actor``: one write when the key is new), True looks the key up first (``create_state``
        then runs only when creating). A workflow actor is created due, or, with ``on_create``, made due
        by the hook's own write; it is then handed to the dispatcher. If ``on_create`` raises, the new actor
        is deleted again and the hook's exception propagates (nothing is left behind)."""
        runtime, definition = self.runtime, self.definition
        limit = runtime.settings.max_payload_bytes
        serde.to_json(key, where="actor key (MAX_KEY_BYTES)", max_bytes=runtime.settings.max_key_bytes)
        input = serde.roundtrip(input, where="actor input", max_bytes=limit)

        def create_state() -> Any:
            state = definition.initial_state(serde.roundtrip(input), key=key)
            serde.to_json(state, where="initial actor state", max_bytes=limit)
            return state

        workflow = definition.run is not None
        due = workflow and definition.on_create is None  # on_create runs before the actor is due
        with runtime.observer.create(self.name, key) as observation:  # the rivet.create span
            handle, created = self._insert(
                key, input, create_state, due, lookup_first, observation.trace_context()
            )
            observation.set("rivet.actor.id", handle.actor_id)
        return handle, created

    def _insert(
        self, key: list, input: Any, create_state: Callable, due: bool, lookup_first: bool, trace_context: Any
    ) -> tuple[ActorHandle, bool]:
        """The store write of ``_get_or_create`` (with the creation's trace context), then ``on_create``
        and the hand-over to the dispatcher for a new workflow actor."""
        runtime, definition = self.runtime, self.definition
        workflow = definition.run is not None
        store = runtime.store

        def flow(state: Any) -> ports.Flow | None:
            return flow_of(runtime, definition, key, state)

        if lookup_first:
            record, created = store.get_or_create_actor(
                self.name,
                key,
                input,
                create_state,
                due=due,
                trace_context=trace_context,
                flow=flow if definition.has_flow else None,
                parent_id=self.parent_id,
            )
        else:
            try:
                state = create_state()
            except Exception:  # for an existing key, create() reports that rather than the state's error
                existing = store.find_actor(self.name, key)
                if existing is None:
                    raise
                return self._handle(existing), False
            record, created = store.create_actor(
                self.name,
                key,
                input,
                state,
                due=due,
                trace_context=trace_context,
                flow=flow(state),
                parent_id=self.parent_id,
            )
        handle = self._handle(record)
        if created:
            if definition.on_create is not None:
                actions.run_create_hook(runtime, definition, record.actor_id, key, input, make_due=workflow)
            if workflow:
                runtime.wake(record.actor_id)
        return handle, created


class ActorHandle:
    """One actor: ``.actor_id`` (str), ``.key`` (list), ``.name``; ``call``/``acall`` actions (or
    ``handle.action_name(*args)``), ``send``/``asend`` to its queues, ``destroy``, ``recover``, and
    read-only ``state()``/``workflow_state()``/``record()``."""

    def __init__(
        self, runtime: RuntimeRole, definition: ActorDefinition, actor_id: str, key: list, *, step: Any = None
    ) -> None:
        self.runtime = runtime
        self.definition = definition
        self.actor_id = actor_id
        self.key = list(key)
        self.name = definition.name or ""
        self.step = step  # the ``StepContext`` of ``step.client()``, or None (``Client.step``)

    def __repr__(self) -> str:
        return f"<ActorHandle {self.name} {self.key!r} {self.actor_id}>"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, ActorHandle) and other.actor_id == self.actor_id

    def __hash__(self) -> int:
        return hash(self.actor_id)

    def __getattr__(self, name: str) -> Callable[..., Any]:
        definition = self.__dict__.get("definition")
        if name.startswith("_") or definition is None or name not in definition.actions:
            raise AttributeError(f"actor handle has no action or attribute {name!r}")

        def action(*args: Any) -> Any:
            return self.call(name, *args)

        action.__name__ = name
        return action

    # --- actions ------------------------------------------------------------------------------------

    def call(self, action: str, *args: Any) -> Any:
        """Run action ``action`` with ``args`` and return its result (serialised with step bodies).

        The action runs as ``fn(c, *args)`` (sync, or async run to completion) under the actor's row lock,
        after any running step has committed; its state changes are saved when it returns. Arguments and
        result go through the serializer (the caller gets a copy). Raises ``ActionNotFoundError``,
        ``ActorNotFoundError``, ``WorkflowInFlightError`` (a step held the lock past
        ``settings.action_timeout``), ``SerializationError``/``PayloadTooLargeError``, or what the action
        raised (then no state change is saved)."""
        fn = self.definition.get_action(action)
        check_not_reentrant(self.actor_id, f"call action {action!r}")
        runtime = self.runtime
        limit = runtime.settings.max_payload_bytes
        args = serde.roundtrip(list(args), where=f"action {action!r} arguments", max_bytes=limit)
        return actions.run_action(
            runtime, self.definition, self.actor_id, self.key, fn, args, label=f"action {action!r}"
        )

    async def acall(self, action: str, *args: Any) -> Any:
        """Async twin of ``call``."""
        return await bridge.call(self.call, action, *args)

    # --- queries ------------------------------------------------------------------------------------

    def query(self, name: str, *args: Any) -> Any:
        """Run the query ``name`` with ``args`` and return its result, at once: it reads the actor's last
        committed state and vars and never waits for a running step (DESIGN.md section 13).

        The query runs as ``fn(c, *args)`` on a read-only context (``engine.queries.QueryContext``);
        arguments and result go through the serializer. Raises ``QueryNotFoundError``,
        ``ActorNotFoundError``, ``StepOnlyError`` (the query tried to write), ``SerializationError``/
        ``PayloadTooLargeError``, or what the query raised. Callable from a step body of the same actor."""
        fn = self.definition.get_query(name)
        runtime = self.runtime
        limit = runtime.settings.max_payload_bytes
        args = serde.roundtrip(list(args), where=f"query {name!r} arguments", max_bytes=limit)
        return queries.run_query(runtime, self.definition, self.actor_id, self.key, fn, args)

    async def aquery(self, name: str, *args: Any) -> Any:
        """Async twin of ``query``."""
        return await bridge.call(self.query, name, *args)

    # --- queues -------------------------------------------------------------------------------------

    def send(
        self,
        queue: str,
        body: Any = None,
        wait: bool = False,
        timeout: float | None = None,
        dedup_id: str | None = None,
    ) -> SendResult | None:
        """Send ``body`` to the actor's queue ``queue``; wakes the workflow if it waits on that queue.

        With ``wait=False`` returns None. With ``wait=True`` the message is completable and this blocks
        until the workflow calls ``message.complete(response)`` -> ``SendResult("completed", response)``, or
        ``timeout`` seconds (float/timedelta; None means ``settings.action_timeout``) pass, or the workflow
        ends or the actor is destroyed without completing it -> ``SendResult("timed_out", None, detail)``.
        While it waits it holds no database connection: on a store that notifies senders (PostgreSQL:
        LISTEN/NOTIFY on one connection per process; MemoryStore) it looks when the completion or the
        end is announced and once at the deadline; elsewhere it looks after ``settings.poll_interval`` s,
        backing off to every ``MAX_SEND_POLL_SECONDS`` s (docs/howto/calling.md).

        Raises ``TooManyWaitingSendsError`` before anything is stored when ``settings.max_waiting_sends``
        sends of this process wait already, ``QueueNotFoundError``, ``ActorNotFoundError``,
        ``SerializationError``/``PayloadTooLargeError`` (spec: "Queues"), ``NoWorkflowError`` (no run
        function) and ``WorkflowFinishedError`` (the workflow is completed or cancelled: nothing is stored;
        a failed one accepts the message for a recover or replay).

        ``dedup_id`` (str, at most 200 characters): a second send with the same id to this actor, while the
        first message is kept (until the actor is destroyed), stores nothing and returns as the first did
        (a waiting one waits on the first message); concurrent senders store one message (DESIGN.md
        section 20; docs/howto/flow-control.md). ``ValueError`` for an empty or too long id.

        From a step body to an actor on another shard, a send without ``wait`` and ``dedup_id`` is written
        with the step's commit and relayed after it (``sending.sent_with_step``; DESIGN.md section 21)."""
        if sent_with_step(self, queue, body, wait, dedup_id):
            return None
        if not wait:
            send_message(self.runtime, self.definition, self.actor_id, queue, body, False, dedup_id=dedup_id)
            return None
        check_not_reentrant(self.actor_id, "send to a queue and wait for the response")
        with waiting_send_slot(self.runtime.settings.max_waiting_sends):
            # watching starts before the message is stored, so nothing the workflow does to it is missed
            with self.runtime.store.watch_sends(self.actor_id) as watch:
                wait = WaitingSend(self.runtime, self.actor_id, watch, timeout)
                result = wait.begin(lambda: self._send_completable(queue, body, dedup_id))
                while result is None:
                    result = wait.look(watch.wait(wait.pause()))
                return result

    def _send_completable(self, queue: str, body: Any, dedup_id: str | None) -> ports.MessageRecord:
        return send_message(
            self.runtime, self.definition, self.actor_id, queue, body, True, dedup_id=dedup_id
        )

    async def asend(
        self,
        queue: str,
        body: Any = None,
        wait: bool = False,
        timeout: float | None = None,
        dedup_id: str | None = None,
    ) -> SendResult | None:
        """Async twin of ``send``: store calls through ``bridge.call`` (inline in a run's loop, else
        ``sync_to_async``); the wait itself holds no thread (an ASGI view awaiting it frees its worker)."""
        store = self.runtime.store
        if sent_with_step(self, queue, body, wait, dedup_id):  # as ``send`` (no store call)
            return None
        if not wait:
            await bridge.call(
                send_message, self.runtime, self.definition, self.actor_id, queue, body, False, dedup_id
            )
            return None
        check_not_reentrant(self.actor_id, "send to a queue and wait for the response")
        with waiting_send_slot(self.runtime.settings.max_waiting_sends):
            with await bridge.call(store.watch_sends, self.actor_id) as watch:
                wait = WaitingSend(self.runtime, self.actor_id, watch, timeout)
                result = await bridge.call(wait.begin, lambda: self._send_completable(queue, body, dedup_id))
                while result is None:
                    result = await bridge.call(wait.look, await watch.wait_async(wait.pause()))
                return result

    # --- lifecycle ----------------------------------------------------------------------------------

    def destroy(self) -> None:
        """Run ``on_destroy(c)`` (after any running step) and remove the actor, its history and messages.

        A running executor's next write is rejected and it stops. ``ActorNotFoundError`` if already gone."""
        check_not_reentrant(self.actor_id, "destroy the actor through the client (use step.destroy())")
        actions.destroy(self.runtime, self.definition, self.actor_id, self.key)

    def replay(
        self, entry_id: str | None = None, reason: str | None = None, dry_run: bool = False
    ) -> repairs.RepairResult | repairs.ReplayPlan:
        """Replay the workflow from the step ``entry_id`` (its history key, e.g. ``"charge"``), or from the
        start when it is None: the Python twin of the HTTP replay (ENGINE-SEMANTICS.md section 9;
        docs/explanation/replay-and-recover.md).

        With ``dry_run=True`` nothing is written: it returns the ``ReplayPlan`` (``entry_id``, ``reset``,
        ``deleted``, ``rerun``: the steps that run again, in order, each with a new idempotency key) of the
        replay it would do, and raises what that replay would raise. Otherwise the entries from that step on
        are deleted (archived in the audit row, written with ``who`` ``"python"`` and ``reason``), the
        workflow output and error cleared, and the workflow runs again; returns the ``RepairResult``
        (``deleted``, ``reset``, ``workflow_state``). Raises, changing nothing, ``WorkflowInFlightError``
        while an executor holds the actor, ``EntryNotFoundError``, ``InvalidReplayTargetError``,
        ``WorkflowRolledBackError``, ``HistoryDivergedError`` (see ``repairs.replay``)."""
        check_not_reentrant(self.actor_id, "replay the workflow from inside its own step")
        if dry_run:
            return repairs.replay_plan(self.runtime, self.actor_id, entry_id)
        return repairs.replay(self.runtime, self.actor_id, entry_id, reason=reason)

    def recover(self, reason: str | None = None) -> bool:
        """Restart a failed workflow (ENGINE-SEMANTICS.md section 3, "Recover"); the audit row records
        ``who`` ``"python"`` and ``reason``.

        Failed and exhausted steps go back to pending with 0 attempts, the workflow error is cleared, the
        workflow becomes sleeping and is woken. Returns False (nothing done) when the workflow is not
        failed; raises ``WorkflowInFlightError`` when an executor holds the actor, and, changing nothing,
        ``HistoryDivergedError`` when the history with the failed steps reset does not replay on the current
        code and ``WorkflowRolledBackError`` when the run was rolled back (replay it instead); see
        ``repairs.recover``."""
        if self.runtime.store.get_actor(self.actor_id).workflow_state != ports.FAILED:
            return False
        try:
            repairs.recover(self.runtime, self.actor_id, reason=reason)
        except errors.WorkflowNotFailedError:  # finished or restarted meanwhile
            return False
        return True

    def cancel(self, reason: str | None = None, children: bool = False) -> bool:
        """Cancel the workflow: state ``cancelled``, wake-up cleared, never run again; no rollback runs.
        The audit row records ``who`` ``"python"`` and ``reason``.

        A run in progress is fenced out (its next write is rejected). Returns False when the workflow had
        already finished. The actor itself, its state and actions stay (``destroy()`` removes it).

        ``children=True`` also cancels every unfinished descendant (the actors its runs created, theirs,
        and so on: ``children()``), each with its own audit row, even when this workflow had finished
        already (DESIGN.md section 20). Children of a type declaring ``parent_close="cancel"`` are
        cancelled with their parent either way.
        """
        return cancel_workflow(self.runtime, self.actor_id, reason=reason, children=children)

    def children(self) -> list[ActorHandle]:
        """Handles on the live actors this actor's runs created (``step.client()`` in a step body, or
        ``ctx.spawn``), oldest first; a child of a type not registered in this process is left out
        (DESIGN.md section 20)."""
        registry = self.runtime.registry
        return [
            ActorHandle(self.runtime, registry.get(record.name), record.actor_id, record.key)
            for record in self.runtime.store.list_children(self.actor_id)
            if record.name in registry
        ]

    def parent(self) -> ActorHandle | None:
        """The handle of the actor whose run created this one, or None (created from outside a run, or
        the parent is gone or of a type not registered here)."""
        parent_id = self.record().parent_id
        if parent_id is None:
            return None
        try:
            record = self.runtime.store.get_actor(parent_id)
        except errors.ActorNotFoundError:
            return None
        if record.name not in self.runtime.registry:
            return None
        return ActorHandle(self.runtime, self.runtime.registry.get(record.name), record.actor_id, record.key)

    def pause(self, reason: str | None = None) -> bool:
        """Pause the actor (DESIGN.md section 12): it is not run until ``resume()``; ``workflow_state()``
        reads ``"paused"``. Sends are accepted and kept; a step running now finishes and no new step starts.
        ``reason`` (str or None) is kept with the pause. True when this paused it, False when it was paused
        already or its workflow has finished. ``ActorNotFoundError``."""
        return repairs.pause(self.runtime, self.actor_id, reason)

    def resume(self, reason: str | None = None) -> bool:
        """Resume a paused actor: it runs again, and what came due while it was paused (a send, a sleep's
        end, the workflow's timeout) takes effect once. ``reason`` goes into the audit row (who:
        ``"python"``). True when it was paused, False (a no-op) otherwise."""
        return repairs.resume(self.runtime, self.actor_id, reason)

    def retry(self, reason: str | None = None) -> bool:
        """Retry a run a code error suspended (DESIGN.md section 16), once the code is fixed: it goes on from
        where it stopped (completed steps are not run again). ``reason`` goes into the audit row (who:
        ``"python"``). True when it was suspended; False, writing nothing, otherwise."""
        check_not_reentrant(self.actor_id, "retry the workflow from inside its own step")
        return retrying.retry(self.runtime, self.actor_id, reason)

    def fork(
        self,
        entry_id: str | None = None,
        input: Any = ports.UNSET,
        state: Any = ports.UNSET,
        key: Any = None,
        reason: str | None = None,
    ) -> ActorHandle:
        """A new actor of this type that starts from a copy of this one's history up to, not including, the
        step ``entry_id`` (all of it when None) and runs from there (DESIGN.md section 19; the manual's
        "Fork a run"): the copied steps replay their recorded results, the rest runs fresh.

        ``input``/``state``: the new actor's (this actor's when left out); ``key``: its key (default: this
        key plus a ``"fork-<hex>"`` part, new for each fork). This actor is not changed; both get the audit
        row ``fork`` (who ``"python"``, ``reason``). Returns the new actor's handle. Raises, writing nothing,
        ``WorkflowInFlightError`` while an executor holds this actor, ``EntryNotFoundError``,
        ``InvalidReplayTargetError``, ``WorkflowRolledBackError``, ``HistoryDivergedError``,
        ``ActorAlreadyExistsError`` (the key is taken), ``SerializationError`` (see ``forks.fork``).
        """
        check_not_reentrant(self.actor_id, "fork the workflow from inside its own step")
        result = forks.fork(
            self.runtime, self.actor_id, entry_id, input=input, state=state, key=key, reason=reason
        )
        return ActorHandle(self.runtime, self.definition, result.actor_id, result.key)

    adestroy = _twin(destroy)
    areplay = _twin(replay)
    arecover = _twin(recover)
    acancel = _twin(cancel)
    achildren = _twin(children)
    aparent = _twin(parent)
    apause = _twin(pause)
    aresume = _twin(resume)
    aretry = _twin(retry)
    afork = _twin(fork)

    # --- reads --------------------------------------------------------------------------------------

    def record(self) -> ports.ActorRecord:
        """The actor's stored record (a copy); ``ActorNotFoundError`` if destroyed."""
        return self.runtime.store.get_actor(self.actor_id)

    def state(self) -> Any:
        """The actor's current stored state (a copy), without running an action."""
        return self.record().state

    def attributes(self) -> dict[str, Any]:
        """The actor's search attributes (``ctx.set_attributes``; DESIGN.md section 19), a dict of JSON
        scalars (empty when none were set); ``ActorNotFoundError`` if destroyed."""
        return dict(self.record().attributes)

    def workflow_state(self) -> str:
        """The workflow status: pending, running, sleeping, completed, rolling_back, failed, cancelled,
        suspended (a code error stopped the run: ``retry()`` after the fix) or paused (an operator paused
        the actor: ``pause()``)."""
        return self.record().workflow_state

    arecord = _twin(record)
    astate = _twin(state)
    aworkflow_state = _twin(workflow_state)

    # --- durable streams ------------------------------------------------------------------------------

    def read_stream(
        self, name: str, offset: int = 0, timeout: float | None = None, include_discarded: bool = False
    ) -> Iterator[ports.StreamItem]:
        """Iterate the actor's durable stream ``name`` (DESIGN.md section 17, docs/howto/streams.md):
        ``StreamItem(offset, value, attempt, discarded, at)`` from ``offset`` (the first offset returned)
        on, blocking for new items until the stream is closed (``close()`` or the workflow's end: the
        iterator then ends) or ``timeout`` seconds (float; None: no limit) pass with nothing new. Items of
        step attempts that did not complete are skipped unless ``include_discarded``. Waiting holds no
        database connection (PostgreSQL: LISTEN/NOTIFY; elsewhere a short poll). ``ActorNotFoundError``
        (also when the actor is destroyed while reading), ``ValueError`` for a bad name or offset."""
        return streams.read_stream(
            self.runtime.store, self.actor_id, name, offset, timeout, include_discarded
        )

    def aread_stream(
        self, name: str, offset: int = 0, timeout: float | None = None, include_discarded: bool = False
    ) -> AsyncIterator[ports.StreamItem]:
        """``read_stream`` as an async iterator (``async for item in handle.aread_stream(name)``): store
        calls run off the event loop and the wait holds no thread."""
        return streams.aread_stream(
            self.runtime.store, bridge.call, self.actor_id, name, offset, timeout, include_discarded
        )

    aattributes = _twin(attributes)
