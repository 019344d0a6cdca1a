"""Moves over the API: ask (and the dry run), decide one or many, cancel, follow; the
same workflow functions the pages call."""

from __future__ import annotations

from typing import Any

import django_filters
from django.db.models import Prefetch, QuerySet
from django.utils import timezone
from drf_spectacular.utils import (
    extend_schema,
    extend_schema_view,
)
from rest_framework import mixins, serializers, status, viewsets
from rest_framework.decorators import action
from rest_framework.request import Request
from rest_framework.response import Response

from pools import moves
from pools.api.base import READ_ERRORS, WRITE_ERRORS, BaseView, Newest, error_responses, validated
from pools.api.fields import ActivePoolField, StrictCharField, StrictIntegerField
from pools.api.fleet import PodSerializer, UnitFiguresSerializer
from pools.api.idempotency import idempotent
from pools.common.roles import Capability
from pools.models import FREE_TEXT_MAX_LENGTH, MoveItem, MoveRequest
from pools.moves import BULK_LIMIT
from pools.moves.filters import MoveFilter
from pools.moves.impact import move_impact


class MoveCreateSerializer(serializers.Serializer):  # type: ignore[type-arg]
    nodes = serializers.ListField(
        child=StrictCharField(max_length=253), min_length=1, max_length=5000
    )
    destination = ActivePoolField(error_messages={})
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


class ReconfigureSerializer(serializers.Serializer):  # type: ignore[type-arg]
    nodes = serializers.ListField(
        child=StrictCharField(max_length=253), min_length=1, max_length=5000
    )
    mig_config = StrictCharField(
        max_length=63,
        required=False,
        allow_blank=True,
        default="",
        help_text="all-disabled, all-<profile> (e.g. all-3g.40gb) or a name in MIG_CONFIGS; "
        "give this or plugin_config",
    )
    plugin_config = StrictCharField(
        max_length=63,
        required=False,
        allow_blank=True,
        default="",
        help_text="a device plugin (GPU sharing) configuration named in "
        "DEVICE_PLUGIN_CONFIGS; give this or mig_config",
    )
    reason = StrictCharField(max_length=FREE_TEXT_MAX_LENGTH)
    drain_deadline_seconds = StrictIntegerField(min_value=10, max_value=86_400, default=1800)


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
    gpus = serializers.IntegerField(help_text="whole GPUs (nvidia.com/gpu)")
    asks = serializers.CharField(
        help_text='every GPU unit the pod holds, e.g. "2 GPUs" or "1 MIG 1g.10gb"'
    )
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


class UnitChangeSerializer(serializers.Serializer):  # type: ignore[type-arg]
    pool = serializers.CharField()
    role = serializers.ChoiceField(choices=["source", "destination"])
    kind = serializers.CharField(help_text='the kind\'s label, e.g. "MIG 1g.10gb"')
    before = UnitFiguresSerializer()
    after = UnitFiguresSerializer()


class MoveImpactSerializer(serializers.Serializer):  # type: ignore[type-arg]
    """What the move does to pods, the pending queue and gang capacity."""

    pods = serializers.DictField(child=PodFateSerializer(many=True))
    would_start = serializers.ListField(child=serializers.CharField())
    pools = PoolChangeSerializer(many=True)
    warnings = serializers.ListField(child=serializers.CharField())
    units = UnitChangeSerializer(
        many=True,
        help_text="each kind of unit other than whole GPUs (MIG instances of a profile, shared "
        "GPUs, DRA devices) in the move's pools, before and after; only the kinds it changes",
    )


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
            "mig_config",
            "plugin_config",
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


DECISIONS = (moves.Action.APPROVE, moves.Action.REJECT, moves.Action.CANCEL)


BULK = (moves.Action.APPROVE, moves.Action.REJECT)


BULK_DESCRIPTION = (
    "Decide several moves in one step. Each move is decided on its own (four eyes holds per "
    "move): the answer is 200 with one result per id, refused ones with their code."
)


@extend_schema_view(
    list=extend_schema(
        responses={200: MoveSerializer(many=True), **READ_ERRORS, **error_responses(400)}
    ),
    retrieve=extend_schema(responses={200: MoveSerializer, **READ_ERRORS, **error_responses(404)}),
)
class MoveViewSet(
    BaseView, mixins.ListModelMixin, mixins.RetrieveModelMixin, viewsets.GenericViewSet
):  # type: ignore[type-arg]
    serializer_class = MoveSerializer
    pagination_class = Newest
    filterset_class = MoveFilter
    filter_backends = [django_filters.rest_framework.DjangoFilterBackend]
    capabilities = {
        "create": Capability.REQUEST_MOVE,
        "dry_run": Capability.REQUEST_MOVE,
        "reconfigure": Capability.REQUEST_MOVE,
        # The gate of each decision; who may decide on which move is moves.rules'.
        **{action.value: moves.ACTION_CAPABILITY[action] for action in DECISIONS},
        **{f"bulk_{action.value}": moves.ACTION_CAPABILITY[action] for action in BULK},
    }

    def get_queryset(self) -> QuerySet[MoveRequest]:
        return MoveRequest.objects.select_related("destination", "requested_by").prefetch_related(
            "approvals__approver",
            Prefetch("items", MoveItem.objects.select_related("node", "source_pool")),
        )

    @extend_schema(
        request=MoveCreateSerializer,
        responses={201: MoveSerializer, **WRITE_ERRORS},
        description="Ask to move one node or a batch. Send Idempotency-Key to make retries safe.",
    )
    @idempotent
    def create(self, request: Request) -> Response:
        ask = move_ask(validated(MoveCreateSerializer, request))
        move = moves.move_request_ask(requested_by=request.user, ask=ask, now=timezone.now())
        return Response(
            MoveSerializer(self.get_queryset().get(pk=move.pk)).data,
            status=status.HTTP_201_CREATED,
        )

    @extend_schema(
        request=ReconfigureSerializer,
        responses={201: MoveSerializer, **WRITE_ERRORS},
        description="Ask for nodes of one pool to take a MIG configuration "
        "(nvidia.com/mig.config) or a device plugin configuration "
        "(nvidia.com/device-plugin.config, how the GPUs are shared): a request of kind "
        "reconfigure, approved like a move, run drain-first; the node is uncordoned once "
        "nvidia.com/mig.config.state is success, or GPU feature discovery labels the new "
        "sharing, and left cordoned if it fails.",
    )
    @action(detail=False, methods=["post"])
    @idempotent
    def reconfigure(self, request: Request) -> Response:
        data = validated(ReconfigureSerializer, request)
        move = moves.reconfiguration_ask(
            requested_by=request.user,
            node_names=data["nodes"],
            mig_config=data["mig_config"],
            plugin_config=data["plugin_config"],
            reason=data["reason"],
            drain_deadline_seconds=data["drain_deadline_seconds"],
            now=timezone.now(),
        )
        return Response(
            MoveSerializer(self.get_queryset().get(pk=move.pk)).data,
            status=status.HTTP_201_CREATED,
        )

    @extend_schema(
        request=DryRunSerializer,
        responses={200: DryRunResultSerializer, **error_responses(400, 401, 403, 415, 429)},
        description="The diff each node would get and the checks' verdict; creates nothing.",
    )
    @action(detail=False, methods=["post"], url_path="dry-run")
    def dry_run(self, request: Request) -> Response:
        ask = move_ask(validated(DryRunSerializer, request))
        plan = moves.move_plan(ask=ask, now=timezone.now())
        impact = move_impact(plan, drain_policy=ask.drain_policy)
        return Response(
            DryRunResultSerializer(
                {
                    "ok": plan.ok,
                    "destination": plan.destination.name,
                    "checks": [f.as_dict() for f in plan.failures],
                    "nodes": [
                        {
                            "node": p.node.name,
                            "source_pool": p.node.pool.name if p.node.pool else None,
                            "diff": p.diff,
                            "summary": p.summary,
                            "gpu_pods": p.gpu_pods,
                        }
                        for p in plan.nodes
                    ],
                    "impact": impact.as_dict(),
                }
            ).data
        )

    def _decide(self, request: Request, action: moves.Action) -> Response:
        move = self.get_object()
        moves.move_decide(
            move=move,
            user=request.user,
            action=action,
            reason=validated(DecisionSerializer, request)["reason"],
            now=timezone.now(),
        )
        return Response(MoveSerializer(self.get_queryset().get(pk=move.pk)).data)

    @extend_schema(
        request=DecisionSerializer,
        responses={200: MoveSerializer, **WRITE_ERRORS, **error_responses(404)},
    )
    @action(detail=True, methods=["post"])
    @idempotent
    def approve(self, request: Request, pk: str | None = None) -> Response:
        return self._decide(request, moves.Action.APPROVE)

    @extend_schema(
        request=DecisionSerializer,
        responses={200: MoveSerializer, **WRITE_ERRORS, **error_responses(404)},
    )
    @action(detail=True, methods=["post"])
    @idempotent
    def reject(self, request: Request, pk: str | None = None) -> Response:
        return self._decide(request, moves.Action.REJECT)

    @extend_schema(
        request=DecisionSerializer,
        responses={200: MoveSerializer, **WRITE_ERRORS, **error_responses(404)},
    )
    @action(detail=True, methods=["post"])
    @idempotent
    def cancel(self, request: Request, pk: str | None = None) -> Response:
        return self._decide(request, moves.Action.CANCEL)

    def _decide_bulk(self, request: Request, action: moves.Action) -> Response:
        data = validated(BulkDecisionSerializer, request)
        outcomes = moves.moves_decide_bulk(
            move_ids=data["ids"],
            user=request.user,
            action=action,
            reason=data["reason"],
            now=timezone.now(),
        )
        decided = sum(o.ok for o in outcomes)
        return Response(
            BulkResultSerializer(
                {"decided": decided, "refused": len(outcomes) - decided, "results": outcomes}
            ).data
        )

    @extend_schema(
        request=BulkDecisionSerializer,
        responses={200: BulkResultSerializer, **WRITE_ERRORS},
        description=BULK_DESCRIPTION,
    )
    @action(detail=False, methods=["post"], url_path="bulk-approve")
    @idempotent
    def bulk_approve(self, request: Request) -> Response:
        return self._decide_bulk(request, moves.Action.APPROVE)

    @extend_schema(
        request=BulkDecisionSerializer,
        responses={200: BulkResultSerializer, **WRITE_ERRORS},
        description=BULK_DESCRIPTION + " A reason is required.",
    )
    @action(detail=False, methods=["post"], url_path="bulk-reject")
    @idempotent
    def bulk_reject(self, request: Request) -> Response:
        return self._decide_bulk(request, moves.Action.REJECT)


def move_ask(data: dict[str, Any]) -> moves.MoveAsk:
    return moves.MoveAsk(
        node_names=data["nodes"],
        destination=data["destination"],
        reason=data.get("reason", ""),
        drain_policy=data["drain_policy"],
        drain_deadline_seconds=data["drain_deadline_seconds"],
        loan_until=data.get("loan_until"),
        health_override=data["health_override"],
        reconcile=data["reconcile"],
    )
