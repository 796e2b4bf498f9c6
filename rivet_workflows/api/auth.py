"""Authentication of the HTTP API (DESIGN.md section 6): the inspector token/staff, and the configurable API
auth of the actor endpoints; what a caller may then do is ``rivet_workflows.access`` (``authorize``)."""

from __future__ import annotations

from typing import Any

from django.http import HttpRequest
from django.utils.module_loading import import_string
from ninja.errors import AuthenticationError, AuthorizationError, HttpError
from ninja.security import HttpBearer
from ninja.utils import check_csrf

from .. import access
from ..conf import rivet_settings

#: permission of the replay/recover actions (models.Actor Meta.permissions)
REPLAY_PERMISSION = access.REPLAY_PERMISSION
#: permission needed to read an actor's history as staff
VIEW_PERMISSION = access.VIEW_PERMISSION
#: permission a Django user needs to use the actor API
USE_PERMISSION = access.USE_PERMISSION

_SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS", "TRACE"})

token_matches = access.token_matches


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


class InspectorAuth(HttpBearer):
    """Auth of the inspector endpoints: open in ``DEV_MODE``; otherwise ``Authorization: Bearer
    <INSPECTOR_TOKEN>`` (constant-time compare; no token configured = no token access) or a staff session
    user holding ``permission``. Wrong token -> 401; staff without the permission -> 403."""

    def __init__(self, permission: str = VIEW_PERMISSION) -> None:
        super().__init__()
        self.permission = permission

    def __call__(self, request: HttpRequest) -> Any:
        conf = rivet_settings.get()
        if conf.DEV_MODE:
            return access.DEV_MODE
        token = _bearer(request)
        if token is not None:
            return self.authenticate(request, token)
        user = _session_user(request)
        if user is None:
            return None
        if not (user.is_active and user.is_staff and user.has_perm(self.permission)):
            raise AuthorizationError(403, f"staff permission {self.permission!r} required")
        return user

    def authenticate(self, request: HttpRequest, token: str) -> Any:
        """Accept ``token`` if it equals INSPECTOR_TOKEN; raise 401 otherwise."""
        if token_matches(token, rivet_settings.INSPECTOR_TOKEN):
            return access.INSPECTOR_TOKEN
        raise AuthenticationError(401, "invalid inspector token")


def default_api_auth(request: HttpRequest) -> Any:
    """Default authentication of the actor, action and queue endpoints (the ``API_AUTH`` default).

    ``Authorization: Bearer <token>``: the API token (principal ``access.API_TOKEN``) or the inspector
    token (``access.INSPECTOR_TOKEN``, which may only read and list), compared in constant time; with no
    token configured there is no token access, and any other bearer token is a 401. Without a bearer
    header: the logged-in Django user (session; CSRF is checked for unsafe methods), who then needs the
    ``use_actor_api`` permission (``access.role_allows``). Returns the principal, or None (-> 401)."""
    token = _bearer(request)
    if token is not None:
        principal = access.token_principal(token)
        if principal is None:
            raise AuthenticationError(401, "invalid API token")
        return principal
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


class ApiAuth(HttpBearer):
    """The configurable authentication of the actor, action and queue endpoints: ``RIVET_WORKFLOWS[
    "API_AUTH"]`` (a dotted path to ``auth(request) -> principal | None``) or ``default_api_auth``. Read on
    every request, so ``override_settings`` takes effect at once. Each endpoint then calls ``authorize``
    with its operation."""

    def __call__(self, request: HttpRequest) -> Any:
        path = rivet_settings.API_AUTH
        auth = import_string(path) if path else default_api_auth
        return auth(request)

    def authenticate(self, request: HttpRequest, token: str) -> Any:  # pragma: no cover - __call__ decides
        """Unused: ``__call__`` dispatches to the configured auth."""
        return default_api_auth(request)


def authorize(
    request: HttpRequest, operation: str, actor_name: str | None = None, actor_id: str | None = None
) -> None:
    """Raise 403 unless the caller ``request.auth`` may do ``operation`` (``access.OPERATIONS``).

    With ``actor_name`` None only the role rule is checked (before an actor is looked up, so a caller who
    may not use the API at all cannot tell which actors exist); with it, the project hook ``AUTHORIZE``
    is asked too."""
    principal = getattr(request, "auth", None)
    if actor_name is None:
        if not access.role_allows(principal, operation):
            needed = access.USE_PERMISSION
            raise AuthorizationError(403, f"permission {needed!r} (or the API token) required to {operation}")
        return
    if not access.hook_allows(request, actor_name, operation, actor_id):
        raise AuthorizationError(403, f"not authorized to {operation} actors of type {actor_name!r}")


def may_inspect(request: HttpRequest) -> bool:
    """May the caller see inputs and error stacks (``access.may_inspect`` of ``request.auth``)?"""
    return access.may_inspect(getattr(request, "auth", None))
