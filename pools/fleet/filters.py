"""The node table's filters: the pool page, GET /api/v1/nodes/ and the CSV export."""

from __future__ import annotations

import django_filters
from django.db.models import QuerySet

from pools.common.errors import MetricsUnavailable
from pools.common.filtering import StrictBooleanFilter
from pools.core import figures
from pools.metrics.node_figures import latest_node_metrics
from pools.models import Node


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
