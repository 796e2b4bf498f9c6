"""Authentication of the HTTP API (DESIGN.md section 6): who the caller is. What a caller may then do is
``rivet_workflows.access`` (the manual's authorization table): every endpoint's auth is bound to the
endpoint's operation and applies the role rule before the request body is read or an actor looked up;
the endpoint asks ``access.check_actor`` (the ``AUTHORIZE`` hook) once it knows the actor."""

from __future__ import annotations

from typing import Any

from django.http import HttpRequest
from django.utils.module_loading import import_string
from ninja.errors import AuthenticationError, HttpError
from ninja.security import HttpBearer
from ninja.utils import check_csrf

from .. import access
from ..conf import rivet_settings

_SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS", "TRACE"})


def _bearer(request: HttpRequest) -> str | None:
    """The token of an ``Authorization: Bearer <token>`` header; "" for another scheme; None without header."""
    return access.bearer(request.headers)


def _session_user(request: HttpRequest) -> Any:
    """The authenticated Django user of the request, after a CSRF check for unsafe methods; None if anonymous."""
    user = getattr(request, "user", None)
    if user is None or not user.is_authenticated:
        return None
    if request.method not in _SAFE_METHODS and check_csrf(request) is not None:
        raise HttpError(403, "CSRF check failed")
    return user


def _token(token: str) -> Any:
    principal = access.token_principal(token)
    if principal is None:
        raise AuthenticationError(401, "invalid token")
    return principal


def default_api_auth(request: HttpRequest) -> Any:
    """Default authentication of the actor, action and queue endpoints (the ``API_AUTH`` default).

    ``Authorization: Bearer <token>``: the API token (principal ``access.API_TOKEN``) or the inspector
    token (``access.INSPECTOR_TOKEN``), compared in constant time; with no token configured there is no
    token access, and any other bearer token is a 401. Without a bearer header: the logged-in Django user
    (session; CSRF is checked for unsafe methods). Returns the principal, or None (-> 401)."""
    token = _bearer(request)
    if token is not None:
        return _token(token)
    return _session_user(request)


def dev_mode_api_auth(request: HttpRequest) -> Any:
    """An ``API_AUTH`` for development: while ``DEV_MODE`` is on, every request without a bearer token is
    let in as ``access.DEV_MODE`` (anonymous or logged in, any permission), like the inspector endpoints;
    with ``DEV_MODE`` off it is exactly ``default_api_auth``. A bearer token is always checked, so a wrong
    token is a 401 even in dev mode. The ``AUTHORIZE`` hook is asked in dev mode too. Opt in with
    ``RIVET_WORKFLOWS["API_AUTH"] = "rivet_workflows.api.auth.dev_mode_api_auth"`` (the example project
    does); it is never open outside dev mode, and DEV_MODE defaults to DEBUG.
    """
    if rivet_settings.get().DEV_MODE and _bearer(request) is None:
        return access.DEV_MODE
    return default_api_auth(request)


def inspector_auth(request: HttpRequest) -> Any:
    """Authentication of the inspector endpoints (history, audit, replay, recover, pause, resume): open
    (``access.DEV_MODE``) while ``DEV_MODE`` is on; otherwise a bearer token as ``default_api_auth``
    (the API token is recognised, then refused by the role rule: 403), else the session user."""
    if rivet_settings.get().DEV_MODE:
        return access.DEV_MODE
    return default_api_auth(request)


class ApiAuth(HttpBearer):
    """The authentication of an endpoint bound to its ``operation`` (``access.OPERATIONS``): identifies
    the caller (the actor API: ``RIVET_WORKFLOWS["API_AUTH"]``, a dotted path to ``auth(request) ->
    principal | None``, default ``default_api_auth``, read on every request so ``override_settings``
    takes effect at once; ``inspector=True``: ``inspector_auth``), then applies the role rule
    (``access.check``: 401 without a caller, 403 for a caller the rule refuses)."""

    def __init__(self, operation: str, *, inspector: bool = False) -> None:
        super().__init__()
        if operation not in access.OPERATIONS:
            raise ValueError(f"unknown operation {operation!r}")
        self.operation = operation
        self.inspector = inspector

    def __call__(self, request: HttpRequest) -> Any:
        if self.inspector:
            principal = inspector_auth(request)
        else:
            path = rivet_settings.API_AUTH
            principal = (import_string(path) if path else default_api_auth)(request)
        if principal:
            access.check(request, principal, self.operation)
        return principal

    def authenticate(self, request: HttpRequest, token: str) -> Any:  # pragma: no cover - __call__ decides
        """Unused: ``__call__`` dispatches to the configured auth."""
        return default_api_auth(request)


def principal_of(request: HttpRequest) -> Any:
    """The caller ``ApiAuth`` identified (``request.auth``)."""
    return getattr(request, "auth", None)
