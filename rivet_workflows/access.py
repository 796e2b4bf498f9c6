"""Who may do what to which actor: the authorization rule shared by the HTTP API and the WebSocket (DESIGN.md 6).

Closed by default (manual: Control access). A caller is first identified (a *principal*): the API token, the
inspector token, a logged-in Django user, ``"dev-mode"`` (only while ``DEV_MODE`` is on and only where the
manual says so), or whatever a project's ``API_AUTH`` returns. Then:

* the **role rule** (``role_allows``): the API token may do every operation; the inspector token may
  ``read`` and ``list``; a Django user needs the permission ``rivet_workflows.use_actor_api`` for every
  operation, except that staff holding the inspector permission ``rivet_workflows.view_actor`` may
  ``read`` and ``list`` (they see the same in the admin); any other principal (a project's ``API_AUTH``
  accepted it) may do every operation;
* the **project hook** (``hook_allows``): ``RIVET_WORKFLOWS["AUTHORIZE"]``, a dotted path to
  ``authorize(request, actor_name, operation, actor_id) -> bool``, is called for every request the role
  rule let through and may refuse it (falsy -> 403). It only narrows: it cannot let in a caller the role
  rule refused.

Operations (``OPERATIONS``): ``create`` (POST /actors), ``call`` (an action), ``query`` (a query; the role
rule treats it as ``call``), ``send`` (a queue message),
``read`` (GET /actors/{id}, a WebSocket subscription), ``list`` (GET /actors, called once per actor type).
Inputs and error stacks are shown only to callers that may inspect (``may_inspect``): dev mode, the
inspector token, staff with ``view_actor``.

This module is shared by the ``api`` and ``realtime`` adapters and imports neither (no ninja, no Channels).
"""

from __future__ import annotations

import hmac
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from django.contrib.auth.base_user import AbstractBaseUser
from django.utils.datastructures import CaseInsensitiveMapping
from django.utils.module_loading import import_string

from .conf import rivet_settings

#: the permission that lets a Django user use the actor API (create, read, list, call, send)
USE_PERMISSION = "rivet_workflows.use_actor_api"
#: the inspector's read permission (admin pages, workflow history); also lets staff read and list actors
VIEW_PERMISSION = "rivet_workflows.view_actor"
#: permission of the replay/recover actions (models.Actor Meta.permissions)
REPLAY_PERMISSION = "rivet_workflows.replay_workflow"

CREATE, CALL, SEND, READ, LIST, QUERY = "create", "call", "send", "read", "list", "query"
#: every operation the hook is asked about
OPERATIONS = (CREATE, CALL, SEND, READ, LIST, QUERY)
_READ_ONLY = frozenset({READ, LIST})

#: principals: the API token, the inspector token, dev mode (anonymous while DEV_MODE is on)
API_TOKEN = "api-token"
INSPECTOR_TOKEN = "inspector-token"
DEV_MODE = "dev-mode"


def token_matches(given: str | None, expected: str | None) -> bool:
    """Constant-time comparison of a presented token with a configured one; False when either is empty
    (no token configured = no token access at all). Any text compares, a lone surrogate included (it
    simply does not match): never an exception."""
    if not expected or not given:
        return False
    return hmac.compare_digest(
        given.encode("utf-8", "surrogatepass"), expected.encode("utf-8", "surrogatepass")
    )


def token_principal(token: str) -> str | None:
    """``API_TOKEN`` or ``INSPECTOR_TOKEN`` for a presented token equal to the configured one, else None."""
    conf = rivet_settings.get()
    if token_matches(token, conf.API_TOKEN):
        return API_TOKEN
    if token_matches(token, conf.INSPECTOR_TOKEN):
        return INSPECTOR_TOKEN
    return None


def bearer(headers: Mapping[str, str]) -> str | None:
    """The token of an ``Authorization: Bearer <token>`` header; "" for another scheme; None without one.

    ``headers``: a case-insensitive mapping such as ``request.headers``."""
    value = headers.get("Authorization")
    if not value:
        return None
    scheme, _, token = value.partition(" ")
    return token.strip() if scheme.lower() == "bearer" else ""


def operator_name(principal: Any, request: Any = None) -> str:
    """``who`` of an operator action's audit row (DESIGN.md section 12): a user's user name, ``"token"``
    for a bearer token; in dev mode the logged-in user's name when there is one, else ``"dev-mode"``."""
    user = _user(principal)
    if user is None and request is not None:
        session_user = getattr(request, "user", None)
        if principal == DEV_MODE and session_user is not None and session_user.is_authenticated:
            user = session_user
    if user is not None:
        return user.get_username() or f"user {user.pk}"
    if principal in (INSPECTOR_TOKEN, API_TOKEN):
        return "token"
    return "dev-mode" if principal == DEV_MODE else str(principal)


def _user(principal: Any) -> Any:
    return principal if isinstance(principal, AbstractBaseUser) else None


def _has_perm(user: Any, permission: str) -> bool:
    has_perm = getattr(user, "has_perm", None)  # a custom user model without PermissionsMixin has none
    return bool(user.is_active and has_perm is not None and has_perm(permission))


def is_inspector_user(user: Any) -> bool:
    """An active staff user holding ``view_actor`` (the inspector permission)."""
    return bool(user is not None and user.is_active and user.is_staff and _has_perm(user, VIEW_PERMISSION))


def role_allows(principal: Any, operation: str) -> bool:
    """The role rule (module docstring): may ``principal`` do ``operation`` (one of OPERATIONS) at all?"""
    if operation not in OPERATIONS:
        raise ValueError(f"unknown operation {operation!r}; expected one of {', '.join(OPERATIONS)}")
    if not principal:
        return False
    user = _user(principal)
    if user is not None:
        if _has_perm(user, USE_PERMISSION):
            return True
        return operation in _READ_ONLY and is_inspector_user(user)
    if principal == INSPECTOR_TOKEN:
        return operation in _READ_ONLY
    return True  # the API token, dev mode, or a principal a project's API_AUTH accepted


def hook_allows(request: Any, actor_name: str | None, operation: str, actor_id: str | None) -> bool:
    """Ask the project hook ``RIVET_WORKFLOWS["AUTHORIZE"]`` (True when none is configured).

    ``request``: the Django ``HttpRequest`` (``request.auth`` is the principal, ``request.user`` the
    session user) or, for a WebSocket, a ``ConnectionRequest``. ``actor_name``: the actor type (for
    ``list`` each type in turn); ``actor_id``: None for ``create`` and ``list``. Exceptions of the hook
    propagate (a bug in the hook is not a refusal to hide)."""
    path = rivet_settings.get().AUTHORIZE
    if not path:
        return True
    return bool(import_string(path)(request, actor_name, operation, actor_id))


def may_inspect(principal: Any) -> bool:
    """May this caller see inputs and error stacks? Dev mode, the inspector token, or an inspector user."""
    if rivet_settings.get().DEV_MODE or principal == INSPECTOR_TOKEN:
        return True
    return is_inspector_user(_user(principal))


@dataclass
class ConnectionRequest:
    """What ``authorize()`` receives for a WebSocket connection instead of an ``HttpRequest``.

    ``auth``: the principal (as ``request.auth`` over HTTP); ``user``: the session user of
    ``AuthMiddlewareStack`` (or ``AnonymousUser``/None); ``headers``: the request headers, looked up
    case-insensitively like ``HttpRequest.headers``; ``scope``: the ASGI scope; ``method`` is
    ``"WEBSOCKET"``."""

    scope: dict
    auth: Any
    user: Any
    path: str = ""
    method: str = "WEBSOCKET"
    headers: Mapping[str, str] = field(default_factory=dict)

    @classmethod
    def from_scope(cls, scope: dict, auth: Any) -> ConnectionRequest:
        """Build one from an ASGI ``scope`` and the principal ``auth``."""
        headers = CaseInsensitiveMapping(
            {k.decode("latin-1"): v.decode("latin-1") for k, v in scope.get("headers") or []}
        )
        return cls(
            scope=scope, auth=auth, user=scope.get("user"), path=scope.get("path", ""), headers=headers
        )
