"""The actors list's filters: the state each actor shows, the code version a run waits for, and search
attributes (DESIGN.md sections 12 and 19)."""

from __future__ import annotations

import json
from collections import Counter
from typing import Any

from django.contrib import admin
from django.db.models import Q
from django.http import HttpRequest

from .. import models, sharding, states
from ..engine.model import errors
from ..engine.model.attributes import parse_pairs
from ..engine.operate import inspector
from .trace import runtime as _runtime


class WorkflowStateFilter(admin.SimpleListFilter):
    """The "workflow state" filter: each state an actor shows (``states.shown``, the badge's rule): the
    stored states, "paused" for a paused unfinished actor (not counted in its stored state), and "no
    workflow" for actors whose type has no run function (stored as ``pending``, but with no workflow to
    wait on: listed apart, not as pending)."""

    title = "workflow state"
    parameter_name = "workflow_state__exact"  # the parameter Django's own field filter used

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
        counts = sharding.each(  # no_workflow: always listed
            lambda alias: states.count(models.Actor.objects.using(alias).filter(destroyed=False), ()),
            on_down=sharding.note_down(request),
        )
        shown = sorted({state for _, state in counts})
        return [(s, s.replace("_", " ")) for s in shown] + [(inspector.NO_WORKFLOW, "no workflow")]

    def queryset(self, request: HttpRequest, queryset: Any) -> Any:
        value = self.value()
        if not value:
            return queryset
        if value not in states.SHOWN_STATES:
            return queryset.none()
        return states.filter_state(queryset, value, inspector.run_less_types(_runtime().registry))


class AwaitingCodeVersionFilter(admin.SimpleListFilter):
    """The "waiting for code version" filter: runs a worker of another code version left unchanged during a
    rolling deploy, by the version they wait for (DESIGN.md section 12)."""

    title = "waiting for code version"
    parameter_name = "awaiting_code_version"

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
        versions = sharding.each(
            lambda alias: (
                models.Actor.objects.using(alias)
                .filter(awaiting_code_version__isnull=False, destroyed=False)
                .order_by()
                .values_list("awaiting_code_version", flat=True)
                .distinct()
            ),
            on_down=sharding.note_down(request),
        )
        return [("*", "any")] + [(v, v) for v in sorted(set(versions))]

    def queryset(self, request: HttpRequest, queryset: Any) -> Any:
        value = self.value()
        if not value:
            return queryset
        if value == "*":
            return queryset.filter(awaiting_code_version__isnull=False)
        return queryset.filter(awaiting_code_version=value)


def attribute_q(pairs: dict[str, Any]) -> Q:
    """Actors whose search attribute ``key`` equals ``value`` for each pair (JSON key lookups: portable;
    the API and the commands go through the store, whose PostgreSQL query uses the GIN index)."""
    q = Q()
    for key, value in pairs.items():
        q &= Q(**{f"attributes__{key}": value})
    return q


class AttributeFilter(admin.SimpleListFilter):
    """The "search attribute" filter (DESIGN.md section 19): the most common ``key=value`` pairs of the
    most recently created actors; any other pair works as ``?attr=key=value`` or in the search box."""

    title = "search attribute"
    parameter_name = "attr"
    #: how many recent actors the choices are read from, and how many choices are shown
    SAMPLE = 500
    CHOICES = 15

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
        recent = sharding.each(
            lambda alias: (
                models.Actor.objects.using(alias)
                .filter(destroyed=False)
                .order_by("-created_at")
                .values_list("attributes", flat=True)[: self.SAMPLE]
            ),
            on_down=sharding.note_down(request),
        )
        counts: Counter[str] = Counter()
        for attributes in recent:
            for key, value in (attributes or {}).items():
                counts[f"{key}={json.dumps(value) if not isinstance(value, str) else value}"] += 1
        return [(pair, pair) for pair, _ in counts.most_common(self.CHOICES)]

    def queryset(self, request: HttpRequest, queryset: Any) -> Any:
        value = self.value()
        if not value:
            return queryset
        try:
            return queryset.filter(attribute_q(parse_pairs([value])))
        except errors.RivetWorkflowsError:
            return queryset.none()


class ShardFilter(admin.SimpleListFilter):
    """The "shard" filter (DESIGN.md section 21), shown only when ``RIVET_WORKFLOWS["SHARDS"]`` names several
    databases: the list shows the actors of one shard at a time (its queryset ``.using(alias)``), the first
    shard until another is chosen."""

    title = "shard"
    parameter_name = "shard"

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
        return [(alias, alias) for alias in sharding.aliases()] if sharding.sharded() else []

    def has_output(self) -> bool:
        return sharding.sharded()

    @classmethod
    def alias_of(cls, request: HttpRequest) -> str:
        """The alias the request's list shows: the one chosen, else the first shard (an unknown value too)."""
        value = request.GET.get(cls.parameter_name)
        return value if value in sharding.aliases() else sharding.first()

    def chosen(self) -> str:
        """The alias this list shows (``alias_of``)."""
        value = self.value()
        return value if value in sharding.aliases() else sharding.first()

    def choices(self, changelist: Any) -> Any:
        chosen = self.chosen()
        for alias, title in self.lookup_choices:
            yield {
                "selected": alias == chosen,
                "query_string": changelist.get_query_string({self.parameter_name: alias}),
                "display": title,
            }

    def queryset(self, request: HttpRequest, queryset: Any) -> Any:
        return queryset  # ``ActorAdmin.get_queryset`` reads the chosen shard already (``alias_of``)
