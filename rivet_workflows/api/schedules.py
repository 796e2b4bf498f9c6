"""The ``/schedules`` endpoints of the HTTP API: schedules stored as data (DESIGN.md section 20).

Listing and reading a schedule are the operations ``list`` and ``read``; creating, pausing, resuming,
triggering, backfilling and deleting one is ``schedule`` (``rivet_workflows.access``). The ``AUTHORIZE``
hook is asked with the schedule's actor type and ``actor_id`` None; ``GET /schedules`` leaves out the
schedules of the types it refuses, as ``GET /actors`` does.
"""

from __future__ import annotations

from typing import Annotated, Any

from django.http import HttpRequest
from ninja import Path, Router

from .. import access, inputs
from ..engine.actor import data_schedules
from ..engine.model import errors, ports
from . import schemas as s
from .auth import principal_of
from .views import _auth, _decode, _errors, _shown, runtime

router = Router(tags=["schedules"])

ScheduleId = Annotated[str, Path(max_length=s.MAX_NAME_CHARS, pattern=inputs.TEXT_PATTERN)]


def _schedules() -> data_schedules.SchedulesClient:
    return runtime().client().schedules


def _load(request: HttpRequest, schedule_id: str, operation: str) -> ports.ScheduleRecord:
    """The schedule once the caller may do ``operation`` to it: the role rule (already applied by the
    route's auth), then the lookup (404), then the ``AUTHORIZE`` hook for its actor type."""
    record = runtime().store.schedule_get(schedule_id)
    if record is None:
        raise errors.ScheduleNotFoundError(f"no schedule {schedule_id!r}", schedule_id=schedule_id)
    access.check(request, principal_of(request), operation, record.actor)
    return record


def _out(request: HttpRequest, info: data_schedules.ScheduleInfo) -> dict[str, Any]:
    shown = access.may_inspect(request, principal_of(request), info.actor)
    values = _shown({"args": list(info.args), **({"input": info.input} if shown else {})})
    return {
        "scheduleId": info.schedule_id,
        "actor": info.actor,
        "key": info.key,
        "cron": info.cron,
        "every": info.every,
        "timezone": info.timezone,
        "paused": info.paused,
        "nextFireAt": info.next_fire_at,
        "lastFiredAt": info.last_fired_at,
        "action": info.action,
        "catchup": info.catchup,
        "createdAt": info.created_at,
        "redacted": [] if shown else ["input"],
        **values,
    }


def _fire_out(request: HttpRequest, actor: str, fire: ports.ScheduleFireRecord) -> dict[str, Any]:
    error = fire.error
    if error is not None and not access.may_inspect(request, principal_of(request), actor):
        error = {k: v for k, v in error.items() if k != "stack"}
    return {
        "scheduleId": fire.schedule_id,
        "tick": fire.tick,
        "firedAt": fire.fired_at,
        "how": fire.how,
        "status": fire.status,
        "actorId": fire.actor_id,
        "error": error,
        "missed": fire.missed,
    }


@router.get(
    "/schedules", response={200: s.SchedulePage, **_errors()}, summary="List schedules", **_auth(access.LIST)
)
def list_schedules(request: HttpRequest) -> Any:
    """Every schedule, by id, of the actor types the caller may ``list`` (the ``AUTHORIZE`` hook is asked
    once per type). Operation ``list``."""
    principal = principal_of(request)
    allowed: dict[str, bool] = {}
    items = []
    for info in _schedules().list():
        if info.actor not in allowed:
            allowed[info.actor] = access.allows(request, principal, access.LIST, info.actor)
        if allowed[info.actor]:
            items.append(_out(request, info))
    return {"items": items}


@router.post(
    "/schedules",
    response={200: s.ScheduleOut, **_errors(404, 409, 413)},
    summary="Create a schedule",
    **_auth(access.SCHEDULE),
)
def create_schedule(request: HttpRequest, payload: s.ScheduleIn) -> Any:
    """Create the schedule ``scheduleId`` (``ScheduleIn``). 404 for an unknown actor type or action, 409
    for a taken id, 422 for a bad definition (``every`` below 1 s, a cron expression or timezone that does
    not parse, neither or both of ``cron`` and ``every``). Operation ``schedule``."""
    rt = runtime()
    if payload.actor in rt.registry:  # an unknown type is a 404 below, asked of nobody
        access.check(request, principal_of(request), access.SCHEDULE, payload.actor)
    info = _schedules().create(
        payload.scheduleId,
        actor=payload.actor,
        key=payload.key,
        cron=payload.cron,
        every=float(payload.every) if payload.every is not None else None,
        timezone=payload.timezone,
        input=_decode(payload.input, "input"),
        action=payload.action,
        args=_decode(payload.args, "args"),
        catchup=payload.catchup,
        paused=payload.paused,
    )
    return _out(request, info)


@router.get(
    "/schedules/{schedule_id}",
    response={200: s.ScheduleOut, **_errors(404)},
    summary="Get a schedule",
    **_auth(access.READ),
)
def get_schedule(request: HttpRequest, schedule_id: ScheduleId) -> Any:
    """The schedule; 404 for an unknown id. Operation ``read``."""
    return _out(request, data_schedules.ScheduleInfo.of(_load(request, schedule_id, access.READ)))


@router.delete(
    "/schedules/{schedule_id}",
    response={200: s.ScheduleDeletedOut, **_errors(404)},
    summary="Delete a schedule",
    **_auth(access.SCHEDULE),
)
def delete_schedule(request: HttpRequest, schedule_id: ScheduleId) -> Any:
    """Delete the schedule and its fire log (the actors it started stay). Operation ``schedule``."""
    _load(request, schedule_id, access.SCHEDULE)
    _schedules().delete(schedule_id)
    return {"scheduleId": schedule_id, "deleted": True}


@router.get(
    "/schedules/{schedule_id}/fires",
    response={200: s.ScheduleFiresOut, **_errors(404)},
    summary="The fire log of a schedule",
    **_auth(access.READ),
)
def schedule_fires(request: HttpRequest, schedule_id: ScheduleId) -> Any:
    """The newest 500 fires in tick order (an error's ``stack`` only for callers that may ``inspect``).
    Operation ``read``."""
    record = _load(request, schedule_id, access.READ)
    fires = _schedules().fires(schedule_id, limit=s.MAX_PAGE)
    return {"items": [_fire_out(request, record.actor, f) for f in fires]}


@router.post(
    "/schedules/{schedule_id}/pause",
    response={200: s.ScheduleOut, **_errors(404)},
    summary="Pause a schedule",
    **_auth(access.SCHEDULE),
)
def pause_schedule(request: HttpRequest, schedule_id: ScheduleId) -> Any:
    """Stop the sweep firing the schedule (idempotent). Operation ``schedule``."""
    _load(request, schedule_id, access.SCHEDULE)
    return _out(request, _schedules().pause(schedule_id))


@router.post(
    "/schedules/{schedule_id}/resume",
    response={200: s.ScheduleOut, **_errors(404)},
    summary="Resume a schedule",
    **_auth(access.SCHEDULE),
)
def resume_schedule(request: HttpRequest, schedule_id: ScheduleId) -> Any:
    """Fire the schedule again from its first tick after now (idempotent). Operation ``schedule``."""
    _load(request, schedule_id, access.SCHEDULE)
    return _out(request, _schedules().resume(schedule_id))


@router.post(
    "/schedules/{schedule_id}/trigger",
    response={200: s.ScheduleFireOut, **_errors(404)},
    summary="Fire a schedule now",
    **_auth(access.SCHEDULE),
)
def trigger_schedule(request: HttpRequest, schedule_id: ScheduleId) -> Any:
    """Fire the schedule once now (also a paused one); the fire (``status`` ok or error). Operation
    ``schedule``."""
    record = _load(request, schedule_id, access.SCHEDULE)
    return _fire_out(request, record.actor, _schedules().trigger(schedule_id))


@router.post(
    "/schedules/{schedule_id}/backfill",
    response={200: s.ScheduleFiresOut, **_errors(404, 413)},
    summary="Fire the missed ticks of a range",
    **_auth(access.SCHEDULE),
)
def backfill_schedule(request: HttpRequest, schedule_id: ScheduleId, payload: s.BackfillIn) -> Any:
    """Fire each tick in ``[start, end)`` not fired yet, in order; the fires made. 422 for a range with
    no offset, ``end`` before ``start`` or more than 10000 ticks. Operation ``schedule``."""
    record = _load(request, schedule_id, access.SCHEDULE)
    fires = _schedules().backfill(schedule_id, payload.start, payload.end)
    return {"items": [_fire_out(request, record.actor, f) for f in fires]}
