"""Message delivery: store a queue message and hand its actor to the dispatcher when the send made it due."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..model import ports, serde

if TYPE_CHECKING:
    from ..model.definitions import ActorDefinition
    from ..model.roles import RuntimeRole


def wake_if_due(runtime: RuntimeRole, actor_id: str) -> bool:
    """Hand ``actor_id`` to the dispatcher when its ``wake_at`` has come (after a send); return whether it did.

    No hint while a live lease is held: the holder takes the message itself (a warm queue wait is notified
    by the store; any other run finds the actor due when it releases and runs again), and a holder that
    dies leaves the actor due for the sweep once its lease expires. A hint then would only start a run
    that finds the lease taken, or replays to the same wait after the holder took the message.
    """
    try:
        record = runtime.store.get_actor(actor_id)
    except Exception:  # destroyed meanwhile: nothing to wake
        return False
    if record.wake_at is None:
        return False
    now = runtime.store.now()
    if record.wake_at > now:
        return False
    if (
        record.lease_owner is not None
        and record.lease_expires_at is not None
        and record.lease_expires_at > now
    ):
        return False
    runtime.wake(actor_id)
    return True


def send_message(
    runtime: RuntimeRole,
    definition: ActorDefinition,
    actor_id: str,
    name: str,
    body: Any,
    completable: bool = False,
    dedup_id: str | None = None,
) -> ports.MessageRecord:
    """Validate and store a queue message for ``actor_id``, then wake it if the send made it due.

    Raises ``QueueNotFoundError`` (undeclared queue on an actor that declares queues),
    ``SerializationError``/``PayloadTooLargeError`` (body over ``settings.max_payload_bytes``),
    ``ActorNotFoundError``, ``NoWorkflowError`` (a type without a run function) and
    ``WorkflowFinishedError`` (the workflow is completed or cancelled: the store refuses it, nothing is
    stored; a failed workflow accepts it). Returns the stored ``MessageRecord`` (spec: "Queues"; ports: wake rules).

    ``dedup_id`` (a non-empty str of at most 200 characters, or None): when a kept message of the actor
    has it already, nothing is stored and that message is returned (DESIGN.md section 20); ``ValueError``
    for an empty or too long one.
    """
    if dedup_id is not None and (
        not isinstance(dedup_id, str) or not 0 < len(dedup_id) <= 200 or "\x00" in dedup_id
    ):
        raise ValueError(
            f"dedup_id must be a non-empty str of at most 200 characters without NUL, not {dedup_id!r}"
        )
    definition.check_queue(name)
    # encoded once: the store writes this encoding and its record carries ``body`` (no decode)
    body = serde.encode_once(body, where=f"queue {name!r} body", max_bytes=runtime.settings.max_payload_bytes)
    observation = runtime.observer.send(definition.name or "", actor_id, name)
    try:
        message, hint = runtime.store.send_and_check(
            actor_id,
            name,
            body,
            completable,
            trace_context=observation.trace_context(),
            dedup_id=dedup_id,
        )
    except BaseException as exc:
        observation.end(None, exc)
        raise
    observation.end()
    if hint is None:
        wake_if_due(runtime, actor_id)
    elif hint:
        runtime.wake(actor_id)
    return message
