"""One FilterSet per list: the page, the API (and an export, when there is one) filter a list
the same way because they use the same FilterSet.

A filter value that does not parse is a 400 in the API (DjangoFilterBackend raises) and on a
page (`page_queryset`): the page says which filter it could not read and lists nothing, rather
than a list that looks filtered and is not.
"""

from __future__ import annotations

from typing import Any

import django_filters
from django import forms
from django.contrib import messages
from django.db.models import QuerySet
from django.http import HttpRequest

from pools.common.errors import MetricsUnavailable
from pools.core import figures
from pools.metrics.node_figures import latest_node_metrics
from pools.models import AuditEvent, MoveRequest, Node

ACTIVE = "active"
ALL = "all"  # every state: the move list's last tab, and what its export and the API take
BAD_FILTER_STATUS = 400  # a state filter value: pending, approved or executing


class StrictBooleanFilter(django_filters.ChoiceFilter):
    """true or false, and anything else is refused (django-filter's own ignores "maybe")."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, choices=[("true", "true"), ("false", "false")], **kwargs)

    def filter(self, qs: QuerySet[Any], value: Any) -> QuerySet[Any]:
        if value in ("", None):
            return qs
        return super().filter(qs, value == "true")


class IdFilter(django_filters.NumberFilter):
    """A whole, positive id: 1.5 or -2e269 is refused, not a database overflow."""

    field_class = forms.IntegerField

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, min_value=1, max_value=2**63 - 1, **kwargs)


class NodeFilter(django_filters.FilterSet):
    pool = django_filters.CharFilter(field_name="pool__name")
    unassigned = StrictBooleanFilter(field_name="pool", lookup_expr="isnull")
    gpu_model = django_filters.CharFilter()
    ready = StrictBooleanFilter()
    cordoned = StrictBooleanFilter()
    drifted = StrictBooleanFilter()
    gone = StrictBooleanFilter(field_name="gone_at", lookup_expr="isnull", exclude=True)
    health = django_filters.ChoiceFilter(
        choices=list(figures.HEALTH.items()),
        method="filter_health",
        help_text="From the DCGM metrics: xid, hot, no-metrics, idle-held, healthy.",
    )

    class Meta:
        model = Node
        fields = [
            "pool",
            "unassigned",
            "gpu_model",
            "ready",
            "cordoned",
            "drifted",
            "gone",
            "health",
        ]

    def filter_health(self, queryset: QuerySet[Node], name: str, value: str) -> QuerySet[Node]:
        result, metrics = latest_node_metrics()
        if not result.available:  # "no faulty nodes" and "no metrics" must not look alike
            raise MetricsUnavailable(result.error or "unknown")
        if value == "no-metrics":  # nodes absent from the metrics, not a property of them
            return queryset.exclude(name__in=list(metrics))
        return queryset.filter(
            name__in=[n for n, m in metrics.items() if figures.health_matches(m, value)]
        )


class MoveFilter(django_filters.FilterSet):
    state = django_filters.MultipleChoiceFilter(
        choices=[
            *MoveRequest.State.choices,
            (ACTIVE, "active: pending, approved or executing"),
            (ALL, "all: every state"),
        ],
        method="filter_state",
    )
    destination = django_filters.CharFilter(field_name="destination__name")
    kind = django_filters.ChoiceFilter(choices=MoveRequest.Kind.choices)
    node = django_filters.CharFilter(field_name="items__node__name", distinct=True)
    mine = StrictBooleanFilter(method="filter_mine", help_text="Only the requests you asked.")

    class Meta:
        model = MoveRequest
        fields = ["state", "destination", "kind", "node", "mine"]

    def filter_state(
        self, queryset: QuerySet[MoveRequest], name: str, value: list[str]
    ) -> QuerySet[MoveRequest]:
        states = set(value)
        if ALL in states:
            return queryset
        if ACTIVE in states:
            states = (states - {ACTIVE}) | set(MoveRequest.ACTIVE_STATES)
        return queryset.filter(state__in=states)

    def filter_mine(
        self, queryset: QuerySet[MoveRequest], name: str, value: str
    ) -> QuerySet[MoveRequest]:
        user = getattr(self.request, "user", None)
        if value != "true" or user is None:
            return queryset
        return queryset.filter(requested_by=user)


class AuditFilter(django_filters.FilterSet):
    action = django_filters.CharFilter(lookup_expr="startswith")
    node = django_filters.CharFilter(field_name="node_name")
    actor = django_filters.CharFilter(field_name="actor_name")
    request = IdFilter(field_name="request_id")
    since = django_filters.IsoDateTimeFilter(field_name="at", lookup_expr="gte")
    until = django_filters.IsoDateTimeFilter(field_name="at", lookup_expr="lt")

    class Meta:
        model = AuditEvent
        fields = ["action", "node", "actor", "request", "since", "until"]


def page_queryset(
    filterset: django_filters.FilterSet, request: HttpRequest
) -> tuple[QuerySet[Any], int]:
    """A page's filtered list and its status: a filter that does not parse is a 400, said in
    a message naming the filter, with nothing listed."""
    if filterset.is_valid():
        return filterset.qs, 200
    for name, errors in filterset.errors.items():
        messages.error(request, f"Filter {name!r}: {' '.join(errors)}")
    return filterset.queryset.none(), BAD_FILTER_STATUS
