"""The workflow state every tool shows and filters on: ``manage.py rivet list``, ``GET /actors``, the admin's
actor list and dashboard (one rule, the one ``rivet show`` and ``ActorRecord.workflow_state`` follow).

The state shown is, in this order: ``no_workflow`` for an actor whose type has no run function (never
stored), ``paused`` for an actor an operator paused (``paused_at`` set, ``ports.PAUSED``) that is neither
finished nor suspended, else the stored ``workflow_state`` (``suspended``: a code error stopped the run,
DESIGN.md section 16). A filter on a state matches exactly the actors that show it: ``sleeping`` does not
include a paused actor that sleeps underneath, and a finished or suspended actor shows that state even if it
was paused too.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from django.db.models import Count, Q

from .engine.model import ports
from .engine.operate import inspector

#: every state an actor can show, in the order the tools list them
SHOWN_STATES = (
    ports.PENDING,
    ports.RUNNING,
    ports.SLEEPING,
    ports.ROLLING_BACK,
    ports.PAUSED,
    ports.SUSPENDED,
    ports.COMPLETED,
    ports.FAILED,
    ports.CANCELLED,
    inspector.NO_WORKFLOW,
)


def paused_q() -> Q:
    """The actors that show ``paused``: paused (``paused_at`` set), neither finished nor suspended."""
    return Q(paused_at__isnull=False) & ~Q(workflow_state__in=sorted(ports.HALTED_STATES))


def shown(name: str, workflow_state: str, paused_at: Any, run_less: Iterable[str]) -> str:
    """The state an actor row shows (module docstring); ``run_less``: the types without a run function
    (``inspector.run_less_types``)."""
    if name in run_less:
        return inspector.NO_WORKFLOW
    if paused_at is not None and workflow_state not in ports.HALTED_STATES:
        return ports.PAUSED
    return workflow_state


def filter_state(rows: Any, state: str, run_less: Iterable[str]) -> Any:
    """``rows`` (an ``Actor`` queryset) narrowed to the actors that show ``state`` (one of
    ``SHOWN_STATES``; ``ValueError`` otherwise)."""
    if state not in SHOWN_STATES:
        raise ValueError(f"unknown state {state!r}; one of: {', '.join(SHOWN_STATES)}")
    run_less = sorted(run_less)
    if state == inspector.NO_WORKFLOW:
        return rows.filter(name__in=run_less)
    rows = rows.exclude(name__in=run_less)
    if state == ports.PAUSED:
        return rows.filter(paused_q())
    rows = rows.filter(workflow_state=state)
    return rows if state in ports.HALTED_STATES else rows.filter(paused_at__isnull=True)


def count(rows: Any, run_less: Iterable[str]) -> dict[tuple[str, str], int]:
    """How many of ``rows`` (an ``Actor`` queryset) show each state, by ``(type, shown state)``, in one
    grouped query."""
    run_less = set(run_less)
    counts: dict[tuple[str, str], int] = {}
    paused = Q(paused_at__isnull=False)  # counted per (type, stored state): not grouped on the time
    grouped = (
        rows.values_list("name", "workflow_state")
        .annotate(n=Count("pk"), n_paused=Count("pk", filter=paused))
        .order_by()
    )
    for name, workflow_state, n, n_paused in grouped:
        if name in run_less:
            parts = [(inspector.NO_WORKFLOW, n)]
        elif workflow_state in ports.HALTED_STATES:
            parts = [(workflow_state, n)]
        else:
            parts = [(workflow_state, n - n_paused), (ports.PAUSED, n_paused)]
        for state, k in parts:
            if k:
                counts[(name, state)] = counts.get((name, state), 0) + k
    return counts
