"""The one action runner: an action, a scheduled action, ``on_create`` or a destroy run on an actor's state.

Every one of them goes through ``Store.run_action``: it waits while a step holds the actor's step lock, runs
the body on the stored state and saves the state the body leaves, all serialised with the run's commits
(ports module docstring). Used by the client, the schedule firing and the run (a destroy a step asked for).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ..model import errors, serde
from ..model.definitions import arity
from .actor_context import ActorContext, call_maybe_async, ensure_vars

if TYPE_CHECKING:
    from ..model.definitions import ActorDefinition
    from ..model.roles import RuntimeRole


def run_action(
    runtime: RuntimeRole,
    definition: ActorDefinition,
    actor_id: str,
    key: list,
    fn: Callable[..., Any],
    args: list,
    *,
    label: str,
) -> Any:
    """Run ``fn(c, *args)`` (sync, or async run to completion) as an action of ``actor_id`` and return a
    serialised copy of its result; ``args`` are already round-tripped through the serializer.

    ``c`` gets the process's vars (``initial_vars`` and ``on_wake`` first when this process has none). The
    state the action leaves is saved when it returns; nothing is saved when it raises. ``label`` names the
    action in serializer errors (``action 'x'``). Raises ``ActorNotFoundError``, ``WorkflowInFlightError``
    (a step held the lock past ``settings.action_timeout``), ``SerializationError``/``PayloadTooLargeError``
    for the result or the state, or what ``fn`` raised.
    """
    limit = runtime.settings.max_payload_bytes

    def body(state: Any) -> Any:
        c = ActorContext(runtime, definition, actor_id, key, state)
        ensure_vars(c)
        result = call_maybe_async(fn, c, *args)
        adopt_state(c, state)
        return serde.to_json(result, where=f"{label} result", max_bytes=limit)

    encoded, _ = runtime.store.run_action(actor_id, body, runtime.settings.action_timeout)
    return serde.from_json(encoded)


def run_create_hook(
    runtime: RuntimeRole, definition: ActorDefinition, actor_id: str, key: list, input: Any, *, make_due: bool
) -> None:
    """Run ``on_create(c)`` or ``on_create(c, input)`` on the actor just created (ENGINE-SEMANTICS.md 10).

    ``make_due`` (a workflow actor) makes it due in the hook's own write, so the hook always runs before
    the workflow. Creation and hook succeed or fail together: if the hook raises, the actor is deleted
    again (its key is free for the next attempt) and the hook's exception propagates.
    """
    hook = definition.on_create
    assert hook is not None
    takes_input = arity(hook) >= 2

    def body(state: Any) -> None:
        c = ActorContext(runtime, definition, actor_id, key, state)
        call_maybe_async(hook, *((c, serde.roundtrip(input)) if takes_input else (c,)))
        adopt_state(c, state)

    store = runtime.store
    try:
        store.run_action(actor_id, body, runtime.settings.action_timeout, make_due=make_due)
    except BaseException:
        try:
            store.destroy_actor(actor_id)
        except errors.ActorNotFoundError:
            pass
        raise


def destroy(runtime: RuntimeRole, definition: ActorDefinition, actor_id: str, key: list) -> None:
    """Run ``on_destroy(c)`` (after any running step) and delete the actor with its history, messages and
    schedules; this process forgets its vars. ``ActorNotFoundError`` if it is gone already."""

    def body(state: Any) -> None:
        ActorContext(runtime, definition, actor_id, key, state).destroy()

    runtime.store.run_action(actor_id, body, runtime.settings.action_timeout)
    runtime.vars.pop(actor_id, None)


def adopt_state(c: ActorContext, state: Any) -> None:
    """Carry a reassigned ``c.state`` into the object ``run_action`` saves, then check it like a step's
    state: ``SerializationError``/``PayloadTooLargeError`` (over ``settings.max_payload_bytes``) raised
    inside ``run_action``, so nothing is saved. ``TypeError`` when ``c.state`` became another type."""
    if c._state is not state:
        _replace_state(c, state)
    serde.to_json(state, where="actor state", max_bytes=c.runtime.settings.max_payload_bytes)


def _replace_state(c: ActorContext, state: Any) -> None:
    if isinstance(state, dict) and isinstance(c._state, dict):
        state.clear()
        state.update(c._state)
    elif isinstance(state, list) and isinstance(c._state, list):
        state[:] = c._state
    else:
        raise TypeError(
            "c.state was replaced by a value of another type; mutate the state in place (c.state['x'] = ...)"
        )
