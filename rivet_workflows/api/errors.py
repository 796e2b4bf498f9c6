"""Error bodies of the HTTP API: every error is JSON ``{group, code, message, metadata}`` (DESIGN.md 6)."""

from __future__ import annotations

import functools
import json
import logging
import re
import uuid
from collections.abc import Callable
from typing import Any

from asgiref.sync import iscoroutinefunction
from django.core.exceptions import RequestDataTooBig
from django.db import InterfaceError, OperationalError
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseNotAllowed
from django.urls import NoReverseMatch, URLPattern, re_path, reverse
from django.views.decorators.csrf import csrf_exempt
from ninja import NinjaAPI
from ninja.errors import AuthenticationError, AuthorizationError, HttpError, ValidationError

from .. import display, inputs
from ..engine.model import errors

logger = logging.getLogger("rivet_workflows")


class BodyTooLargeError(errors.RivetWorkflowsError):
    """The request body is larger than MAX_BODY_BYTES."""

    group = "request"
    code = "body_too_large"
    http_status = 413


class MalformedBodyError(errors.RivetWorkflowsError):
    """The request body is not valid JSON."""

    group = "request"
    code = "malformed_json"
    http_status = 400


def _jsonable(value: Any) -> Any:
    """``value`` made JSON-safe (unknown objects become their ``str``)."""
    return json.loads(json.dumps(value, default=str))


def error_body(group: str, code: str, message: str, metadata: dict | None = None) -> dict:
    """The error body ``{group, code, message, metadata}``."""
    return {"group": group, "code": code, "message": message, "metadata": _jsonable(metadata or {})}


def respond(api: NinjaAPI, request: HttpRequest, status: int, body: dict) -> HttpResponse:
    """A JSON error response with ``status``."""
    return api.create_response(request, body, status=status)


def _around(
    view: Callable[..., Any],
    before: Callable[[HttpRequest, dict], HttpResponse | None],
    after: Callable[[HttpRequest, Any], Any],
) -> Callable[..., Any]:
    """``view`` wrapped so ``before(request, kwargs)`` may answer instead of it and ``after(request,
    response)`` sees its answer; the wrapper is async when ``view`` is (an async endpoint such as the
    waiting send), so Django awaits it instead of receiving a coroutine."""
    if iscoroutinefunction(view):

        @functools.wraps(view)
        async def async_wrapper(request: HttpRequest, *args: Any, **kwargs: Any) -> Any:
            early = before(request, kwargs)
            if early is not None:
                return early
            return after(request, await view(request, *args, **kwargs))

        return async_wrapper

    @functools.wraps(view)
    def wrapper(request: HttpRequest, *args: Any, **kwargs: Any) -> Any:
        early = before(request, kwargs)
        if early is not None:
            return early
        return after(request, view(request, *args, **kwargs))

    return wrapper


def json_method_not_allowed(api: NinjaAPI, view: Callable[..., Any]) -> Callable[..., Any]:
    """Wrap the view ``view`` so its plain-text 405 becomes the JSON error body (code ``method_not_allowed``,
    ``metadata.allowed``: the methods the path serves; the ``Allow`` header is kept)."""

    def as_json(request: HttpRequest, response: Any) -> Any:
        if isinstance(response, HttpResponseNotAllowed):
            allowed = sorted(m.strip() for m in response.get("Allow", "").split(",") if m.strip())
            body = error_body(
                "request",
                "method_not_allowed",
                f"method {request.method} is not allowed here; allowed: {', '.join(allowed)}",
                {"allowed": allowed},
            )
            json_response = respond(api, request, 405, body)
            json_response["Allow"] = ", ".join(allowed)
            return json_response
        return response

    wrapper = _around(view, lambda request, kwargs: None, as_json)
    wrapper._rivet_405 = True  # type: ignore[attr-defined]
    return wrapper


def reject_bad_input(api: NinjaAPI, view: Callable[..., Any]) -> Callable[..., Any]:
    """Wrap the endpoint view ``view`` so a request carrying text no database can store
    (``inputs.find_bad_input``: a NUL character or a lone surrogate) is answered before any query runs
    (manual: HTTP API, errors): in a path segment or query parameter a 422 ``validation_error`` whose
    ``metadata.errors`` has one ``{type: "invalid_text", loc: [place, name], msg}`` (what the schema's
    ``pattern`` promises), in the session cookie a 400 ``invalid_input`` (``metadata.where``)."""

    def refuse(request: HttpRequest, kwargs: dict) -> HttpResponse | None:
        bad = inputs.find_bad_input(request, kwargs)
        if bad is None:
            return None
        if bad.loc[0] == "cookie":
            return respond(api, request, 400, bad.error_body())
        problem = {"type": "invalid_text", "loc": list(bad.loc), "msg": bad.message}
        body = error_body("request", "validation_error", "the request is not valid", {"errors": [problem]})
        return respond(api, request, 422, body)

    return _around(view, refuse, lambda request, response: response)


#: characters of the request path echoed in a 404 body
_PATH_CHARS = 200


def not_found_view(api: NinjaAPI) -> Callable[..., HttpResponse]:
    """The view of a path under the API's prefix that no endpoint serves (any method): 404 with the JSON
    error body ``{group: "request", code: "not_found", message, metadata: {method, path, docs}}``
    (``docs``: the OpenAPI docs page, when the API has one) instead of Django's HTML page. CSRF-exempt,
    like the endpoints, so an unknown POST is a 404 too, not a CSRF 403."""

    @csrf_exempt
    def unknown_path(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        path = display.shorten(request.path, _PATH_CHARS)
        metadata = {"method": request.method, "path": path}
        message = f"no API endpoint serves {request.method} {path}"
        try:
            metadata["docs"] = reverse(f"{api.urls_namespace}:openapi-view", kwargs=kwargs)
            message += f"; the endpoints are listed at {metadata['docs']}"
        except NoReverseMatch:  # no docs page, or one under path parameters this request lacks
            pass
        return respond(api, request, 404, error_body("request", "not_found", message, metadata))

    unknown_path._rivet_405 = True  # type: ignore[attr-defined]  # it never answers 405
    return unknown_path


def not_found_pattern(api: NinjaAPI) -> URLPattern:
    """A URL pattern matching every path, for the end of the API's URL list: ``not_found_view``."""
    return re_path(r"", not_found_view(api), name="unknown-path")


#: the loc parts pydantic adds for the members of a union or a validator (``str``, ``constrained-int``,
#: ``function-before[...]``): they name its internals, not a place in the request
_INTERNAL_LOC = re.compile(r"^([a-z]+(-[a-z]+)*)(\[.*\])?$")
_LOC_WORDS = frozenset({"body", "query", "path", "header", "cookie", "form", "file"})


def _place(loc: list[Any]) -> list[Any]:
    """``loc`` without pydantic's union-member and validator tags: the place in the request only
    (``["body", "payload", "key", 1]``). A tag is a lower-case word with a hyphen or brackets, or a
    built-in type name; field names of the API's schemas are camelCase or snake_case, never one."""
    kept = []
    for index, part in enumerate(loc):
        if (
            isinstance(part, str)
            and index > 0
            and (
                part in ("str", "int", "float", "bool", "list", "dict", "none", "nullable", "union")
                or ("-" in part or "[" in part)
                and _INTERNAL_LOC.match(part)
            )
        ):
            continue
        kept.append(part)
    return kept


def validation_problems(raw: list[Any]) -> list[dict[str, Any]]:
    """The ``metadata.errors`` of a 422 ``validation_error``: ``{type, loc, msg}`` per problem, in the
    manual's words: ``loc`` is the place in the request (no pydantic union or validator tags), an unknown
    body field is ``{type: "unknown_field", msg: "unknown field 'dryRun'; ..."}``, and the several errors
    pydantic reports for one value of a union type are one."""
    problems: list[dict[str, Any]] = []
    seen: set[tuple] = set()
    for error in raw:
        if not isinstance(error, dict):
            problems.append({"type": "invalid", "loc": [], "msg": str(error)})
            continue
        loc = _place(list(error.get("loc") or []))
        kind, msg = str(error.get("type", "invalid")), str(error.get("msg", "invalid value"))
        if kind == "extra_forbidden":
            kind, msg = "unknown_field", f"unknown field {loc[-1]!r}: this request does not take it"
        place = tuple(str(p) for p in loc)
        if place in seen:  # another member of the same union refused the same value
            continue
        seen.add(place)
        problems.append({"type": kind, "loc": loc, "msg": msg})
    return problems


#: the message of an error body whose detail stays in the server log: by code
GENERIC_MESSAGES = {
    "store_unavailable": "the database is unavailable; try again shortly",
    "store_rejected": "the database refused a value of this request",
    "internal_error": "internal server error",
}
#: a request id a client or proxy may choose (``X-Request-ID``): short, and nothing a log line could break on
_REQUEST_ID = re.compile(r"^[A-Za-z0-9._-]{1,64}$")


def request_id_of(request: HttpRequest) -> str:
    """The id of ``request`` in the server log and in its error body (``metadata.request_id``): the
    ``X-Request-ID`` header a proxy set when it is a plain token, else a new one; the same for the whole
    request."""
    existing = getattr(request, "rivet_request_id", None)
    if existing:
        return existing
    given = request.headers.get("X-Request-ID", "")
    request_id = given if _REQUEST_ID.match(given) else uuid.uuid4().hex
    request.rivet_request_id = request_id  # type: ignore[attr-defined]
    return request_id


def _is_database_error(exc: BaseException) -> bool:
    """A database error (Django's, or a PEP 249 driver's by its module): its text can name hosts, ports
    and SQL."""
    from django.db import Error as DatabaseError

    module = type(exc).__module__.split(".")[0]
    return isinstance(exc, DatabaseError) or module in ("psycopg", "psycopg2", "sqlite3", "MySQLdb")


def raised(request: HttpRequest, exc: BaseException) -> str:
    """``"Name: message"`` of an exception user code raised, for a 400 ``action_failed`` body; for a
    database error only its name and the request id, the text (hosts, ports, SQL) going to the server
    log."""
    if not _is_database_error(exc):
        return f"{type(exc).__name__}: {exc}"
    request_id = request_id_of(request)
    logger.warning(
        "%s %s: user code raised (request id %s): %r", request.method, request.path, request_id, exc
    )
    return f"{type(exc).__name__} (a database error; its text is in the server log, request id {request_id})"


def install(api: NinjaAPI) -> None:
    """Register the exception handlers of ``api`` so no error leaves as anything but the JSON error body."""

    def rivet_error(request: HttpRequest, exc: errors.RivetWorkflowsError) -> HttpResponse:
        if exc.http_status >= 500 or isinstance(exc, errors.StoreRejectedError):
            return server_error(request, exc, exc.http_status, exc.group, exc.code)
        body = error_body(exc.group, exc.code, exc.message, exc.metadata)
        response = respond(api, request, exc.http_status, body)
        retry_after = getattr(exc, "retry_after", None)  # 429 too_many_waiting_sends
        if retry_after is not None:
            response["Retry-After"] = str(retry_after)
        return response

    def server_error(
        request: HttpRequest, exc: BaseException, status: int, group: str, code: str
    ) -> HttpResponse:
        # the database's text names hosts, ports, SQL and the driver: the log has it, the body only says what
        # kind of failure it was and the request id that finds it in the log (docs/reference/http-api.md)
        request_id = request_id_of(request)
        logger.error(
            "%s %s failed with %s (request id %s): %s: %s",
            request.method,
            request.path,
            code,
            request_id,
            type(exc).__name__,
            exc,
            exc_info=status == 500,
        )
        message = GENERIC_MESSAGES.get(code, GENERIC_MESSAGES["internal_error"])
        metadata: dict[str, Any] = {"request_id": request_id}
        shard = getattr(exc, "shard", None) if isinstance(exc, errors.StoreUnavailableError) else None
        if shard:  # which database is down is no secret, and tells the user it is not all of them
            message = f"the database of shard {shard!r} is unavailable; try again shortly"
            metadata["shard"] = shard
        body = error_body(group, code, message, metadata)
        response = respond(api, request, status, body)
        response["X-Request-ID"] = request_id
        if isinstance(exc, errors.StoreUnavailableError):
            response["Retry-After"] = str(exc.retry_after)
        return response

    def database_down(request: HttpRequest, exc: Exception) -> HttpResponse:
        # a query of an endpoint's own (a list, a count) found the database unreachable: as a store call would
        return server_error(
            request, errors.StoreUnavailableError(str(exc)), 503, "server", "store_unavailable"
        )

    def validation(request: HttpRequest, exc: ValidationError) -> HttpResponse:
        problems = validation_problems(exc.errors)
        message = "the request is not valid: " + "; ".join(
            f"{'.'.join(str(p) for p in e['loc'][1:] if p != 'payload') or 'body'}: {e['msg']}"
            for e in problems[:5]
        )
        body = error_body("request", "validation_error", message, {"errors": problems})
        return respond(api, request, 422, body)

    def http_error(request: HttpRequest, exc: HttpError) -> HttpResponse:
        cause = exc.__cause__
        if isinstance(cause, errors.RivetWorkflowsError):  # raised by the body parser
            return rivet_error(request, cause)
        if isinstance(exc, AuthenticationError):
            group, code = "auth", "unauthorized"
            message = str(exc) if str(exc) != "Unauthorized" else "authentication required"
        elif isinstance(exc, AuthorizationError) or exc.status_code == 403:
            group, code, message = "auth", "forbidden", str(exc)
        elif exc.status_code == 400 and cause is not None:
            group, code, message = "request", "malformed_json", "the request body is not valid JSON"
        elif exc.status_code == 429:
            group, code, message = "request", "throttled", str(exc)
        else:
            group, code, message = "request", f"http_{exc.status_code}", str(exc)
        return respond(api, request, exc.status_code, error_body(group, code, message))

    def not_found(request: HttpRequest, exc: Exception) -> HttpResponse:
        return respond(api, request, 404, error_body("request", "not_found", "not found"))

    def too_big(request: HttpRequest, exc: Exception) -> HttpResponse:
        body = error_body("request", "body_too_large", "the request body is too large")
        return respond(api, request, 413, body)

    def internal(request: HttpRequest, exc: Exception) -> HttpResponse:
        return server_error(request, exc, 500, "internal", "internal_error")

    api.add_exception_handler(Exception, internal)
    api.add_exception_handler(OperationalError, database_down)
    api.add_exception_handler(InterfaceError, database_down)
    api.add_exception_handler(RequestDataTooBig, too_big)
    api.add_exception_handler(Http404, not_found)
    api.add_exception_handler(HttpError, http_error)
    api.add_exception_handler(ValidationError, validation)
    api.add_exception_handler(errors.RivetWorkflowsError, rivet_error)
