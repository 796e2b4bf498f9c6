"""Who may do what to which actor: the one authorization rule of the HTTP API, the admin and the WebSocket
(DESIGN.md 6; the manual's authorization table is this module written out).

Closed by default. A caller is first identified (a *principal*): the API token, the inspector token, a
logged-in Django user, ``"dev-mode"`` (only while ``DEV_MODE`` is on and only where the manual says so),
or whatever a project's ``API_AUTH`` returns. Then, for an operation on an actor:

* the **role rule** (``allowed_operations``): the API token (and any principal a project's ``API_AUTH``
  returns) may use the actor API (``ACTOR_API``: list, read, create, call, query, send); the inspector
  token may see (``INSPECTION``: list, read, inspect) and operate (``OPERATOR``: replay, operate); a
  Django user holding ``use_actor_api`` may use the actor API, an active staff user holding ``view_actor``
  may see, and one holding ``view_actor`` and ``replay_workflow`` may also operate: operating an actor
  requires seeing it, so ``replay_workflow`` alone gives nothing; whoever may use the actor API or operate
  may also manage schedules (``SCHEDULE``); dev mode may do everything;
* the **project hook** (``hook_allows``): ``RIVET_WORKFLOWS["AUTHORIZE"]``, a dotted path to
  ``authorize(request, actor_name, operation, actor_id) -> bool``, is asked for every operation on an
  actor the role rule let through and may refuse it (falsy -> 403 / close code 4403). It only narrows.

``check`` and ``check_actor`` apply both in that order (the role rule before the actor is looked up, so a
refused caller cannot tell which actors exist) and raise ``NotAuthenticatedError`` (401, close code 4401)
or ``ForbiddenError`` (403, close code 4403); the ``api``, ``admin`` and ``realtime`` adapters call them
and translate. Inputs and error stacks are shown only to callers that may ``inspect`` (``may_inspect``).

This module imports neither ninja nor Channels.
"""

from __future__ import annotations

import hmac
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar

from django.contrib.auth.base_user import AbstractBaseUser
from django.utils.datastructures import CaseInsensitiveMapping
from django.utils.module_loading import import_string

from .conf import rivet_settings
from .engine.model import errors

#: the permission that lets a Django user use the actor API (create, read, list, call, query, send)
USE_PERMISSION = "rivet_workflows.use_actor_api"
#: the inspector's permission (admin pages, workflow history, audit); also lets staff read and list actors
VIEW_PERMISSION = "rivet_workflows.view_actor"
#: the operators' permission (replay, recover, pause, resume, cancel); only together with VIEW_PERMISSION
REPLAY_PERMISSION = "rivet_workflows.replay_workflow"

LIST, READ, CREATE, CALL, QUERY, SEND = "list", "read", "create", "call", "query", "send"
#: the history, the audit trail, the admin trace page; also what lets a caller see inputs and error stacks
INSPECT = "inspect"
#: replay (from a step, or all) and recover: they delete or reset history entries
REPLAY = "replay"
#: pause, resume and cancel
OPERATE = "operate"
#: create, pause, resume, trigger, backfill and delete schedules stored as data (DESIGN.md section 20);
#: listing and reading them are ``list`` and ``read``
SCHEDULE = "schedule"
#: every operation, in the order of the manual's table (docs/howto/authorization.md)
OPERATIONS = (LIST, READ, CREATE, CALL, QUERY, SEND, INSPECT, REPLAY, OPERATE, SCHEDULE)
#: the operations of the actor API
ACTOR_API = frozenset({LIST, READ, CREATE, CALL, QUERY, SEND})
#: seeing an actor: the read-only operations of the inspector
INSPECTION = frozenset({LIST, READ, INSPECT})
#: changing an actor as an operator
OPERATOR = frozenset({REPLAY, OPERATE})
#: managing schedules: given to whoever may use the actor API (a schedule creates actors and calls their
#: actions) and to operators (pausing, triggering and backfilling is operations work)
SCHEDULING = frozenset({SCHEDULE})

#: principals: the API token, the inspector token, dev mode (anonymous while DEV_MODE is on)
API_TOKEN = "api-token"
INSPECTOR_TOKEN = "inspector-token"
DEV_MODE = "dev-mode"


class NotAuthenticatedError(errors.RivetWorkflowsError):
    """No caller: no or a wrong credential (HTTP 401, WebSocket close code 4401)."""

    group = "auth"
    code = "unauthorized"
    http_status = 401


class ForbiddenError(errors.RivetWorkflowsError):
    """The caller may not do this operation, or not to this actor (HTTP 403, WebSocket close code 4403)."""

    group = "auth"
    code = "forbidden"
    http_status = 403


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


def allowed_operations(principal: Any) -> frozenset[str]:
    """The operations the role rule (module docstring) lets ``principal`` do to actors it may see; empty
    for no principal. The manual's authorization table is this function written out."""
    if not principal:
        return frozenset()
    if principal == DEV_MODE:
        return frozenset(OPERATIONS)
    if principal == INSPECTOR_TOKEN:
        return INSPECTION | OPERATOR | SCHEDULING
    user = _user(principal)
    if user is None:  # the API token, or a principal a project's API_AUTH accepted
        return ACTOR_API | SCHEDULING
    allowed: frozenset[str] = ACTOR_API | SCHEDULING if _has_perm(user, USE_PERMISSION) else frozenset()
    if is_inspector_user(user):
        allowed |= INSPECTION
        if _has_perm(user, REPLAY_PERMISSION):  # operating an actor requires seeing it
            allowed |= OPERATOR | SCHEDULING
    return allowed


def role_allows(principal: Any, operation: str) -> bool:
    """The role rule: may ``principal`` do ``operation`` (one of OPERATIONS) at all? ValueError for an
    operation that is not one."""
    if operation not in OPERATIONS:
        raise ValueError(f"unknown operation {operation!r}; expected one of {', '.join(OPERATIONS)}")
    return operation in allowed_operations(principal)


def hook_allows(request: Any, actor_name: str | None, operation: str, actor_id: str | None) -> bool:
    """Ask the project hook ``RIVET_WORKFLOWS["AUTHORIZE"]`` (True when none is configured).

    ``request``: the Django ``HttpRequest`` (``request.auth`` is the principal, ``request.user`` the
    session user; in the admin ``request.auth`` is the user) or, for a WebSocket, a ``ConnectionRequest``.
    ``actor_name``: the actor type (for ``list`` each type in turn); ``actor_id``: None for ``create`` and
    ``list``. Exceptions of the hook propagate (a bug in the hook is not a refusal to hide)."""
    path = rivet_settings.get().AUTHORIZE
    if not path:
        return True
    return bool(import_string(path)(request, actor_name, operation, actor_id))


def _role_refusal(principal: Any, operation: str) -> str:
    """Why the role rule refuses ``operation`` to ``principal``: what it would need."""
    if operation == SCHEDULE:
        needed = (
            f"permission {USE_PERMISSION!r} (or the API token), or staff permissions {VIEW_PERMISSION!r} "
            f"and {REPLAY_PERMISSION!r} (or the inspector token)"
        )
    elif operation in OPERATOR:
        needed = f"staff permissions {VIEW_PERMISSION!r} and {REPLAY_PERMISSION!r} (or the inspector token)"
    elif operation == INSPECT:
        needed = f"staff permission {VIEW_PERMISSION!r} (or the inspector token)"
    elif operation in INSPECTION:
        needed = f"permission {USE_PERMISSION!r} or staff permission {VIEW_PERMISSION!r} (or a token)"
    else:
        needed = f"permission {USE_PERMISSION!r} (or the API token)"
    return f"{needed} required to {operation}"


def check(
    request: Any, principal: Any, operation: str, actor_name: str | None = None, actor_id: str | None = None
) -> None:
    """Raise unless ``principal`` may do ``operation`` (OPERATIONS): ``NotAuthenticatedError`` without a
    principal, ``ForbiddenError`` when the role rule refuses it or, with ``actor_name`` (the actor type;
    ``actor_id`` None for ``create`` and ``list``), when the ``AUTHORIZE`` hook does. ``request`` is what
    the hook receives (``hook_allows``)."""
    if not principal:
        raise NotAuthenticatedError("authentication required")
    if not role_allows(principal, operation):
        raise ForbiddenError(_role_refusal(principal, operation), operation=operation)
    if actor_name is not None and not hook_allows(request, actor_name, operation, actor_id):
        raise ForbiddenError(
            f"not authorized to {operation} actors of type {actor_name!r}", operation=operation
        )


def allows(
    request: Any, principal: Any, operation: str, actor_name: str | None = None, actor_id: str | None = None
) -> bool:
    """``check`` as a boolean (for a button shown or not, a list filtered)."""
    try:
        check(request, principal, operation, actor_name, actor_id)
    except (NotAuthenticatedError, ForbiddenError):
        return False
    return True


Record = TypeVar("Record")


def check_actor(
    request: Any, principal: Any, operation: str, actor_id: str, load: Callable[[str], Record]
) -> Record:
    """The actor ``actor_id`` once ``principal`` may do ``operation`` to it: the role rule first (so a
    refused caller cannot tell which actors exist), then ``load(actor_id)`` (a record with ``.name``;
    it raises ``ActorNotFoundError`` for an unknown actor), then the ``AUTHORIZE`` hook. Raises as
    ``check``."""
    check(request, principal, operation)
    record = load(actor_id)
    check(request, principal, operation, record.name, actor_id)  # type: ignore[attr-defined]
    return record


def may_inspect(
    request: Any, principal: Any, actor_name: str | None = None, actor_id: str | None = None
) -> bool:
    """May this caller see inputs and error stacks (of ``actor_name``/``actor_id``: the hook is asked
    ``inspect``)? Always while DEV_MODE is on."""
    if rivet_settings.get().DEV_MODE:
        return True
    return allows(request, principal, INSPECT, actor_name, actor_id)


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
