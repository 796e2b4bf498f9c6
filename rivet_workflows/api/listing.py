"""What ``GET /actors`` and ``POST /actors/bulk/{action}`` share (DESIGN.md section 19): the filter of a
request (its attribute parameters, the shown state, what the ``AUTHORIZE`` hook lets the caller see) and
the summary of each listed actor."""

from __future__ import annotations

import dataclasses
from typing import Any

from django.http import HttpRequest

from .. import access, models, sharding
from ..conf import rivet_settings
from ..engine.model import ports
from ..engine.model.attributes import parse_pairs
from ..engine.operate import inspector, search
from .auth import principal_of


def summary(record: Any, run_less: frozenset[str]) -> dict:
    """One item of a ``GET /actors`` page (``schemas.ActorSummary``) from an ``ActorRecord``: the state
    it shows is ``no_workflow`` for a type in ``run_less`` (no run function)."""
    return {
        "actor_id": record.actor_id,
        "name": record.name,
        "key": list(record.key or []),
        "workflow_state": inspector.NO_WORKFLOW if record.name in run_less else record.workflow_state,
        "wake_at": record.wake_at,
        "waiting_for": list(record.waiting_for or []),
        "created_at": record.created_at,
        "updated_at": record.updated_at,
        "attributes": dict(record.attributes or {}),
    }


def attribute_params(request: HttpRequest) -> dict[str, Any] | None:
    """The ``attr.KEY=VALUE`` query parameters as an attribute filter (``attributes.parse_value``)."""
    pairs = [f"{k[5:]}={v}" for k, v in request.GET.items() if k.startswith("attr.")]
    return parse_pairs(pairs) if pairs else None


def listing_filter(
    request: HttpRequest,
    name: str | None,
    state: str | None,
    attributes: dict[str, Any] | None,
    times: dict[str, Any],
    run_less: frozenset[str],
    operation: str = access.LIST,
) -> ports.ActorFilter:
    """The ``ActorFilter`` of a listing or bulk request: the shown ``state`` (``no_workflow``: the types
    without a run function), and with an ``AUTHORIZE`` hook only the types it lets this caller do
    ``operation`` to (a ``name`` it refuses is a 403; for a bulk action, ``replay``, refusing every type
    is a 403 too)."""
    names: tuple[str, ...] | None = None
    if state == inspector.NO_WORKFLOW:
        names, state = tuple(sorted(run_less)), None
    if rivet_settings.AUTHORIZE:
        if name:
            access.check(request, principal_of(request), operation, name)
        else:
            known = set(
                sharding.each(
                    lambda alias: (
                        models.Actor.objects.using(alias)
                        .filter(destroyed=False)
                        .values_list("name", flat=True)
                        .distinct()
                    )
                )
            )
            allowed = {n for n in known if access.hook_allows(request, n, operation, None)}
            if operation != access.LIST and known and not allowed:
                raise access.ForbiddenError(
                    f"not authorized to {operation} any actor type", operation=operation
                )
            names = tuple(sorted(allowed if names is None else allowed & set(names)))
    query = search.make_filter(name, state, attributes, **times)
    return dataclasses.replace(
        query, names=names, exclude_names=tuple(sorted(run_less)) if state is not None else ()
    )
