from __future__ import annotations

from dataclasses import asdict
from typing import Any

from django.db import models
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from pools.api.fields import StrictCharField, StrictIntegerField
from pools.models import FREE_TEXT_MAX_LENGTH, AuditEvent, MoveItem, MoveRequest, Node, Pool
from pools.moves import BULK_LIMIT


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
    node_count = serializers.SerializerMethodField(help_text="GPU nodes in the pool now.")

    class Meta:
        model = Pool
        fields = [*Pool.EDITABLE_FIELDS, "node_count", "created_at", "updated_at", "retired_at"]
        read_only_fields = ["created_at", "updated_at", "retired_at"]
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
    "metrics": None,
}
NODE_ROW_FIELDS = tuple(column for column in NODE_FIELDS.values() if column)


def _node_row(node: Node) -> dict[str, Any]:
    row = {c: getattr(node, c) for c in NODE_ROW_FIELDS if c != "pool__name"}
    row["pool__name"] = node.pool.name if node.pool_id else None
    return row


class NodeSerializer(serializers.ModelSerializer):  # type: ignore[type-arg]
    pool = serializers.SlugRelatedField(slug_field="name", read_only=True, allow_null=True)
    gone = serializers.SerializerMethodField()
    metrics = serializers.SerializerMethodField()

    class Meta:
        model = Node
        fields = list(NODE_FIELDS)

    def get_gone(self, node: Node) -> bool:
        return node.gone_at is not None

    def to_representation(self, node: Node | dict[str, Any]) -> dict[str, Any]:
        # The list's hot path, written out over a plain row (NODE_ROW_FIELDS): DRF's
        # per-field machinery cost more than the query at 100 nodes a page. The declared
        # fields above still describe it (OpenAPI), and a test compares both paths.
        if type(self) is not NodeSerializer:
            return super().to_representation(node)
        row = node if isinstance(node, dict) else _node_row(node)
        body = {field: row[column] for field, column in NODE_FIELDS.items() if column}
        body["last_seen"] = row["last_seen"].isoformat().replace("+00:00", "Z")
        body["gone"] = row["gone_at"] is not None
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
    index = serializers.CharField()
    util = serializers.FloatField(allow_null=True)
    fb_used = serializers.FloatField(allow_null=True)
    fb_total = serializers.FloatField(allow_null=True)
    temp = serializers.FloatField(allow_null=True)
    power = serializers.FloatField(allow_null=True)
    sm_clock = serializers.FloatField(allow_null=True)
    xid = serializers.IntegerField()
    pod = serializers.CharField(allow_blank=True)
    namespace = serializers.CharField(allow_blank=True)


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


class MoveCreateSerializer(serializers.Serializer):  # type: ignore[type-arg]
    nodes = serializers.ListField(
        child=StrictCharField(max_length=253), min_length=1, max_length=5000
    )
    destination = serializers.SlugRelatedField(slug_field="name", queryset=Pool.objects.active())
    reason = StrictCharField(max_length=FREE_TEXT_MAX_LENGTH)
    drain_policy = serializers.ChoiceField(
        choices=MoveRequest.DrainPolicy.choices, default=MoveRequest.DrainPolicy.LEAVE_RUNNING
    )
    drain_deadline_seconds = StrictIntegerField(min_value=10, max_value=86_400, default=1800)
    loan_until = serializers.DateTimeField(required=False, allow_null=True)
    health_override = StrictCharField(
        required=False, allow_blank=True, default="", max_length=FREE_TEXT_MAX_LENGTH
    )
    reconcile = serializers.BooleanField(default=False)


class DryRunSerializer(MoveCreateSerializer):
    reason = StrictCharField(max_length=FREE_TEXT_MAX_LENGTH, required=False, allow_blank=True)


class CheckSerializer(serializers.Serializer):  # type: ignore[type-arg]
    node = serializers.CharField(allow_null=True)
    code = serializers.CharField()
    message = serializers.CharField()
    field = serializers.CharField(
        allow_null=True, help_text="The input field at fault (the request would be a 400)."
    )


class PlannedNodeSerializer(serializers.Serializer):  # type: ignore[type-arg]
    node = serializers.CharField()
    source_pool = serializers.CharField(allow_null=True)
    diff = serializers.DictField()
    summary = serializers.CharField()
    gpu_pods = PodSerializer(many=True)


class PodFateSerializer(serializers.Serializer):  # type: ignore[type-arg]
    pod = serializers.CharField()
    gpus = serializers.IntegerField()
    fate = serializers.ChoiceField(choices=["evicted", "left running"])
    why = serializers.CharField(allow_blank=True)


class CapacitySerializer(serializers.Serializer):  # type: ignore[type-arg]
    nodes = serializers.IntegerField()
    usable_nodes = serializers.IntegerField()
    gpus = serializers.IntegerField()
    free_gpus = serializers.IntegerField()
    whole_free_nodes = serializers.IntegerField()
    largest_free_block = serializers.IntegerField()


class PoolChangeSerializer(serializers.Serializer):  # type: ignore[type-arg]
    pool = serializers.CharField()
    role = serializers.ChoiceField(choices=["source", "destination"])
    before = CapacitySerializer()
    after = CapacitySerializer()


class MoveImpactSerializer(serializers.Serializer):  # type: ignore[type-arg]
    """What the move does to pods, the pending queue and gang capacity."""

    pods = serializers.DictField(child=PodFateSerializer(many=True))
    would_start = serializers.ListField(child=serializers.CharField())
    pools = PoolChangeSerializer(many=True)
    warnings = serializers.ListField(child=serializers.CharField())


class DryRunResultSerializer(serializers.Serializer):  # type: ignore[type-arg]
    ok = serializers.BooleanField()
    destination = serializers.CharField()
    checks = CheckSerializer(many=True)
    nodes = PlannedNodeSerializer(many=True)
    impact = MoveImpactSerializer()


class ApprovalSerializer(serializers.Serializer):  # type: ignore[type-arg]
    approver = serializers.CharField(source="approver.username")
    reason = serializers.CharField(source="comment", allow_blank=True)
    comment = serializers.CharField(allow_blank=True, help_text="Deprecated: same as reason.")
    created_at = serializers.DateTimeField()


class MoveItemSerializer(serializers.ModelSerializer):  # type: ignore[type-arg]
    node = serializers.CharField(source="node.name")
    source_pool = serializers.SlugRelatedField(slug_field="name", read_only=True, allow_null=True)

    class Meta:
        model = MoveItem
        fields = [
            "node",
            "source_pool",
            "state",
            "planned_diff",
            "applied_diff",
            "error",
            "waiting",
            "attempts",
            "finished_at",
            "gpu_pods",
        ]


class MoveSerializer(serializers.ModelSerializer):  # type: ignore[type-arg]
    destination = serializers.SlugRelatedField(slug_field="name", read_only=True)
    requested_by = serializers.SlugRelatedField(
        slug_field="username", read_only=True, allow_null=True
    )
    approvals = ApprovalSerializer(many=True, read_only=True)
    items = MoveItemSerializer(many=True, read_only=True)

    class Meta:
        model = MoveRequest
        fields = [
            "id",
            "kind",
            "state",
            "destination",
            "requested_by",
            "reason",
            "drain_policy",
            "drain_deadline_seconds",
            "loan_until",
            "health_override",
            "approvals_required",
            "approvals",
            "items",
            "parent",
            "created_at",
            "expires_at",
            "decided_at",
            "started_at",
            "finished_at",
        ]
        read_only_fields = fields


class DecisionSerializer(serializers.Serializer):  # type: ignore[type-arg]
    reason = StrictCharField(
        required=False,
        allow_blank=True,
        default="",
        max_length=FREE_TEXT_MAX_LENGTH,
        help_text="Why: required to reject, optional to approve or cancel.",
    )
    comment = StrictCharField(
        required=False,
        allow_blank=True,
        max_length=FREE_TEXT_MAX_LENGTH,
        write_only=True,
        help_text="Deprecated: the former name of `reason`, read only when `reason` is absent.",
    )

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        comment = attrs.pop("comment", None)
        if "reason" not in self.initial_data and comment is not None:
            attrs["reason"] = comment
        return attrs


class AuditEventSerializer(serializers.ModelSerializer):  # type: ignore[type-arg]
    class Meta:
        model = AuditEvent
        fields = [
            "id",
            "at",
            "actor_name",
            "action",
            "request",
            "node_name",
            "message",
            "before",
            "after",
        ]


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


class PoolFiguresSerializer(serializers.Serializer):  # type: ignore[type-arg]
    pool = serializers.CharField(allow_null=True, help_text="null: the unassigned GPU nodes")
    figures = FiguresSerializer()


class SummarySerializer(serializers.Serializer):  # type: ignore[type-arg]
    cluster = FiguresSerializer()
    pools = PoolFiguresSerializer(many=True)
    metrics_error = serializers.CharField(allow_null=True)


class QueuedSerializer(serializers.Serializer):  # type: ignore[type-arg]
    queued = serializers.BooleanField()


class BulkDecisionSerializer(serializers.Serializer):  # type: ignore[type-arg]
    ids = serializers.ListField(
        child=StrictIntegerField(min_value=1, max_value=2**63 - 1),  # a database id
        allow_empty=False,
        max_length=BULK_LIMIT,
        help_text=f"The moves to decide, at most {BULK_LIMIT}.",
    )
    reason = StrictCharField(
        required=False,
        allow_blank=True,
        default="",
        max_length=FREE_TEXT_MAX_LENGTH,
        help_text="One reason for every move: required to reject, optional to approve.",
    )


class BulkOutcomeSerializer(serializers.Serializer):  # type: ignore[type-arg]
    id = serializers.IntegerField(source="move_id")
    ok = serializers.BooleanField()
    code = serializers.CharField(help_text='"ok", or the refusal\'s stable code.')
    message = serializers.CharField(help_text="Why it was refused; empty when decided.")


class BulkResultSerializer(serializers.Serializer):  # type: ignore[type-arg]
    decided = serializers.IntegerField()
    refused = serializers.IntegerField()
    results = BulkOutcomeSerializer(many=True)


# --- search ---


class SearchQuerySerializer(serializers.Serializer):  # type: ignore[type-arg]
    q = serializers.CharField(
        max_length=200,
        help_text="A node name or label value (or key=value), a pod name (or namespace/name), "
        "a move number (#12), a pool.",
    )
    limit = serializers.IntegerField(min_value=1, max_value=100, default=20)


class NodeHitSerializer(serializers.Serializer):  # type: ignore[type-arg]
    name = serializers.CharField()
    pool = serializers.CharField(allow_null=True)
    matched = serializers.ListField(child=serializers.CharField())


class PodHitSerializer(serializers.Serializer):  # type: ignore[type-arg]
    name = serializers.CharField()
    namespace = serializers.CharField()
    node = serializers.CharField()
    pool = serializers.CharField(allow_null=True)
    gpus = serializers.IntegerField()


class MoveHitSerializer(serializers.Serializer):  # type: ignore[type-arg]
    id = serializers.IntegerField()
    kind = serializers.CharField()
    state = serializers.CharField()
    destination = serializers.CharField()
    reason = serializers.CharField()


class PoolHitSerializer(serializers.Serializer):  # type: ignore[type-arg]
    name = serializers.CharField()
    display_name = serializers.CharField()


class SearchSerializer(serializers.Serializer):  # type: ignore[type-arg]
    q = serializers.CharField(source="query.text")
    total = serializers.IntegerField()
    nodes = NodeHitSerializer(many=True)
    pods = PodHitSerializer(many=True)
    moves = MoveHitSerializer(many=True)
    pools = PoolHitSerializer(many=True)
    more = serializers.DictField(
        child=serializers.IntegerField(), help_text="Hits left out past the limit, by group."
    )


class PodRefSerializer(serializers.Serializer):  # type: ignore[type-arg]
    namespace = StrictCharField(max_length=63)
    name = StrictCharField(max_length=253)


class FitRequestSerializer(serializers.Serializer):  # type: ignore[type-arg]
    """Either `manifest` (YAML or JSON text, up to 1 MB) or `pod` (a pod the inventory holds)."""

    manifest = StrictCharField(
        required=False, trim_whitespace=False, max_length=1_000_000, allow_blank=False
    )
    pod = PodRefSerializer(required=False)

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        given = [k for k in ("manifest", "pod") if k in attrs]
        if len(given) != 1:
            raise serializers.ValidationError(
                {"non_field_errors": ["Give either manifest or pod, not both or neither."]}
            )
        return attrs


class FitResultSerializer(serializers.Serializer):  # type: ignore[type-arg]
    """The fit check's report: per workload, the cluster's and each pool's verdicts, the
    findings, and per pool the fix (the manifest with the pool's scheduling block merged in)."""

    pod = serializers.CharField(allow_null=True)
    pools = serializers.ListField(child=serializers.CharField())
    workloads = serializers.ListField(child=serializers.DictField())
    findings = serializers.ListField(child=serializers.DictField())
    fixes = serializers.DictField(child=serializers.DictField())
