"""The move list's filters: the page's tabs, GET /api/v1/moves/ and the CSV export."""

from __future__ import annotations

import django_filters
from django.db.models import QuerySet

from pools.common.filtering import StrictBooleanFilter
from pools.models import MoveRequest

ACTIVE = "active"


ALL = "all"  # every state: the move list's last tab, and what its export and the API take


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
