"""The audit log's filters: the page, GET /api/v1/audit-events/ and the CSV export."""

from __future__ import annotations

import django_filters

from pools.common.filtering import IdFilter
from pools.models import AuditEvent


class AuditFilter(django_filters.FilterSet):
    action = django_filters.CharFilter(lookup_expr="startswith")
    node = django_filters.CharFilter(field_name="node_name")
    actor = django_filters.CharFilter(field_name="actor_name")
    cluster = django_filters.CharFilter(field_name="cluster")
    request = IdFilter(field_name="request_id")
    maintenance = IdFilter(field_name="maintenance_id")
    booking = IdFilter(field_name="booking_id")
    reclaim = IdFilter(field_name="reclaim_id")
    since = django_filters.IsoDateTimeFilter(field_name="at", lookup_expr="gte")
    until = django_filters.IsoDateTimeFilter(field_name="at", lookup_expr="lt")

    class Meta:
        model = AuditEvent
        fields = [
            "action",
            "node",
            "actor",
            "cluster",
            "request",
            "maintenance",
            "booking",
            "reclaim",
            "since",
            "until",
        ]
