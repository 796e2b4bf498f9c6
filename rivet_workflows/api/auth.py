"""Authorization of the HTTP API (DESIGN.md section 6): inspector token/staff, and the configurable API auth."""

from __future__ import annotations

import hmac
from typing import Any

from django.http import HttpRequest
from django.utils.module_loading import import_string
from ninja.errors import AuthenticationError, AuthorizationError, HttpError
from ninja.security import HttpBearer
from ninja.utils import check_csrf

from ..conf import rivet_settings

#: permission of the replay/recover actions (models.Actor Meta.permissions)
REPLAY_PERMISSION = "rivet_workflows.replay_workflow"
#: permission needed to read an actor's history as staff
VIEW_PERMISSION = "rivet_workflows.view_actor"

_SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS", "TRACE"})


def _bearer(request: HttpRequest) -> str | None:
    """The token of an ``Authorization: Bearer <token>`` header; "" for another scheme; None without header."""
    value = request.headers.get("Authorization")
    if not value:
        return None
    scheme, _, token = value.partition(" ")
    return token.strip() if scheme.lower() == "bearer" else ""


def token_matches(given: str | None, expected: str | None) -> bool:
    """Constant-time comparison; False when no token is configured (no token access at all). Any text
    compares, a lone surrogate included (it simply does not match): never an exception."""
    if not expected or not given:
        return False
    return hmac.compare_digest(
        given.encode("utf-8", "surrogatepass"), expected.encode("utf-8", "surrogatepass")
    )


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
            return "dev-mode"
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
            return "inspector-token"
        raise AuthenticationError(401, "invalid inspector token")


def default_api_auth(request: HttpRequest) -> Any:
    """Default auth of the actor, action and queue endpoints: ``Authorization: Bearer <API_TOKEN>``
    (constant-time; no API_TOKEN = no token access) or an authenticated Django user (session; CSRF is
    checked for unsafe methods). Returns a truthy principal, None (-> 401), or raises 401 on a wrong token."""
    token = _bearer(request)
    if token is not None:
        if token_matches(token, rivet_settings.API_TOKEN):
            return "api-token"
        raise AuthenticationError(401, "invalid API token")
    return _session_user(request)


def dev_mode_api_auth(request: HttpRequest) -> Any:
    """An ``API_AUTH`` for development: while ``DEV_MODE`` is on, anonymous requests are allowed (principal
    ``"dev-mode"``), like the inspector endpoints; with ``DEV_MODE`` off it is exactly ``default_api_auth``
    (API_TOKEN bearer or an authenticated user). A bearer token is always checked, so a wrong token is a
    401 even in dev mode. Opt in with ``RIVET_WORKFLOWS["API_AUTH"] =
    "rivet_workflows.api.auth.dev_mode_api_auth"`` (the example project does); never open outside dev mode.
    """
    if rivet_settings.get().DEV_MODE and _bearer(request) is None:
        user = _session_user(request)
        return user if user is not None else "dev-mode"
    return default_api_auth(request)


class ApiAuth(HttpBearer):
    """The configurable auth of the actor, action and queue endpoints: ``RIVET_WORKFLOWS["API_AUTH"]`` (a
    dotted path to ``auth(request) -> principal | None``) or ``default_api_auth``. Read on every request,
    so ``override_settings`` takes effect at once."""

    def __call__(self, request: HttpRequest) -> Any:
        path = rivet_settings.API_AUTH
        auth = import_string(path) if path else default_api_auth
        return auth(request)

    def authenticate(self, request: HttpRequest, token: str) -> Any:  # pragma: no cover - __call__ decides
        """Unused: ``__call__`` dispatches to the configured auth."""
        return default_api_auth(request)
