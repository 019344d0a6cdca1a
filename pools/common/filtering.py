"""What every list's filters share. One FilterSet per list: the page, the API (and an export,
when there is one) filter a list the same way because they use the same FilterSet.

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
