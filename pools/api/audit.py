"""The audit log over the API: every recorded step, newest first, filtered as the page is."""

from __future__ import annotations

import django_filters
from drf_spectacular.utils import (
    extend_schema,
    extend_schema_view,
)
from rest_framework import serializers, viewsets

from pools.api.base import READ_ERRORS, BaseView, Newest, error_responses
from pools.audit.filters import AuditFilter
from pools.core.cluster_scope import any_cluster
from pools.models import AuditEvent


class AuditEventSerializer(serializers.ModelSerializer):  # type: ignore[type-arg]
    class Meta:
        model = AuditEvent
        fields = [
            "id",
            "at",
            "cluster",
            "actor_name",
            "action",
            "request",
            "maintenance",
            "booking",
            "reclaim",
            "node_name",
            "message",
            "before",
            "after",
        ]


@extend_schema_view(
    list=extend_schema(
        responses={200: AuditEventSerializer(many=True), **READ_ERRORS, **error_responses(400)}
    ),
    retrieve=extend_schema(
        responses={200: AuditEventSerializer, **READ_ERRORS, **error_responses(404)}
    ),
)
@any_cluster
class AuditEventViewSet(BaseView, viewsets.ReadOnlyModelViewSet):  # type: ignore[type-arg]
    queryset = AuditEvent.objects.all()
    serializer_class = AuditEventSerializer
    pagination_class = Newest
    filterset_class = AuditFilter
    filter_backends = [django_filters.rest_framework.DjangoFilterBackend]
