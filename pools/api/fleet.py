"""Pools and nodes over the API: pool definitions (create, edit, retire, restore), the
node list with its live DCGM figures, one node in full, and the fleet summary."""

from __future__ import annotations

from dataclasses import asdict
from datetime import UTC, datetime
from typing import Any

import django_filters
from django.db import models
from django.db.models import QuerySet
from django.http.response import HttpResponseBase
from drf_spectacular.utils import (
    OpenApiParameter,
    extend_schema,
    extend_schema_field,
    extend_schema_view,
)
from rest_framework import filters, serializers, status, viewsets
from rest_framework.decorators import action
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from pools.api import fleet_cache
from pools.api.base import READ_ERRORS, WRITE_ERRORS, BaseView, ByName, error_responses
from pools.api.fields import StrictCharField, StrictIntegerField
from pools.api.idempotency import idempotent
from pools.common.errors import Refused
from pools.common.roles import Capability
from pools.core.devices import DEVICE_COLUMNS, KINDS, devices_as_dict, devices_of_row
from pools.fleet import selectors, services
from pools.fleet.filters import NodeFilter
from pools.metrics.node_figures import latest_node_metrics, latest_node_metrics_versioned
from pools.models import Node, Pool


class PoolSerializer(serializers.ModelSerializer):  # type: ignore[type-arg]
    # The model's text columns come in as strings only (pools/api/fields.py).
    serializer_field_mapping = {
        **serializers.ModelSerializer.serializer_field_mapping,
        models.CharField: StrictCharField,
        models.TextField: StrictCharField,
        # And its counts as integers only: "2" and 2.0 are refused (pools/api/fields.py).
        models.IntegerField: StrictIntegerField,
        models.SmallIntegerField: StrictIntegerField,
        models.BigIntegerField: StrictIntegerField,
        models.PositiveIntegerField: StrictIntegerField,
        models.PositiveSmallIntegerField: StrictIntegerField,
        models.PositiveBigIntegerField: StrictIntegerField,
    }
    labels = serializers.DictField(
        child=StrictCharField(allow_blank=True),
        required=False,
        help_text="Labels besides the pool key.",
    )
    accepted_gpu_models = serializers.ListField(child=StrictCharField(), required=False)
    accepted_gpu_layouts = serializers.ListField(
        child=StrictCharField(),
        required=False,
        help_text="whole, shared, mig-<profile> (e.g. mig-1g.10gb); empty accepts any.",
    )
    node_count = serializers.SerializerMethodField(help_text="GPU nodes in the pool now.")
    cluster = serializers.CharField(
        read_only=True, help_text="The cluster the pool belongs to: its nodes are that cluster's."
    )

    class Meta:
        model = Pool
        fields = [
            "cluster",
            *Pool.EDITABLE_FIELDS,
            "node_count",
            "created_at",
            "updated_at",
            "retired_at",
        ]
        read_only_fields = ["cluster", "created_at", "updated_at", "retired_at"]
        # Uniqueness and every other rule are checked by the model (pools.models), so the
        # API and the pages refuse the same definitions with the same messages.
        extra_kwargs = {"name": {"validators": []}}

    def get_node_count(self, pool: Pool) -> int:
        annotated = getattr(pool, "node_count", None)  # the list annotates it in one query
        return (
            annotated if annotated is not None else pool.nodes.filter(gone_at__isnull=True).count()
        )


class NodeMetricsSerializer(serializers.Serializer):  # type: ignore[type-arg]
    gpus_reporting = serializers.IntegerField()
    util = serializers.FloatField(allow_null=True)
    fb_used = serializers.FloatField(allow_null=True, help_text="MiB")
    fb_total = serializers.FloatField(allow_null=True, help_text="MiB")
    temp_max = serializers.FloatField(allow_null=True)
    power = serializers.FloatField(allow_null=True, help_text="W")
    xid_gpus = serializers.IntegerField()
    hot_gpus = serializers.IntegerField()
    idle_held_gpus = serializers.IntegerField()


# The node list's fields, in order, each with the row column it is read from (None: made
# by the serializer). The declared fields, the list's row query (NODE_ROW_FIELDS) and the
# fast path below all read this one list.
NODE_FIELDS: dict[str, str | None] = {
    "cluster": "cluster",
    "name": "name",
    "pool": "pool__name",
    "pool_label": "pool_label",
    "gpu_model": "gpu_model",
    "gpu_count": "gpu_count",
    "gpu_memory_mib": "gpu_memory_mib",
    "gpu_allocatable": "gpu_allocatable",
    "gpu_allocated": "gpu_allocated",
    "ready": "ready",
    "cordoned": "cordoned",
    "drifted": "drifted",
    "drift": "drift",
    "last_seen": "last_seen",
    "gone": "gone_at",
    "devices": None,
    "metrics": None,
}
NODE_ROW_FIELDS = tuple(
    dict.fromkeys(
        # Given as they are, then those read for `devices` only.
        [*(column for column in NODE_FIELDS.values() if column), *DEVICE_COLUMNS]
    )
)


def node_api_row(node: Node) -> dict[str, Any]:
    row = {c: getattr(node, c) for c in NODE_ROW_FIELDS if c != "pool__name"}
    row["pool__name"] = node.pool.name if node.pool_id else None
    return row


def row_devices(row: dict[str, Any]) -> dict[str, Any]:
    """A node row's physical GPUs and units by kind (pools.core.devices)."""
    return devices_as_dict(devices_of_row(row))


class UnitsSerializer(serializers.Serializer):  # type: ignore[type-arg]
    kind = serializers.ChoiceField(choices=KINDS, help_text="gpu (whole), mig or shared")
    label = serializers.CharField(help_text='e.g. "MIG 1g.10gb"')
    resource = serializers.CharField(help_text="the resource name pods ask for")
    profile = serializers.CharField(allow_blank=True)
    sharing = serializers.CharField(allow_blank=True, help_text="time-slicing or mps")
    replicas = serializers.IntegerField(help_text="units a GPU or instance is shared as")
    allocatable = serializers.IntegerField()
    allocated = serializers.IntegerField()
    free = serializers.IntegerField()


class DevicesSerializer(serializers.Serializer):  # type: ignore[type-arg]
    model = serializers.CharField(help_text="the physical GPU model")
    memory_mib = serializers.IntegerField(help_text="one physical GPU's; 0: unknown")
    gpus = serializers.IntegerField(help_text="physical GPUs: a slice or replica is not one")
    mig_gpus = serializers.IntegerField(help_text="of them, GPUs split into MIG instances")
    units = UnitsSerializer(many=True)
    operator = serializers.DictField(
        child=serializers.CharField(), help_text="the GPU operator's labels on the node"
    )


class NodeSerializer(serializers.ModelSerializer):  # type: ignore[type-arg]
    pool = serializers.SlugRelatedField(slug_field="name", read_only=True, allow_null=True)
    gone = serializers.SerializerMethodField()
    devices = serializers.SerializerMethodField()
    metrics = serializers.SerializerMethodField()

    class Meta:
        model = Node
        fields = list(NODE_FIELDS)

    def get_gone(self, node: Node) -> bool:
        return node.gone_at is not None

    @extend_schema_field(DevicesSerializer)
    def get_devices(self, node: Node) -> dict[str, Any]:
        return row_devices(node_api_row(node))

    def to_representation(self, node: Node | dict[str, Any]) -> dict[str, Any]:
        # The list's hot path, written out over a plain row (NODE_ROW_FIELDS): DRF's
        # per-field machinery cost more than the query at 100 nodes a page. The declared
        # fields above still describe it (OpenAPI), and a test compares both paths.
        if type(self) is not NodeSerializer:
            return super().to_representation(node)
        row = node if isinstance(node, dict) else node_api_row(node)
        body = {field: row[column] for field, column in NODE_FIELDS.items() if column}
        body["last_seen"] = row["last_seen"].isoformat().replace("+00:00", "Z")
        body["gone"] = row["gone_at"] is not None
        body["devices"] = row_devices(row)
        metrics = self.context.get("metrics", {}).get(row["name"])
        body["metrics"] = asdict(metrics) if metrics else None
        return body

    @extend_schema_field(NodeMetricsSerializer(allow_null=True))
    def get_metrics(self, node: Node) -> dict[str, Any] | None:
        metrics = self.context.get("metrics", {}).get(node.name)
        # A plain dict, not a nested serializer a row: on a page of 100 nodes the nested
        # serializers cost more than the query.
        return asdict(metrics) if metrics else None


class PodSerializer(serializers.Serializer):  # type: ignore[type-arg]
    name = serializers.CharField()
    namespace = serializers.CharField()
    gpus = serializers.IntegerField()
    owner_kind = serializers.CharField()
    phase = serializers.CharField()


class GpuSerializer(serializers.Serializer):  # type: ignore[type-arg]
    index = serializers.CharField(help_text='"3", or "3 instance 7" for a MIG instance of GPU 3')
    util = serializers.FloatField(allow_null=True)
    fb_used = serializers.FloatField(allow_null=True)
    fb_total = serializers.FloatField(allow_null=True)
    temp = serializers.FloatField(allow_null=True)
    power = serializers.FloatField(allow_null=True)
    sm_clock = serializers.FloatField(allow_null=True)
    xid = serializers.IntegerField()
    pod = serializers.CharField(allow_blank=True)
    namespace = serializers.CharField(allow_blank=True)
    profile = serializers.CharField(allow_blank=True, help_text="the MIG instance's profile")


class TaintSerializer(serializers.Serializer):  # type: ignore[type-arg]
    key = serializers.CharField()
    value = serializers.CharField(required=False, allow_blank=True)
    effect = serializers.CharField()


class NodeDetailSerializer(NodeSerializer):
    labels = serializers.DictField(child=serializers.CharField(allow_blank=True))
    taints = TaintSerializer(many=True)
    pods = PodSerializer(many=True)
    gpus = GpuSerializer(many=True, source="detail_gpus", read_only=True)
    managed_labels = serializers.ListField(
        child=serializers.CharField(), read_only=True, source="detail_managed_labels"
    )
    metrics_error = serializers.CharField(
        allow_null=True, read_only=True, source="detail_metrics_error"
    )
    metrics_available = serializers.BooleanField(
        read_only=True,
        source="detail_metrics_available",
        help_text="false: Prometheus could not answer; metrics and gpus are unknown, not empty.",
    )

    class Meta(NodeSerializer.Meta):
        fields = [
            *NodeSerializer.Meta.fields,
            "labels",
            "taints",
            "pods",
            "gpus",
            "managed_labels",
            "metrics_error",
            "metrics_available",
        ]


class UnitFiguresSerializer(serializers.Serializer):  # type: ignore[type-arg]
    kind = serializers.CharField(help_text='the kind\'s label, e.g. "MIG 1g.10gb"')
    units = serializers.IntegerField()
    allocated = serializers.IntegerField()
    unallocated = serializers.IntegerField(help_text="free on nodes that take pods now")
    unschedulable = serializers.IntegerField(help_text="free on NotReady or cordoned nodes")
    largest_free_block = serializers.IntegerField(help_text="most free on one usable node")
    whole_free_nodes = serializers.IntegerField(help_text="usable nodes with none held")


class FiguresSerializer(serializers.Serializer):  # type: ignore[type-arg]
    nodes = serializers.IntegerField()
    ready = serializers.IntegerField()
    not_ready = serializers.IntegerField()
    cordoned = serializers.IntegerField()
    gpus = serializers.IntegerField()
    allocated = serializers.IntegerField()
    unallocated = serializers.IntegerField(
        help_text="GPUs no pod holds on nodes that take pods now (Ready, not cordoned)."
    )
    unschedulable_gpus = serializers.IntegerField(
        help_text="GPUs no pod holds on NotReady or cordoned nodes: free, but unusable now. "
        "gpus = allocated + unallocated + unschedulable_gpus."
    )
    unschedulable_nodes = serializers.IntegerField(help_text="NotReady or cordoned nodes.")
    idle = serializers.IntegerField(
        source="unallocated",
        help_text="Deprecated, the same number as unallocated (idle_held_gpus are the GPUs "
        "held by a pod but unused).",
    )
    free_whole_nodes = serializers.IntegerField()
    largest_free_block = serializers.IntegerField()
    drifted = serializers.IntegerField()
    avg_util = serializers.FloatField(allow_null=True)
    fb_percent = serializers.FloatField(allow_null=True)
    xid_gpus = serializers.IntegerField()
    hot_gpus = serializers.IntegerField()
    idle_held_gpus = serializers.IntegerField(help_text="GPUs a pod holds but does not use.")
    nodes_without_metrics = serializers.IntegerField()
    physical_gpus = serializers.IntegerField(
        help_text="Physical GPUs, whatever they are split or shared into. gpus and the "
        "figures above count whole GPUs only; each other kind is in units."
    )
    units = serializers.SerializerMethodField()

    @extend_schema_field(UnitFiguresSerializer(many=True))
    def get_units(self, figures: Any) -> list[dict[str, Any]]:
        return [u.as_dict() for u in figures.units]


class PoolFiguresSerializer(serializers.Serializer):  # type: ignore[type-arg]
    pool = serializers.CharField(allow_null=True, help_text="null: the unassigned GPU nodes")
    figures = FiguresSerializer()


class SummarySerializer(serializers.Serializer):  # type: ignore[type-arg]
    cluster = FiguresSerializer()
    pools = PoolFiguresSerializer(many=True)
    metrics_error = serializers.CharField(allow_null=True)


class NodePages(ByName):
    """The node list's pages also say whether the DCGM metrics were available: a node's
    `metrics: null` means "no metrics for it" only when they were."""

    metrics_error: str | None = None
    metrics_made: float | None = None  # when the figures came back (epoch seconds)

    def get_paginated_response(self, data: Any) -> Response:
        response = super().get_paginated_response(data)
        response.data["metrics_available"] = self.metrics_error is None
        response.data["metrics_error"] = self.metrics_error
        # Figures may be served a little past their life while their refresh runs
        # (METRICS_STALE_SECONDS): a client sees how old they are.
        made = self.metrics_made
        response.data["metrics_as_of"] = (
            datetime.fromtimestamp(made, tz=UTC).isoformat()
            if made is not None and self.metrics_error is None
            else None
        )
        return response

    def get_paginated_response_schema(self, schema: dict[str, Any]) -> dict[str, Any]:
        paged = super().get_paginated_response_schema(schema)
        paged["properties"]["metrics_available"] = {"type": "boolean"}
        paged["properties"]["metrics_error"] = {"type": "string", "nullable": True}
        paged["properties"]["metrics_as_of"] = {
            "type": "string",
            "format": "date-time",
            "nullable": True,
            "description": "When Prometheus answered for the node figures (null without them)",
        }
        paged.setdefault("required", []).extend(
            ["metrics_available", "metrics_error", "metrics_as_of"]
        )
        return paged


@extend_schema_view(
    list=extend_schema(
        parameters=[
            OpenApiParameter("retired", bool, description="true: the retired pools instead")
        ],
        responses={200: PoolSerializer(many=True), **READ_ERRORS},
    ),
    retrieve=extend_schema(responses={200: PoolSerializer, **READ_ERRORS, **error_responses(404)}),
    create=extend_schema(responses={201: PoolSerializer, **WRITE_ERRORS}),
    update=extend_schema(responses={200: PoolSerializer, **WRITE_ERRORS, **error_responses(404)}),
    partial_update=extend_schema(
        responses={200: PoolSerializer, **WRITE_ERRORS, **error_responses(404)}
    ),
    destroy=extend_schema(
        description="Retire the pool (refused while it holds nodes); `restore` undoes it.",
        responses={204: None, **WRITE_ERRORS, **error_responses(404)},
    ),
)
class PoolViewSet(BaseView, viewsets.ModelViewSet):  # type: ignore[type-arg]
    serializer_class = PoolSerializer
    lookup_field = "name"
    lookup_value_regex = "[a-z0-9-]+"
    pagination_class = None
    capabilities = {
        "create": Capability.EDIT_POOLS,
        "update": Capability.EDIT_POOLS,
        "partial_update": Capability.EDIT_POOLS,
        "destroy": Capability.EDIT_POOLS,
        "restore": Capability.EDIT_POOLS,
    }

    def get_queryset(self) -> QuerySet[Pool]:
        # The retired pools: with ?retired=true, and the one a restore names.
        retired = self.action == "restore" or self.request.query_params.get("retired") == "true"
        return selectors.pools_for_list(retired=retired)

    @extend_schema(
        request=None,
        description="Bring a retired pool back as it was (refused when its definition now "
        "clashes with an active pool's).",
        responses={200: PoolSerializer, **WRITE_ERRORS, **error_responses(404)},
    )
    @action(detail=True, methods=["post"])
    def restore(self, request: Request, name: str | None = None) -> Response:
        pool = services.pool_restore(pool=self.get_object())
        restored = selectors.pools_for_list(retired=False).get(pk=pool.pk)
        return Response(PoolSerializer(restored).data)

    def perform_create(self, serializer: PoolSerializer) -> None:
        pool = Pool(**serializer.validated_data)
        serializer.instance = services.pool_save(pool=pool).pool

    def perform_update(self, serializer: PoolSerializer) -> None:
        pool = serializer.instance
        for field, value in serializer.validated_data.items():
            if field != "name":  # nodes carry the name: it cannot change
                setattr(pool, field, value)
        serializer.instance = services.pool_save(pool=pool).pool

    def perform_destroy(self, instance: Pool) -> None:
        try:
            services.pool_retire(pool=instance)
        except services.PoolInUse as exc:
            raise Refused("pool_in_use", exc.messages[0]) from exc

    @idempotent
    def create(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        return super().create(request, *args, **kwargs)


class SummaryView(BaseView, APIView):
    @extend_schema(
        responses={200: SummarySerializer, **READ_ERRORS},
        description="The overview figures: cluster, every pool, unassigned nodes.",
    )
    def get(self, request: Request) -> Response:
        overview = selectors.overview()
        body = {
            "cluster": overview.cluster,
            "pools": [
                {"pool": c.pool.name if c.pool else None, "figures": c.figures}
                for c in overview.cards
            ],
            "metrics_error": overview.metrics_error,
        }
        return Response(SummarySerializer(body).data)


@extend_schema_view(
    list=extend_schema(
        responses={200: NodeSerializer(many=True), **READ_ERRORS, **error_responses(400, 503)}
    ),
    retrieve=extend_schema(
        responses={200: NodeDetailSerializer, **READ_ERRORS, **error_responses(404)}
    ),
)
class NodeViewSet(BaseView, viewsets.ReadOnlyModelViewSet):  # type: ignore[type-arg]
    lookup_field = "name"
    lookup_value_regex = "[^/]+"
    pagination_class = NodePages
    filterset_class = NodeFilter
    filter_backends = [
        django_filters.rest_framework.DjangoFilterBackend,
        filters.SearchFilter,
        filters.OrderingFilter,
    ]
    search_fields = ["name", "gpu_model"]
    ordering_fields = ["name", "gpu_allocated", "gpu_allocatable", "gpu_model"]
    ordering = ["name"]

    def get_queryset(self) -> QuerySet[Node]:
        qs = Node.objects.select_related("pool")
        if self.action == "list":
            # Plain rows, not model instances: the list is the API's hottest path, and
            # building 100 instances cost more than the query (the serializer takes both).
            qs = qs.values(*NODE_ROW_FIELDS)  # type: ignore[assignment]
        return qs

    def get_serializer_class(self) -> type[NodeSerializer]:
        return NodeDetailSerializer if self.action == "retrieve" else NodeSerializer

    def list(self, request: Request, *args: Any, **kwargs: Any) -> HttpResponseBase:
        # Both versions are read before the rows: a page kept under them is never older.
        result, metrics, figures_version = latest_node_metrics_versioned()
        self.list_metrics = metrics
        if isinstance(self.paginator, NodePages):
            self.paginator.metrics_error = result.error
            self.paginator.metrics_made = figures_version
        key = fleet_cache.page_key(request, figures_version)
        return fleet_cache.rendered_pages.kept_or_made(
            key, lambda: self._rendered_list(request, *args, **kwargs)
        )

    def _rendered_list(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        response = super().list(request, *args, **kwargs)
        if response.status_code == status.HTTP_200_OK:
            # Rendered here as DRF renders it after the view (same renderer and context).
            response.accepted_renderer = request.accepted_renderer
            response.accepted_media_type = request.accepted_media_type
            response.renderer_context = self.get_renderer_context()
            response.render()
        return response

    def get_serializer_context(self) -> dict[str, Any]:
        context = super().get_serializer_context()
        if self.action == "list":
            context["metrics"] = getattr(self, "list_metrics", {})
        return context

    def retrieve(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        node = self.get_object()
        detail = selectors.node_detail(node)
        node.detail_gpus = [g.__dict__ for g in detail.gpus]  # type: ignore[attr-defined]
        node.detail_managed_labels = [lbl.key for lbl in detail.labels if lbl.managed]  # type: ignore[attr-defined]
        result, metrics = latest_node_metrics()
        error = detail.metrics_error or result.error
        node.detail_metrics_error = error  # type: ignore[attr-defined]
        node.detail_metrics_available = error is None  # type: ignore[attr-defined]
        context = {**self.get_serializer_context(), "metrics": metrics}
        return Response(NodeDetailSerializer(node, context=context).data)
