"""API views: short declarations over the services and selectors the pages use."""

from __future__ import annotations

from typing import Any

import django_filters
from django.db.models import Prefetch, QuerySet
from django.http.response import HttpResponseBase
from django.utils import timezone
from drf_spectacular.utils import (
    OpenApiParameter,
    OpenApiResponse,
    extend_schema,
    extend_schema_view,
)
from rest_framework import filters, mixins, status, viewsets
from rest_framework.decorators import action
from rest_framework.exceptions import NotFound, ValidationError
from rest_framework.pagination import CursorPagination
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from pools import moves, tasks
from pools.api import node_pages
from pools.api import serializers as s
from pools.api.errors import ErrorSerializer
from pools.api.idempotency import idempotent
from pools.api.permissions import HasCapability
from pools.common.errors import WorkflowError
from pools.common.roles import Capability
from pools.fit import service as fitcheck
from pools.fleet import selectors, services
from pools.fleet.filters import AuditFilter, MoveFilter, NodeFilter
from pools.metrics.node_figures import latest_node_metrics, latest_node_metrics_versioned
from pools.models import AuditEvent, MoveItem, MoveRequest, Node, Pool
from pools.moves.impact import move_impact
from pools.search import search


def errors(*codes: int) -> dict[int, OpenApiResponse]:
    described = {
        400: "Invalid input",
        401: "No or bad credentials",
        403: "Your role does not allow this",
        404: "Not found",
        409: "A state conflict (a refused check or step)",
        415: "Unsupported media type",
        422: "Idempotency-Key reused",
        429: "Throttled",
        503: "The DCGM metrics this needs are unavailable (code metrics_unavailable)",
    }
    return {code: OpenApiResponse(ErrorSerializer, description=described[code]) for code in codes}


READ_ERRORS = errors(401, 403, 429)
WRITE_ERRORS = errors(400, 401, 403, 409, 415, 422, 429)


class StrictCursorPagination(CursorPagination):
    page_size_query_param = "page_size"
    max_page_size = 1000

    def decode_cursor(self, request: Request) -> Any:
        # A cursor the client garbled is bad input (400), not a missing page (DRF says 404).
        try:
            return super().decode_cursor(request)
        except NotFound:
            raise ValidationError({self.cursor_query_param: ["Invalid cursor."]}) from None


class ByName(StrictCursorPagination):
    page_size = 100
    max_page_size = 1000
    page_size_query_param = "page_size"
    ordering = "name"


class NodePages(ByName):
    """The node list's pages also say whether the DCGM metrics were available: a node's
    `metrics: null` means "no metrics for it" only when they were."""

    metrics_error: str | None = None

    def get_paginated_response(self, data: Any) -> Response:
        response = super().get_paginated_response(data)
        response.data["metrics_available"] = self.metrics_error is None
        response.data["metrics_error"] = self.metrics_error
        return response

    def get_paginated_response_schema(self, schema: dict[str, Any]) -> dict[str, Any]:
        paged = super().get_paginated_response_schema(schema)
        paged["properties"]["metrics_available"] = {"type": "boolean"}
        paged["properties"]["metrics_error"] = {"type": "string", "nullable": True}
        paged.setdefault("required", []).extend(["metrics_available", "metrics_error"])
        return paged


class Newest(StrictCursorPagination):
    page_size = 100
    max_page_size = 1000
    page_size_query_param = "page_size"
    ordering = ("-id",)


class BaseView:
    permission_classes = [HasCapability]
    capabilities: dict[str, Capability] = {}


# --- pools ---


@extend_schema_view(
    list=extend_schema(
        parameters=[
            OpenApiParameter("retired", bool, description="true: the retired pools instead")
        ],
        responses={200: s.PoolSerializer(many=True), **READ_ERRORS},
    ),
    retrieve=extend_schema(responses={200: s.PoolSerializer, **READ_ERRORS, **errors(404)}),
    create=extend_schema(responses={201: s.PoolSerializer, **WRITE_ERRORS}),
    update=extend_schema(responses={200: s.PoolSerializer, **WRITE_ERRORS, **errors(404)}),
    partial_update=extend_schema(responses={200: s.PoolSerializer, **WRITE_ERRORS, **errors(404)}),
    destroy=extend_schema(
        description="Retire the pool (refused while it holds nodes); `restore` undoes it.",
        responses={204: None, **WRITE_ERRORS, **errors(404)},
    ),
)
class PoolViewSet(BaseView, viewsets.ModelViewSet):  # type: ignore[type-arg]
    serializer_class = s.PoolSerializer
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
        responses={200: s.PoolSerializer, **WRITE_ERRORS, **errors(404)},
    )
    @action(detail=True, methods=["post"])
    def restore(self, request: Request, name: str | None = None) -> Response:
        pool = services.pool_restore(pool=self.get_object())
        restored = selectors.pools_for_list(retired=False).get(pk=pool.pk)
        return Response(s.PoolSerializer(restored).data)

    def perform_create(self, serializer: s.PoolSerializer) -> None:
        pool = Pool(**serializer.validated_data)
        serializer.instance = services.pool_save(pool=pool).pool

    def perform_update(self, serializer: s.PoolSerializer) -> None:
        pool = serializer.instance
        for field, value in serializer.validated_data.items():
            if field != "name":  # nodes carry the name: it cannot change
                setattr(pool, field, value)
        serializer.instance = services.pool_save(pool=pool).pool

    def perform_destroy(self, instance: Pool) -> None:
        try:
            services.pool_retire(pool=instance)
        except services.PoolInUse as exc:
            raise WorkflowError("pool_in_use", exc.messages[0]) from exc

    @idempotent
    def create(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        return super().create(request, *args, **kwargs)


class SummaryView(BaseView, APIView):
    @extend_schema(
        responses={200: s.SummarySerializer, **READ_ERRORS},
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
        return Response(s.SummarySerializer(body).data)


class SearchView(BaseView, APIView):
    @extend_schema(
        parameters=[s.SearchQuerySerializer],
        responses={200: s.SearchSerializer, **READ_ERRORS, **errors(400)},
        description="What the search box finds: nodes, pods (with the node and pool holding "
        "them), moves by number, pools; grouped, `limit` hits a group.",
    )
    def get(self, request: Request) -> Response:
        query = s.SearchQuerySerializer(data=request.query_params)
        query.is_valid(raise_exception=True)
        found = search(text=query.validated_data["q"], limit=query.validated_data["limit"])
        return Response(s.SearchSerializer(found).data)


# --- nodes ---


@extend_schema_view(
    list=extend_schema(
        responses={200: s.NodeSerializer(many=True), **READ_ERRORS, **errors(400, 503)}
    ),
    retrieve=extend_schema(responses={200: s.NodeDetailSerializer, **READ_ERRORS, **errors(404)}),
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
            qs = qs.values(*s.NODE_ROW_FIELDS)  # type: ignore[assignment]
        return qs

    def get_serializer_class(self) -> type[s.NodeSerializer]:
        return s.NodeDetailSerializer if self.action == "retrieve" else s.NodeSerializer

    def list(self, request: Request, *args: Any, **kwargs: Any) -> HttpResponseBase:
        # Both versions are read before the rows: a page kept under them is never older.
        result, metrics, figures_version = latest_node_metrics_versioned()
        self.list_metrics = metrics
        if isinstance(self.paginator, NodePages):
            self.paginator.metrics_error = result.error
        key = node_pages.page_key(request, figures_version)
        return node_pages.rendered_pages.kept_or_made(
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
        return Response(s.NodeDetailSerializer(node, context=context).data)


# --- moves ---

DECISIONS = (moves.Action.APPROVE, moves.Action.REJECT, moves.Action.CANCEL)
BULK = (moves.Action.APPROVE, moves.Action.REJECT)
BULK_DESCRIPTION = (
    "Decide several moves in one step. Each move is decided on its own (four eyes holds per "
    "move): the answer is 200 with one result per id, refused ones with their code."
)


@extend_schema_view(
    list=extend_schema(responses={200: s.MoveSerializer(many=True), **READ_ERRORS, **errors(400)}),
    retrieve=extend_schema(responses={200: s.MoveSerializer, **READ_ERRORS, **errors(404)}),
)
class MoveViewSet(
    BaseView, mixins.ListModelMixin, mixins.RetrieveModelMixin, viewsets.GenericViewSet
):  # type: ignore[type-arg]
    serializer_class = s.MoveSerializer
    pagination_class = Newest
    filterset_class = MoveFilter
    filter_backends = [django_filters.rest_framework.DjangoFilterBackend]
    capabilities = {
        "create": Capability.REQUEST_MOVE,
        "dry_run": Capability.REQUEST_MOVE,
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
        request=s.MoveCreateSerializer,
        responses={201: s.MoveSerializer, **WRITE_ERRORS},
        description="Ask to move one node or a batch. Send Idempotency-Key to make retries safe.",
    )
    @idempotent
    def create(self, request: Request) -> Response:
        ask = _ask(_valid(s.MoveCreateSerializer, request))
        move = moves.move_request_ask(requested_by=request.user, ask=ask, now=timezone.now())
        return Response(
            s.MoveSerializer(self.get_queryset().get(pk=move.pk)).data,
            status=status.HTTP_201_CREATED,
        )

    @extend_schema(
        request=s.DryRunSerializer,
        responses={200: s.DryRunResultSerializer, **errors(400, 401, 403, 415, 429)},
        description="The diff each node would get and the checks' verdict; creates nothing.",
    )
    @action(detail=False, methods=["post"], url_path="dry-run")
    def dry_run(self, request: Request) -> Response:
        ask = _ask(_valid(s.DryRunSerializer, request))
        plan = moves.move_plan(ask=ask, now=timezone.now())
        impact = move_impact(plan, drain_policy=ask.drain_policy)
        return Response(
            s.DryRunResultSerializer(
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
            reason=_valid(s.DecisionSerializer, request)["reason"],
            now=timezone.now(),
        )
        return Response(s.MoveSerializer(self.get_queryset().get(pk=move.pk)).data)

    @extend_schema(
        request=s.DecisionSerializer,
        responses={200: s.MoveSerializer, **WRITE_ERRORS, **errors(404)},
    )
    @action(detail=True, methods=["post"])
    @idempotent
    def approve(self, request: Request, pk: str | None = None) -> Response:
        return self._decide(request, moves.Action.APPROVE)

    @extend_schema(
        request=s.DecisionSerializer,
        responses={200: s.MoveSerializer, **WRITE_ERRORS, **errors(404)},
    )
    @action(detail=True, methods=["post"])
    @idempotent
    def reject(self, request: Request, pk: str | None = None) -> Response:
        return self._decide(request, moves.Action.REJECT)

    @extend_schema(
        request=s.DecisionSerializer,
        responses={200: s.MoveSerializer, **WRITE_ERRORS, **errors(404)},
    )
    @action(detail=True, methods=["post"])
    @idempotent
    def cancel(self, request: Request, pk: str | None = None) -> Response:
        return self._decide(request, moves.Action.CANCEL)

    def _decide_bulk(self, request: Request, action: moves.Action) -> Response:
        data = _valid(s.BulkDecisionSerializer, request)
        outcomes = moves.moves_decide_bulk(
            move_ids=data["ids"],
            user=request.user,
            action=action,
            reason=data["reason"],
            now=timezone.now(),
        )
        decided = sum(o.ok for o in outcomes)
        return Response(
            s.BulkResultSerializer(
                {"decided": decided, "refused": len(outcomes) - decided, "results": outcomes}
            ).data
        )

    @extend_schema(
        request=s.BulkDecisionSerializer,
        responses={200: s.BulkResultSerializer, **WRITE_ERRORS},
        description=BULK_DESCRIPTION,
    )
    @action(detail=False, methods=["post"], url_path="bulk-approve")
    @idempotent
    def bulk_approve(self, request: Request) -> Response:
        return self._decide_bulk(request, moves.Action.APPROVE)

    @extend_schema(
        request=s.BulkDecisionSerializer,
        responses={200: s.BulkResultSerializer, **WRITE_ERRORS},
        description=BULK_DESCRIPTION + " A reason is required.",
    )
    @action(detail=False, methods=["post"], url_path="bulk-reject")
    @idempotent
    def bulk_reject(self, request: Request) -> Response:
        return self._decide_bulk(request, moves.Action.REJECT)


def _ask(data: dict[str, Any]) -> moves.MoveAsk:
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


def _valid(serializer_class: type, request: Request) -> dict[str, Any]:
    serializer = serializer_class(data=request.data)
    serializer.is_valid(raise_exception=True)
    return dict(serializer.validated_data)


# --- audit and inventory ---


@extend_schema_view(
    list=extend_schema(
        responses={200: s.AuditEventSerializer(many=True), **READ_ERRORS, **errors(400)}
    ),
    retrieve=extend_schema(responses={200: s.AuditEventSerializer, **READ_ERRORS, **errors(404)}),
)
class AuditEventViewSet(BaseView, viewsets.ReadOnlyModelViewSet):  # type: ignore[type-arg]
    queryset = AuditEvent.objects.all()
    serializer_class = s.AuditEventSerializer
    pagination_class = Newest
    filterset_class = AuditFilter
    filter_backends = [django_filters.rest_framework.DjangoFilterBackend]


class FitView(BaseView, APIView):
    @extend_schema(
        request=s.FitRequestSerializer,
        responses={200: s.FitResultSerializer, **errors(400, 401, 403, 415, 429)},
        description="Will this manifest (YAML or JSON) or this pod land, in which pool, and "
        "if not, why: the scheduler's verdict per pool, gang capacity, warnings and the fix. "
        "Reads only.",
    )
    def post(self, request: Request) -> Response:
        data = _valid(s.FitRequestSerializer, request)
        pod = data.get("pod")
        check = fitcheck.fit_check_run(
            manifest=data.get("manifest"),
            pod=fitcheck.PodRef(pod["namespace"], pod["name"]) if pod else None,
        )
        return Response(check.as_dict())


class InventorySyncView(BaseView, APIView):
    capabilities = {"POST": Capability.REQUEST_MOVE}

    @extend_schema(
        request=None,
        responses={202: s.QueuedSerializer, **errors(401, 403, 429)},
        description=(
            "Queue a full inventory sync now (it also runs every INVENTORY_SYNC_SECONDS; with "
            "a watcher running, the watcher lists everything again)."
        ),
    )
    def post(self, request: Request) -> Response:
        tasks.queue_inventory_sync()
        return Response({"queued": True}, status=status.HTTP_202_ACCEPTED)
