"""Error bodies of the HTTP API: every error is JSON ``{group, code, message, metadata}`` (DESIGN.md 6)."""

from __future__ import annotations

import functools
import json
import logging
from collections.abc import Callable
from typing import Any

from django.core.exceptions import RequestDataTooBig
from django.db import InterfaceError, OperationalError
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseNotAllowed
from django.urls import NoReverseMatch, URLPattern, re_path, reverse
from django.views.decorators.csrf import csrf_exempt
from ninja import NinjaAPI
from ninja.errors import AuthenticationError, AuthorizationError, HttpError, ValidationError

from .. import display, inputs
from ..engine import errors

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


def json_method_not_allowed(api: NinjaAPI, view: Callable[..., Any]) -> Callable[..., Any]:
    """Wrap the view ``view`` so its plain-text 405 becomes the JSON error body (code ``method_not_allowed``,
    ``metadata.allowed``: the methods the path serves; the ``Allow`` header is kept)."""

    @functools.wraps(view)
    def wrapper(request: HttpRequest, *args: Any, **kwargs: Any) -> Any:
        response = view(request, *args, **kwargs)
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

    wrapper._rivet_405 = True  # type: ignore[attr-defined]
    return wrapper


def reject_bad_input(api: NinjaAPI, view: Callable[..., Any]) -> Callable[..., Any]:
    """Wrap the endpoint view ``view`` so a request carrying text no database can store
    (``inputs.find_bad_input``: a NUL character or a lone surrogate) is answered before any query runs
    (manual: HTTP API, errors): in a path segment or query parameter a 422 ``validation_error`` whose
    ``metadata.errors`` has one ``{type: "invalid_text", loc: [place, name], msg}`` (what the schema's
    ``pattern`` promises), in the session cookie a 400 ``invalid_input`` (``metadata.where``)."""

    @functools.wraps(view)
    def wrapper(request: HttpRequest, *args: Any, **kwargs: Any) -> Any:
        bad = inputs.find_bad_input(request, kwargs)
        if bad is None:
            return view(request, *args, **kwargs)
        if bad.loc[0] == "cookie":
            return respond(api, request, 400, bad.error_body())
        problem = {"type": "invalid_text", "loc": list(bad.loc), "msg": bad.message}
        body = error_body("request", "validation_error", "the request is not valid", {"errors": [problem]})
        return respond(api, request, 422, body)

    return wrapper


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


def install(api: NinjaAPI) -> None:
    """Register the exception handlers of ``api`` so no error leaves as anything but the JSON error body."""

    def rivet_error(request: HttpRequest, exc: errors.RivetWorkflowsError) -> HttpResponse:
        body = error_body(exc.group, exc.code, exc.message, exc.metadata)
        response = respond(api, request, exc.http_status, body)
        if isinstance(exc, errors.StoreUnavailableError):
            response["Retry-After"] = str(exc.retry_after)
        return response

    def database_down(request: HttpRequest, exc: Exception) -> HttpResponse:
        # a query of an endpoint's own (a list, a count) found the database unreachable: as a store call would
        logger.warning("database unavailable in %s %s: %s", request.method, request.path, exc)
        unavailable = errors.StoreUnavailableError(
            f"the database is unavailable: {type(exc).__name__}: {str(exc).strip()}; try again shortly"
        )
        return rivet_error(request, unavailable)

    def validation(request: HttpRequest, exc: ValidationError) -> HttpResponse:
        problems = [
            {k: v for k, v in e.items() if k in ("type", "loc", "msg")} if isinstance(e, dict) else e
            for e in exc.errors
        ]
        body = error_body("request", "validation_error", "the request is not valid", {"errors": problems})
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
        logger.exception("unhandled error in %s %s", request.method, request.path)
        body = error_body("internal", "internal_error", "internal server error")
        return respond(api, request, 500, body)

    api.add_exception_handler(Exception, internal)
    api.add_exception_handler(OperationalError, database_down)
    api.add_exception_handler(InterfaceError, database_down)
    api.add_exception_handler(RequestDataTooBig, too_big)
    api.add_exception_handler(Http404, not_found)
    api.add_exception_handler(HttpError, http_error)
    api.add_exception_handler(ValidationError, validation)
    api.add_exception_handler(errors.RivetWorkflowsError, rivet_error)
