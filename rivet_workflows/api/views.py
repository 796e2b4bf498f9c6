"""The HTTP API endpoints (DESIGN.md section 6): actors, actions, queues and the workflow inspector."""

from __future__ import annotations

from typing import Annotated, Any

from asgiref.sync import sync_to_async
from django.http import HttpRequest
from ninja import Path, Query, Router, Status

from .. import access, inputs, sharding, tracing
from ..conf import rivet_settings
from ..engine.actor import audit, cancel
from ..engine.actor.delivery import send_message
from ..engine.client.sending import database_turn, waiting_send_slot
from ..engine.model import errors, ports, serde
from ..engine.model.keys import normalize_key
from ..engine.operate import forks, inspector, repairs, retrying, search
from ..engine.run.streams import check_name as check_stream_name
from . import listing
from . import schemas as s
from . import streams as stream_views
from .auth import ApiAuth, principal_of
from .errors import raised

router = Router(tags=["actors"])


def _errors(*statuses: int) -> dict[int, type[s.ErrorOut]]:
    """``response=`` entries of the error statuses an operation really answers (manual: HTTP API, errors).
    Every operation can answer 400 (a session cookie no database can store; malformed JSON where there is a
    body), 401 and 403 (auth; CSRF for a session's POST; an ``API_AUTH`` that refuses) and 422 (a parameter or
    body outside its schema); a POST also 413 (a body over MAX_BODY_BYTES, a value over MAX_PAYLOAD_BYTES)."""
    return {status: s.ErrorOut for status in sorted({400, 401, 403, 422, *statuses})}


#: a path segment naming an actor, an action or a queue: text a database can store, of bounded length
ActorId = Annotated[str, Path(max_length=s.ACTOR_ID_CHARS, pattern=inputs.TEXT_PATTERN)]
Name = Annotated[str, Path(max_length=s.MAX_NAME_CHARS, pattern=inputs.TEXT_PATTERN)]


def _auth(operation: str, *, inspector: bool = False) -> dict[str, Any]:
    """The ``auth`` of an endpoint doing ``operation`` (``access.OPERATIONS``; the role rule runs before the
    body is read) and the operation named in its OpenAPI entry as ``x-rivet-operation`` (the column of the
    manual's authorization table that governs it)."""
    return {
        "auth": ApiAuth(operation, inspector=inspector),
        "openapi_extra": {"x-rivet-operation": operation},
    }


class UserCodeError(errors.RivetWorkflowsError):
    """An action raised an exception."""

    group = "user"
    code = "action_failed"
    http_status = 400


class InvalidValueError(errors.RivetWorkflowsError):
    """A value in the request cannot be decoded."""

    group = "request"
    code = "invalid_value"
    http_status = 422


def runtime() -> Any:
    """The process runtime (``django_runtime.get_runtime``)."""
    from ..django_runtime import get_runtime

    return get_runtime()


def _decode(value: Any, where: str) -> Any:
    try:
        return serde.from_json(value)
    except Exception as exc:  # a malformed tagged value (e.g. {"__rw__": "datetime", "v": 5})
        raise InvalidValueError(f"{where}: {exc}", where=where) from exc


def _shown(values: dict[str, Any]) -> dict[str, Any]:
    """``values`` (field name -> Python value) as plain JSON (``inspector.plain``: ISO times, decimal
    strings; never the storage tags), plus ``types`` when one of them is not plain JSON: JSON Pointers from
    the response object (``/output/total``) to the type there (``{"/output/total": "decimal"}``)."""
    shown: dict[str, Any] = {}
    types: dict[str, str] = {}
    for name, value in values.items():
        shown[name], found = inspector.plain(value, f"/{name}")
        types.update(found)
    if types:  # only where it matters: a plain JSON answer stays exactly what it was
        shown["types"] = types
    return shown


def _record(request: HttpRequest, actor_id: str, operation: str) -> Any:
    """The stored record of ``actor_id`` once the caller may do ``operation`` to it (``access.check_actor``:
    the role rule, then 404 for an unknown actor, then the ``AUTHORIZE`` hook)."""
    return access.check_actor(request, principal_of(request), operation, actor_id, runtime().store.get_actor)


def _handle(request: HttpRequest, actor_id: str, operation: str) -> Any:
    """The client handle and record of ``actor_id``, after checking the caller may do ``operation`` to it
    (``_record``)."""
    record = _record(request, actor_id, operation)
    rt = runtime()
    if record.name not in rt.registry:
        raise errors.ActorNotFoundError(
            f"actor {actor_id} has type {record.name!r}, which is not registered", actor_id=actor_id
        )
    return rt.registry.client()[record.name].get_for_id(actor_id), record


# --- actors ------------------------------------------------------------------------------------------


@router.post(
    "/actors",
    response={200: s.CreateActorOut, **_errors(404, 413)},
    summary="Get or create",
    **_auth(access.CREATE),
)
def create_actor(request: HttpRequest, payload: s.CreateActorIn) -> Any:
    """Get or create the actor ``(name, key)`` with ``input``; ``created`` says which happened.

    Operation ``create`` (rivet_workflows.access), also when the actor exists already."""
    rt = runtime()
    if payload.name in rt.registry:  # an unknown type is a 404 below, asked of nobody
        access.check(request, principal_of(request), access.CREATE, payload.name)
    definition_client = rt.registry.client()[payload.name]  # ActorNotFoundError for an unknown type
    key = normalize_key(payload.key)
    # ``created`` comes from the store's insert: of concurrent callers only the one whose insert won sees True
    try:
        with tracing.request_context(request.headers):  # the caller's traceparent parents rivet.create
            handle, created = definition_client._get_or_create(key, _decode(payload.input, "input"))
    except errors.RivetWorkflowsError:  # StoreUnavailableError (503) for a database that went away
        raise
    except Exception as exc:  # user code raised (on_create, or create_state): the actor was not created
        definition = definition_client.definition
        hook = "on_create" if definition.on_create is not None else "create_state"
        raise UserCodeError(
            f"{hook} of {payload.name!r} raised {raised(request, exc)}; the actor was not created",
            hook=hook,
            error=type(exc).__name__,
        ) from exc
    return {"actor_id": handle.actor_id, "name": handle.name, "key": handle.key, "created": created}


@router.get("/actors", response={200: s.ActorPage, **_errors()}, summary="List actors", **_auth(access.LIST))
def list_actors(request: HttpRequest, filters: Query[s.ActorFilter]) -> Any:
    """Actors, newest first, filtered by type ``name``, workflow ``state``, search attributes
    (``attr.customer=c-42``: equal values; ``attr.total=120`` is the number, ``attr.total="120"`` the text),
    creation and update time (``createdAfter``, ``createdBefore``, ``updatedAfter``, ``updatedBefore``:
    ISO 8601 with an offset, exclusive); ``limit`` (1..500) and ``offset`` (0..2**53-1), or ``cursor``: a
    page's ``next_cursor``, which continues by keyset on ``(created_at, actor_id)`` (no actor skipped or
    repeated while others are created; DESIGN.md section 19). Values outside those bounds, or a ``state``
    that is not one of ``schemas.WorkflowState``, are a 422 ``validation_error``; a bad attribute or
    cursor a 400. Each actor shows (and filters as) the state ``states.shown`` gives: ``no_workflow`` for a
    type without a run function (not ``pending``), ``paused`` for a paused unfinished actor (not its stored
    state, e.g. ``sleeping``). Operation ``list``: with an ``AUTHORIZE`` hook, only the types it allows to
    ``list`` are included (a ``name`` it refuses is a 403)."""
    rt = runtime()
    run_less = frozenset(inspector.run_less_types(rt.registry))
    times = {
        "created_after": filters.createdAfter,
        "created_before": filters.createdBefore,
        "updated_after": filters.updatedAfter,
        "updated_before": filters.updatedBefore,
    }
    for label, when in times.items():
        if when is not None and when.tzinfo is None:
            raise errors.InvalidFilterError(
                f"{label}: give the time with its offset (Z or +01:00)", field=label
            )
    query = listing.listing_filter(
        request, filters.name, filters.state, listing.attribute_params(request), times, run_less
    )
    after = search.decode_cursor(filters.cursor) if filters.cursor else None
    offset = 0 if after is not None else filters.offset
    found = rt.store.find_actors(
        query, limit=filters.limit + 1, after=after, newest_first=True, offset=offset
    )
    page = found[: filters.limit]
    more = len(found) > filters.limit
    return {
        "items": [listing.summary(r, run_less) for r in page],
        "count": rt.store.count_actors(query),
        "limit": filters.limit,
        "offset": offset,
        "next_cursor": search.encode_cursor(search.after_key(page[-1])) if more and page else None,
    }


@router.post(
    "/actors/bulk/{bulk_action}",
    response={200: s.BulkOut, **_errors(404, 413)},
    summary="Bulk action by filter",
    tags=["inspector"],
    **_auth(access.REPLAY, inspector=True),
)
def bulk_action(request: HttpRequest, bulk_action: Name, payload: s.BulkIn) -> Any:
    """Do ``action`` (``recover``, ``cancel``, ``pause``, ``resume``, ``retry``, ``replay``: the whole
    workflow) to every actor ``filter`` selects (``{name?, state?, attributes?, createdAfter?,
    createdBefore?}``, as ``GET /actors``): each actor gets its own button's engine call and an audit row
    ``bulk_<action>`` (who: the user name, or ``"token"``; ``reason``). Actors are read 200 at a time, each
    changed in its own transaction: no lock on the table. ``dryRun``: nothing is written; ``changed`` and
    ``actor_ids`` say what would change. Answers ``{matched, changed, unchanged, actor_ids, refused}``; 404
    for an unknown action. Operation ``replay`` (the operator permission; DESIGN.md section 19), and with an
    ``AUTHORIZE`` hook each actor is asked for ``replay`` too (a refused actor is counted in ``refused``)."""
    action = bulk_action
    if action not in search.BULK_ACTIONS:
        raise errors.ActionNotFoundError(
            f"no bulk action {action!r}; one of: {', '.join(search.BULK_ACTIONS)}", action=action
        )
    rt = runtime()
    run_less = frozenset(inspector.run_less_types(rt.registry))
    f = payload.filter
    times = {"created_after": f.createdAfter, "created_before": f.createdBefore}
    for label, when in times.items():
        if when is not None and when.tzinfo is None:
            raise errors.InvalidFilterError(
                f"{label}: give the time with its offset (Z or +01:00)", field=label
            )
    query = listing.listing_filter(request, f.name, f.state, f.attributes, times, run_less, access.REPLAY)
    principal = principal_of(request)

    def check(actor_id: str) -> None:
        if rivet_settings.AUTHORIZE:
            access.check_actor(request, principal, access.REPLAY, actor_id, rt.store.get_actor)

    result = search.bulk_by_filter(
        rt,
        action,
        query,
        who=access.operator_name(request.auth, request),
        reason=payload.reason,
        dry_run=payload.dryRun,
        check=check,
    )
    return {
        "matched": result.matched,
        "changed": result.changed,
        "unchanged": result.unchanged,
        "actor_ids": result.actor_ids,
        "refused": result.refused,
        "dry_run": payload.dryRun,
    }


@router.get(
    "/actors/{actor_id}",
    response={200: s.ActorDetail, **_errors(404)},
    **_auth(access.READ),
    summary="Get actor",
    exclude_unset=True,  # ``types`` only when a value is not plain JSON
)
def get_actor(request: HttpRequest, actor_id: ActorId) -> Any:
    """One actor: identity, workflow status, state, input, output, error (plain JSON, with ``types``
    naming the type of each value JSON cannot hold, e.g. ``{"/output/total": "decimal"}``) and lease
    status, and its search ``attributes``. An actor whose type has no run function shows ``workflow_state``
    ``no_workflow``.

    Operation ``read``. The input and the error's stack are only shown to callers that may inspect (dev
    mode, the inspector token, staff with ``view_actor``); for others they are null and ``redacted``
    names them."""
    rt = runtime()
    record = _record(request, actor_id, access.READ)
    children, unavailable = sharding.children(rt.store, record.actor_id)
    actor_input, error, redacted = record.input, record.error, []
    if not access.may_inspect(request, principal_of(request), record.name, actor_id):
        if actor_input is not None:
            actor_input, redacted = None, ["input"]
        if isinstance(error, dict) and error.get("stack"):
            error, redacted = {**error, "stack": None}, [*redacted, "error.stack"]
        if isinstance(error, dict) and error.get("location"):  # a suspension's place in the code
            error, redacted = {**error, "location": None}, [*redacted, "error.location"]
    return {
        "actor_id": record.actor_id,
        "name": record.name,
        "key": record.key,
        "workflow_state": inspector.shown_workflow_state(rt.registry, record),
        "wake_at": record.wake_at,
        "waiting_for": record.waiting_for,
        "created_at": record.created_at,
        "updated_at": record.updated_at,
        "attributes": dict(record.attributes or {}),
        **_shown({"state": record.state, "input": actor_input, "output": record.output, "error": error}),
        "redacted": redacted,
        "in_flight": inspector.in_flight(record, rt.store.now()),
        "lease_expires_at": record.lease_expires_at,
        "parent_id": record.parent_id,
        "children": [child.actor_id for child in children],
        "unavailable_shards": unavailable,
    }


@router.get(
    "/actors/{actor_id}/streams/{name}",
    response={200: s.StreamPageOut, **_errors(404)},
    auth=ApiAuth(access.READ),
    openapi_extra={
        "x-rivet-operation": access.READ,
        # without ``Accept: application/json`` the answer is the event stream
        "responses": {
            200: {  # an int, as ninja keys the route's own: "200" would make a second key
                "description": "OK",
                "content": {
                    "application/json": {"schema": {"$ref": "#/components/schemas/StreamPageOut"}},
                    "text/event-stream": {"schema": {"type": "string"}},
                },
            }
        },
    },
    summary="Read a durable stream",
)
def read_stream(request: HttpRequest, actor_id: ActorId, name: Name, params: Query[s.StreamQuery]) -> Any:
    """The actor's durable stream ``name`` (DESIGN.md section 17, docs/howto/streams.md). With ``Accept:
    application/json``: a page ``{items: [{offset, value, attempt, discarded, at}], closed, next_offset}``
    at once. Otherwise Server-Sent Events (``text/event-stream``): each item as an event whose ``id:`` is
    its offset and ``data:`` its JSON value, new items as they are written, a comment line every 15 s of
    silence, and ``event: close`` once the stream is closed (or the workflow finished). The first item is
    ``offset``, unless a ``Last-Event-ID: N`` header (an SSE client's reconnection) asks to resume after N.
    Items of step attempts that did not complete are left out unless ``include_discarded``. Operation
    ``read``."""
    _record(request, actor_id, access.READ)
    streams_name = inputs_stream_name(name)
    offset = stream_views.start_offset(request, params.offset)
    store = runtime().store
    if "application/json" in request.headers.get("Accept", ""):
        return stream_views.page(
            store, actor_id, streams_name, offset, params.limit, params.include_discarded
        )
    return stream_views.sse_response(request, store, actor_id, streams_name, offset, params.include_discarded)


def inputs_stream_name(name: str) -> str:
    """``name`` checked as a stream name (``InvalidValueError``, 422, for one with "/", ":" or a leading "~")."""
    try:
        return check_stream_name(name)
    except ValueError as exc:
        raise InvalidValueError(str(exc), where="name") from exc


# --- actions and queues ----------------------------------------------------------------------------


@router.post(
    "/actors/{actor_id}/actions/{action}",
    response={200: s.ActionOut, **_errors(404, 409, 413)},
    **_auth(access.CALL),
    summary="Call an action",
    exclude_unset=True,  # ``types`` only when the result is not plain JSON
)
def call_action(request: HttpRequest, actor_id: ActorId, action: Name, payload: s.ActionIn) -> Any:
    """Run ``action(c, *args)`` on the actor and return ``{result}`` (plain JSON, with ``types`` as in
    ``GET /actors/{id}`` when it is not plain JSON). An exception raised by the action is
    a 400 ``{group: "user", code: "action_failed"}``; unknown actor or action is a 404; a step that holds the
    actor longer than ACTION_TIMEOUT a 409 ``workflow_in_flight``. Operation ``call``."""
    handle, _ = _handle(request, actor_id, access.CALL)
    handle.definition.get_action(action)  # ActionNotFoundError before anything runs
    args = _decode(payload.args, "args")
    try:
        with tracing.request_context(request.headers):  # sends and creations of the action join it
            result = handle.call(action, *args)
    except errors.RivetWorkflowsError:
        raise
    except Exception as exc:
        raise UserCodeError(
            f"action {action!r} raised {raised(request, exc)}", action=action, error=type(exc).__name__
        ) from exc
    serde.to_json(result, where="response")  # SerializationError for a value JSON cannot carry
    return _shown({"result": result})


class QueryFailedError(errors.RivetWorkflowsError):
    """A query raised an exception."""

    group = "user"
    code = "query_failed"
    http_status = 400


@router.post(
    "/actors/{actor_id}/queries/{query}",
    response={200: s.ActionOut, **_errors(404, 413)},
    **_auth(access.QUERY),
    summary="Run a query",
    exclude_unset=True,  # ``types`` only when the result is not plain JSON
)
def run_query(request: HttpRequest, actor_id: ActorId, query: Name, payload: s.ActionIn) -> Any:
    """Run the read-only query ``query(c, *args)`` on the actor's last committed state and return
    ``{result}`` (plain JSON, with ``types`` as in ``GET /actors/{id}``); it never waits for a running
    step (DESIGN.md section 13). Unknown actor or query is a 404; an exception raised by the query (also
    a write it tried: ``step_only``) a 400. Operation ``query`` (the role rule treats it as ``call``)."""
    handle, _ = _handle(request, actor_id, access.QUERY)
    handle.definition.get_query(query)  # QueryNotFoundError before anything runs
    args = _decode(payload.args, "args")
    try:
        result = handle.query(query, *args)
    except errors.RivetWorkflowsError:
        raise
    except Exception as exc:
        raise QueryFailedError(
            f"query {query!r} raised {raised(request, exc)}", query=query, error=type(exc).__name__
        ) from exc
    serde.to_json(result, where="response")
    return _shown({"result": result})


@router.post(
    "/actors/{actor_id}/queues/{queue}",
    response={200: s.SendOut, 202: s.SendAccepted, **_errors(404, 409, 413, 429)},
    **_auth(access.SEND),
    summary="Send to a queue",
    exclude_unset=True,  # ``types`` only when the response is not plain JSON
)
async def send_to_queue(request: HttpRequest, actor_id: ActorId, queue: Name, payload: s.SendIn) -> Any:
    """Send ``body`` to the actor's queue: 202 ``{message_id}``, or with ``wait`` 200 ``{status, response,
    detail}`` (``response`` plain JSON, with ``types`` as in ``GET /actors/{id}``): ``completed``, or
    ``timed_out`` with ``detail`` saying why (``SendResult.detail``: the
    timeout passed, the workflow ended without completing the message, the actor was destroyed). Unknown
    actor or undeclared queue -> 404; an actor whose type has no workflow -> 409 ``no_workflow``, and one
    whose workflow is completed or cancelled -> 409 ``workflow_finished`` (nothing would receive it, nothing
    is stored; a failed workflow accepts it). Operation ``send``.

    An async view: a waiting send holds no database connection while it waits, and on an ASGI server it is
    awaited on the event loop (Django's per-request thread idles meanwhile). Beyond ``MAX_WAITING_SENDS`` waiting sends in this process: 429 ``too_many_waiting_sends`` with
    ``Retry-After``, decided before the database is asked anything (docs/howto/calling.md)."""
    if not payload.wait:
        return await sync_to_async(_send_now)(request, actor_id, queue, payload)
    with waiting_send_slot(rivet_settings.MAX_WAITING_SENDS):
        handle, body = await sync_to_async(_send_target)(request, actor_id, payload, turn=True)
        with tracing.request_context(request.headers):  # the caller's traceparent parents rivet.send
            result = await handle.asend(
                queue, body, wait=True, timeout=payload.timeout, dedup_id=payload.dedupId
            )
    answer = {"status": result.status, **_shown({"response": result.response}), "detail": result.detail}
    return Status(200, answer)


def _send_target(
    request: HttpRequest, actor_id: str, payload: s.SendIn, *, turn: bool = False
) -> tuple[Any, Any]:
    """The handle a send goes to, after the access check, and the decoded body. ``turn``: read the actor in
    one of the waiting sends' database turns (``sending.database_turn``), the connection given back after."""
    if turn:
        with database_turn(runtime().store):
            return _send_target(request, actor_id, payload)
    handle, _ = _handle(request, actor_id, access.SEND)
    return handle, _decode(payload.body, "body")


def _send_now(request: HttpRequest, actor_id: str, queue: str, payload: s.SendIn) -> Any:
    handle, body = _send_target(request, actor_id, payload)
    with tracing.request_context(request.headers):  # the caller's traceparent parents rivet.send
        message = send_message(
            handle.runtime, handle.definition, actor_id, queue, body, False, dedup_id=payload.dedupId
        )
    return Status(202, {"message_id": str(message.id)})


# --- inspector ---------------------------------------------------------------------------------------


@router.get(
    "/actors/{actor_id}/inspector/workflow-history",
    response={200: s.HistoryOut, **_errors(404)},
    **_auth(access.INSPECT, inspector=True),
    tags=["inspector"],
    summary="Workflow history",
)
def workflow_history(request: HttpRequest, actor_id: ActorId) -> Any:
    """``{history, workflowState, isWorkflowEnabled}`` (ENGINE-SEMANTICS.md section 9). Operation
    ``inspect``."""
    _record(request, actor_id, access.INSPECT)
    return inspector.workflow_history(runtime(), actor_id)


@router.post(
    "/actors/{actor_id}/inspector/workflow/replay",
    response={200: s.RepairOut | s.ReplayPlanOut, **_errors(404, 409, 413)},
    **_auth(access.REPLAY, inspector=True),
    tags=["inspector"],
    summary="Replay the workflow",
)
def replay_workflow(request: HttpRequest, actor_id: ActorId, payload: s.ReplayIn | None = None) -> Any:
    """Replay from the step ``entryId`` (or everything when it, or the whole body, is omitted or ``null``);
        400 for an ``entryId`` the history has not or that is not a step; 409 ``workflow_in_flight`` while an
        executor holds the actor, ``history_diverged`` when the kept history does not replay on the deployed
        code (``metadata.location``, ``reached``, ``hint``) and ``rolled_back`` when a kept step was compensated
        (``metadata.replay_from``). A refused replay changes nothing. ``reason`` goes into the audit row (who: the
    user name, or ``"token"``). With ``dryRun`` true nothing changes: the answer is the plan ``{entryId, reset,
    deleted, rerun}`` (the same refusals). An unknown body field is a 422. Operation ``replay``."""
    _record(request, actor_id, access.REPLAY)
    entry_id = payload.entryId if payload is not None else None
    reason = payload.reason if payload is not None else None
    if payload is not None and payload.dryRun:
        return repairs.replay_plan(runtime(), actor_id, entry_id).as_dict()
    who = access.operator_name(request.auth, request)
    return repairs.replay(runtime(), actor_id, entry_id, who=who, reason=reason).as_dict()


@router.post(
    "/actors/{actor_id}/inspector/workflow/fork",
    response={200: s.ForkOut, **_errors(404, 409, 413)},
    **_auth(access.REPLAY, inspector=True),
    tags=["inspector"],
    summary="Fork the workflow",
)
def fork_workflow(request: HttpRequest, actor_id: ActorId, payload: s.ForkIn | None = None) -> Any:
    """Body ``{entryId?, input?, state?, key?, reason?}`` (optional; ``null`` is no body): create a new actor
    of the same type whose history is this one's before the step ``entryId`` (all of it when omitted), with
    ``input``/``state`` (this actor's when omitted) and ``key`` (default: this key plus a ``fork-<hex>``
    part), and run it from there; this actor is not changed (DESIGN.md section 19). Answers ``{actor_id,
    key, source_id, entry_id, copied}``. 404 ``entry_not_found`` for an ``entryId`` the history has not,
    400 ``invalid_replay_target`` when it is not a step; 409 ``actor_already_exists`` when the key is
    taken, ``workflow_in_flight`` while an executor holds the actor, ``rolled_back`` when a copied step was
    compensated (``metadata.replay_from``), ``history_diverged`` when the copy does not replay with the new
    input. A refused fork writes nothing. ``reason`` goes into both audit rows ``fork`` (who: the user name,
    or ``"token"``). Operation ``replay``."""
    _record(request, actor_id, access.REPLAY)
    given = payload.model_fields_set if payload is not None else set()
    options: dict[str, Any] = {
        "input": _decode(payload.input, "input") if "input" in given else ports.UNSET,
        "state": _decode(payload.state, "state") if "state" in given else ports.UNSET,
        "key": normalize_key(payload.key) if payload is not None and payload.key is not None else None,
        "reason": payload.reason if payload is not None else None,
    }
    entry_id = payload.entryId if payload is not None else None
    who = access.operator_name(request.auth, request)
    return forks.fork(runtime(), actor_id, entry_id, who=who, **options).as_dict()


@router.post(
    "/actors/{actor_id}/inspector/workflow/recover",
    response={200: s.RepairOut, **_errors(404, 409, 413)},
    **_auth(access.REPLAY, inspector=True),
    tags=["inspector"],
    summary="Recover a failed workflow",
)
def recover_workflow(request: HttpRequest, actor_id: ActorId, payload: s.RecoverIn | None = None) -> Any:
    """Body ``{reason?}`` (optional; ``null`` is no body). Reset failed/exhausted steps and restart a failed
    workflow; 409 when it is not failed or in flight, ``history_diverged`` when the reset history does not
    replay on the deployed code and ``rolled_back`` when the run was rolled back. A refused recover changes
    nothing. ``reason`` goes into the audit row (who: the user name, or ``"token"``). Operation ``replay``."""
    _record(request, actor_id, access.REPLAY)
    reason = payload.reason if payload is not None else None
    who = access.operator_name(request.auth, request)
    return repairs.recover(runtime(), actor_id, who=who, reason=reason).as_dict()


@router.post(
    "/actors/{actor_id}/inspector/workflow/cancel",
    response={200: s.CancelOut, **_errors(404, 409, 413)},
    **_auth(access.OPERATE, inspector=True),
    tags=["inspector"],
    summary="Cancel the workflow",
)
def cancel_workflow(request: HttpRequest, actor_id: ActorId, payload: s.CancelIn | None = None) -> Any:
    """Cancel the workflow (a paused one too): ``cancelled``, never run again, no rollback; a run in
    progress is fenced out. ``changed`` False, nothing written, when it had finished already. ``{reason?}``
    goes into the audit row ``cancel`` (who: the user name, or ``"token"``). ``{children: true}`` also
    cancels every unfinished descendant, each audited (even when this workflow had finished; DESIGN.md
    section 20). 404 for an unknown actor. Operation ``operate``."""
    _record(request, actor_id, access.OPERATE)
    reason = payload.reason if payload is not None else None
    children = payload.children if payload is not None else False
    who = access.operator_name(request.auth, request)
    changed = cancel.cancel(runtime(), actor_id, who=who, reason=reason, children=children)
    record = runtime().store.get_actor(actor_id)
    return {"actorId": actor_id, "changed": changed, "workflowState": record.workflow_state}


@router.post(
    "/actors/{actor_id}/inspector/workflow/pause",
    response={200: s.PauseOut, **_errors(404, 413)},
    **_auth(access.OPERATE, inspector=True),
    tags=["inspector"],
    summary="Pause the actor",
)
def pause_workflow(request: HttpRequest, actor_id: ActorId, payload: s.PauseIn | None = None) -> Any:
    """Pause the actor (DESIGN.md section 12): never claimed while paused, sends kept, a running step
    finishes and no new one starts. ``{reason?}``; ``changed`` False when it was paused already or finished.
    The audit row ``pause`` keeps ``reason`` and who (the user name, or ``"token"``). 404 for an unknown
    actor; 400/422 for a bad body. Operation ``operate``."""
    _record(request, actor_id, access.OPERATE)
    reason = payload.reason if payload is not None else None
    who = access.operator_name(request.auth, request)
    changed = repairs.pause(runtime(), actor_id, reason, who=who)
    return _pause_out(actor_id, changed)


@router.post(
    "/actors/{actor_id}/inspector/workflow/resume",
    response={200: s.PauseOut, **_errors(404, 413)},
    **_auth(access.OPERATE, inspector=True),
    tags=["inspector"],
    summary="Resume a paused actor",
)
def resume_workflow(request: HttpRequest, actor_id: ActorId, payload: s.PauseIn | None = None) -> Any:
    """Resume a paused actor; what came due meanwhile runs once. ``changed`` False (nothing done) when it
    was not paused. ``{reason?}`` goes into the audit row ``resume`` (who as for pause). 404, 400/422.
    Operation ``operate``."""
    _record(request, actor_id, access.OPERATE)
    reason = payload.reason if payload is not None else None
    who = access.operator_name(request.auth, request)
    changed = repairs.resume(runtime(), actor_id, reason, who=who)
    return _pause_out(actor_id, changed)


@router.post(
    "/actors/{actor_id}/inspector/workflow/retry",
    response={200: s.RetryOut, **_errors(404, 413)},
    **_auth(access.REPLAY, inspector=True),
    tags=["inspector"],
    summary="Retry a suspended workflow",
)
def retry_workflow(request: HttpRequest, actor_id: ActorId, payload: s.RetryIn | None = None) -> Any:
    """Retry a run a code error suspended (DESIGN.md section 16), after the fix is deployed: it goes on from
    where it stopped; completed steps are not run again. ``{reason?}`` (unknown fields: 422) goes into the
    audit row ``retry`` (who: the user name, or ``"token"``). ``changed`` False, nothing written, when the
    run is not suspended. 404 for an unknown actor. Operation ``replay`` (like recover: the run goes on)."""
    _record(request, actor_id, access.REPLAY)
    reason = payload.reason if payload is not None else None
    who = access.operator_name(request.auth, request)
    changed = retrying.retry(runtime(), actor_id, reason, who=who)
    record = runtime().store.get_actor(actor_id)
    return {"actorId": actor_id, "changed": changed, "workflowState": record.workflow_state}


def _pause_out(actor_id: str, changed: bool) -> dict[str, Any]:
    record = runtime().store.get_actor(actor_id)
    return {
        "actorId": actor_id,
        "changed": changed,
        "workflowState": record.workflow_state,
        "pauseReason": record.pause_reason,
    }


@router.get(
    "/actors/{actor_id}/inspector/audit",
    response={200: s.AuditOut, **_errors(404)},
    **_auth(access.INSPECT, inspector=True),
    tags=["inspector"],
    summary="Operator actions on the actor",
)
def operator_audit(request: HttpRequest, actor_id: ActorId) -> Any:
    """``{items: [{action, who, reason, at, archived_entries}]}``, newest first: every replay, recover,
    cancel, pause and resume done on the actor (DESIGN.md section 12), with the history entries each
    deleted or reset as they were. Operation ``inspect``."""
    _record(request, actor_id, access.INSPECT)
    return audit.history_of(runtime(), actor_id)
