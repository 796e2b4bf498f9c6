"""The actor context ``c`` passed to actions and hooks, and the helpers the client shares with it (DESIGN.md section 2)."""

from __future__ import annotations

import inspect
from typing import TYPE_CHECKING, Any

from asgiref.sync import async_to_sync

from ..model import serde
from . import bridge, schedules
from .delivery import send_message

if TYPE_CHECKING:
    from ..model.definitions import ActorDefinition
    from ..model.roles import ClientRole, RuntimeRole, SessionRole

_MISSING: Any = object()


async def _await(awaitable: Any) -> Any:
    return await awaitable


def call_maybe_async(fn: Any, *args: Any) -> Any:
    """Call ``fn(*args)`` from sync code; if it returns an awaitable, run it to completion with
    ``async_to_sync`` (so the coroutine's ``sync_to_async(thread_sensitive=True)`` calls come back to this
    thread and its DB connection). Returns the result."""
    result = fn(*args)
    if inspect.isawaitable(result):
        return async_to_sync(_await)(result)
    return result


class ActorQueue:
    """``c.queue``: send messages to this actor's own queues."""

    def __init__(self, context: ActorContext) -> None:
        self._c = context

    def send(self, name: str, body: Any = None) -> None:
        """Enqueue ``body`` on queue ``name`` of this actor.

        Inside a workflow run (hooks such as ``on_error``) the message rides in the run's next commit
        (the outbox; never refused: the workflow is running); elsewhere (an action, a scheduled action) it
        is stored at once and wakes the workflow if it waits on ``name``. Errors as ``send_message``:
        ``WorkflowFinishedError`` there when the workflow is completed or cancelled.
        """
        c = self._c
        if c._session is not None:
            c.definition.check_queue(name)
            value = serde.roundtrip(
                body, where=f"queue {name!r} body", max_bytes=c.runtime.settings.max_payload_bytes
            )
            c._session.writes.send(c.actor_id, name, value)
            return
        send_message(c.runtime, c.definition, c.actor_id, name, body)

    async def asend(self, name: str, body: Any = None) -> None:
        """Async twin of ``send`` (use it inside ``async`` actions)."""
        await bridge.call(self.send, name, body)


class ActorContext:
    """``c``: what actions and hooks see of their actor (DESIGN.md section 2, ENGINE-SEMANTICS.md section 10).

    ``c.state`` is the actor's state (mutate it in place, or assign a new value); ``c.vars`` the ephemeral
    vars of this process (rebuilt on wake); ``c.key`` (list), ``c.actor_id`` (str), ``c.name`` (actor type);
    ``c.broadcast(name, *args)``, ``c.queue.send(name, body)``, ``c.client()``, ``c.destroy()``.

    Built by the client around ``store.run_action`` (state saved when the action returns), or with
    ``ActorContext.for_run(session)`` for hooks inside a workflow run (state and vars are the run's).
    """

    def __init__(
        self,
        runtime: RuntimeRole,
        definition: ActorDefinition,
        actor_id: str,
        key: list,
        state: Any = None,
        vars: Any = _MISSING,
        *,
        session: SessionRole | None = None,
    ) -> None:
        self.runtime = runtime
        self.definition = definition
        self.actor_id = actor_id
        self.key = list(key)
        self._state = state
        self._vars = vars
        self._session = session
        self.destroyed = False
        self.queue = ActorQueue(self)

    @classmethod
    def for_run(cls, session: SessionRole) -> ActorContext:
        """A context on a workflow run: ``state``/``vars`` read and write ``session.state``/``session.vars``,
        ``queue.send`` goes to the run's write buffer (``session.writes.send``) and ``destroy()`` asks the run to
        destroy the actor after its final commit (``session.request_destroy``)."""
        return cls(session.runtime, session.definition, session.actor_id, session.actor.key, session=session)

    @property
    def name(self) -> str:
        """The actor type's registered name."""
        return self.definition.name or ""

    @property
    def state(self) -> Any:
        """The actor's state (a plain value, usually a dict)."""
        return self._session.state if self._session is not None else self._state

    @state.setter
    def state(self, value: Any) -> None:
        if self._session is not None:
            self._session.state = value
            self._session.mark_state_changed()
        else:
            self._state = value

    @property
    def vars(self) -> Any:
        """The actor's ephemeral vars in this process (created with ``create_vars``/``vars`` on first use)."""
        if self._session is not None:
            return self._session.vars
        if self._vars is _MISSING:
            self._vars = self.runtime.vars.get(self.actor_id, None)
        return self._vars

    @vars.setter
    def vars(self, value: Any) -> None:
        if self._session is not None:
            self._session.vars = value
        else:
            self._vars = value
            self.runtime.vars[self.actor_id] = value

    @property
    def cron(self) -> Any:
        """``c.cron``: recurring actions (``every``, ``set``, ``remove``, ``list``); engine.schedules."""
        return schedules.CronApi(self)

    @property
    def schedule(self) -> Any:
        """``c.schedule``: one-off scheduled actions (``after``, ``at``); engine.schedules."""
        return schedules.ScheduleApi(self)

    def broadcast(self, name: str, *args: Any) -> None:
        """Send event ``name`` with ``args`` to the actor's WebSocket subscribers (DESIGN.md section 7).

        ``args`` are sent as tagged JSON; ``SerializationError`` if they do not serialize.
        """
        payload = serde.to_json(list(args), where=f"event {name!r} arguments")
        self.runtime.broadcast(self.actor_id, name, payload)

    def client(self) -> ClientRole:
        """A client on the same runtime, to reach other actors."""
        return self.runtime.client()

    def destroy(self) -> None:
        """Destroy this actor: ``on_destroy(c)`` runs, then its state, history and messages are removed.

        Inside a workflow run the destroy happens after the run's current commit.
        """
        if self._session is not None:
            self._session.request_destroy()
            return
        if self.destroyed:
            return
        self.destroyed = True
        if self.definition.on_destroy is not None:
            call_maybe_async(self.definition.on_destroy, self)
        self.runtime.store.destroy_actor(self.actor_id)

    def __repr__(self) -> str:
        return f"<ActorContext {self.name} {self.key!r} {self.actor_id}>"


def ensure_vars(c: ActorContext) -> None:
    """Give an action context its vars: the process-local ones, or fresh ``initial_vars(c)`` followed by
    ``on_wake(c)`` when this process has none yet (the actor "wakes" to serve the action)."""
    if c._session is not None or c.runtime.vars.get(c.actor_id, _MISSING) is not _MISSING:
        return
    c.vars = c.definition.initial_vars(c)
    if c.definition.on_wake is not None:
        call_maybe_async(c.definition.on_wake, c)
