"""The insights' answers, declared for the schema: the bodies are the pure core's documents
(pools.core.insights.documents), these serializers say their shape."""

from __future__ import annotations

from django.shortcuts import get_object_or_404
from django.utils import timezone
from drf_spectacular.utils import extend_schema
from rest_framework import serializers, status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from pools.api.base import READ_ERRORS, WRITE_ERRORS, BaseView, error_responses
from pools.common.roles import Capability
from pools.core.insights import documents
from pools.core.insights.advisor import Rule
from pools.core.insights.failures import Cause
from pools.core.insights.profiles import GROUPINGS
from pools.core.insights.queueing import QueueCause
from pools.core.insights.readiness import Status
from pools.core.insights.records import WINDOW_DAYS
from pools.insights import dismissals, gather
from pools.models import Pool

S = serializers


# A replacement difficulty's level and an advice's confidence level: one choice set, named
# once in the schema (portal/settings.py SPECTACULAR_SETTINGS' ENUM_NAME_OVERRIDES).
LEVELS = ["low", "medium", "high"]


class SpreadSerializer(S.Serializer):  # type: ignore[type-arg]
    count = S.IntegerField()
    min = S.FloatField(allow_null=True)
    p50 = S.FloatField(allow_null=True)
    p90 = S.FloatField(allow_null=True)
    p95 = S.FloatField(allow_null=True)
    max = S.FloatField(allow_null=True)
    mean = S.FloatField(allow_null=True)


class WindowSerializer(S.Serializer):  # type: ignore[type-arg]
    days = S.IntegerField()
    start = S.DateTimeField()
    end = S.DateTimeField()


class UtilisationSerializer(S.Serializer):  # type: ignore[type-arg]
    target = S.FloatField(help_text="The pool's utilisation target, %.")
    average = S.FloatField(allow_null=True, help_text="%, over the window's samples.")
    p95 = S.FloatField(allow_null=True)
    samples = S.IntegerField()
    below_target = S.BooleanField()
    spiky = S.BooleanField()
    idle_node_share = S.FloatField(
        allow_null=True, help_text="Share of the time with at least one whole node idle."
    )
    idle_nodes_mean = S.FloatField(allow_null=True)
    gaps_seconds = SpreadSerializer(help_text="Idle stretches between jobs on a node.")
    clear_gaps = S.BooleanField()
    busy_share = S.FloatField(help_text="Node-time with a job running.")
    empty_node_share = S.FloatField(
        help_text="Share of the time with a node running no job, from the pod history."
    )
    allocated_share = S.FloatField(
        help_text="Share of the GPU-unit time pods held (whole GPUs, MIG instances, shares), "
        "from the pod history: known when Prometheus is not."
    )
    metrics_error = S.CharField(allow_null=True)


class QueueSerializer(S.Serializer):  # type: ignore[type-arg]
    waits_seconds = SpreadSerializer(help_text="Creation to scheduled, every GPU pod.")
    queued = S.IntegerField()
    still_pending = S.IntegerField()
    by_cause = S.DictField(
        child=SpreadSerializer(), help_text=f"Keys: {', '.join(c.value for c in QueueCause)}."
    )
    first_half = S.IntegerField(
        help_text="Pods that queued in the first half of the window's history (from its "
        "first pod on)."
    )
    second_half = S.IntegerField()
    growing = S.BooleanField()
    peak_waiting_gpus = S.IntegerField()


class FailureExampleSerializer(S.Serializer):  # type: ignore[type-arg]
    pod = S.CharField()
    node = S.CharField(allow_blank=True)
    reason = S.CharField(allow_blank=True)
    message = S.CharField(allow_blank=True)
    at = S.DateTimeField(allow_null=True)


class TrendSerializer(S.Serializer):  # type: ignore[type-arg]
    start = S.DateTimeField()
    counts = S.DictField(child=S.IntegerField())


class FailuresSerializer(S.Serializer):  # type: ignore[type-arg]
    total = S.IntegerField()
    pods = S.IntegerField()
    main_cause = S.ChoiceField(choices=[c.value for c in Cause], allow_null=True)
    counts = S.DictField(child=S.IntegerField(), help_text=f"Keys: {', '.join(Cause)}.")
    trend = TrendSerializer(many=True)
    examples = S.DictField(child=FailureExampleSerializer(many=True))


class DimensionSerializer(S.Serializer):  # type: ignore[type-arg]
    name = S.CharField()
    values = S.DictField(child=S.IntegerField())
    odd = S.IntegerField()
    mixed = S.BooleanField()


class ReplacementSerializer(S.Serializer):  # type: ignore[type-arg]
    nodes = S.IntegerField()
    score = S.IntegerField(help_text="0 (alike, nothing by hand) to 100.")
    hand_score = S.IntegerField()
    level = S.ChoiceField(choices=LEVELS)
    dimensions = DimensionSerializer(many=True)
    odd_nodes = S.DictField(child=S.ListField(child=S.CharField()))


class ReadinessCheckSerializer(S.Serializer):  # type: ignore[type-arg]
    name = S.CharField()
    title = S.CharField()
    status = S.ChoiceField(choices=[s.value for s in Status])
    detail = S.CharField()
    concerned = S.ListField(child=S.CharField())


class MemberChangeSerializer(S.Serializer):  # type: ignore[type-arg]
    node = S.CharField()
    joined = S.DateTimeField(allow_null=True, help_text="Null: in the pool before the window.")
    left = S.DateTimeField(allow_null=True, help_text="Null: still in the pool at its end.")


class WindowMembersSerializer(S.Serializer):  # type: ignore[type-arg]
    nodes = S.IntegerField(help_text="Every node the figures count, for the time it was a member.")
    changes = MemberChangeSerializer(many=True)
    assumed_before = S.DateTimeField(
        allow_null=True,
        help_text="Before this moment some member's pool is taken from its earliest record.",
    )


class PoolInsightsSerializer(S.Serializer):  # type: ignore[type-arg]
    pool = S.CharField()
    window = WindowSerializer()
    utilisation = UtilisationSerializer()
    queue = QueueSerializer()
    failures = FailuresSerializer()
    replacement = ReplacementSerializer()
    members = WindowMembersSerializer()
    readiness = ReadinessCheckSerializer(many=True)


class SuggestedMoveSerializer(S.Serializer):  # type: ignore[type-arg]
    source = S.CharField()
    destination = S.CharField()
    nodes = S.ListField(child=S.CharField())
    loan_days = S.IntegerField(allow_null=True)
    reason = S.CharField()
    busy_nodes = S.IntegerField(
        help_text="Of the nodes, those running pods now (they keep running)."
    )
    free_gpus = S.IntegerField(help_text="GPUs free now on the nodes together.")
    would_start = S.ListField(
        child=S.CharField(),
        help_text="Pending pods (namespace/name) the move's preview lets start on the nodes.",
    )
    refusals = S.ListField(
        child=S.CharField(), help_text="Why the request would be refused now (empty: it would not)."
    )


class AdviceSerializer(S.Serializer):  # type: ignore[type-arg]
    key = S.CharField()
    rule = S.ChoiceField(choices=[r.value for r in Rule])
    pools = S.ListField(child=S.CharField())
    title = S.CharField()
    evidence = S.ListField(child=S.CharField())
    confidence = S.FloatField()
    confidence_level = S.ChoiceField(choices=LEVELS)
    fingerprint = S.CharField()
    move = SuggestedMoveSerializer(allow_null=True)


class AdviceListSerializer(S.Serializer):  # type: ignore[type-arg]
    window = WindowSerializer()
    advice = AdviceSerializer(many=True)


class DismissSerializer(S.Serializer):  # type: ignore[type-arg]
    key = S.CharField(max_length=200)
    reason = S.CharField(max_length=2000)
    days = S.ChoiceField(choices=list(WINDOW_DAYS), default=30)


class DismissedSerializer(S.Serializer):  # type: ignore[type-arg]
    key = S.CharField()
    fingerprint = S.CharField()
    reason = S.CharField()


class ProfileSerializer(S.Serializer):  # type: ignore[type-arg]
    owner = S.CharField()
    workload_type = S.CharField(allow_blank=True)
    pods = S.IntegerField()
    gpus_per_pod = SpreadSerializer(help_text="GPU units: whole GPUs, MIG instances or shares")
    framebuffer_mib = S.DictField(child=S.FloatField(), allow_null=True)
    cpu_milli = SpreadSerializer()
    memory_bytes = SpreadSerializer()
    run_seconds = SpreadSerializer()
    concurrency_peak = S.IntegerField()
    concurrency_typical = S.FloatField(allow_null=True)
    restarts = S.IntegerField()
    failures = S.DictField(child=S.IntegerField())


class ProfilesSerializer(S.Serializer):  # type: ignore[type-arg]
    window = WindowSerializer()
    by = S.ChoiceField(choices=list(GROUPINGS))
    profiles = ProfileSerializer(many=True)
    metrics_error = S.CharField(allow_null=True)


class WindowQuerySerializer(S.Serializer):  # type: ignore[type-arg]
    days = S.ChoiceField(choices=list(WINDOW_DAYS), default=30, help_text="The window, in days.")


class ProfilesQuerySerializer(WindowQuerySerializer):
    by = S.ChoiceField(choices=list(GROUPINGS), default="namespace")


def _query(serializer: type[WindowQuerySerializer], request: Request) -> dict:  # type: ignore[type-arg]
    parsed = serializer(data=request.query_params)
    parsed.is_valid(raise_exception=True)
    return dict(parsed.validated_data)


class PoolInsightsView(BaseView, APIView):
    @extend_schema(
        parameters=[WindowQuerySerializer],
        responses={200: PoolInsightsSerializer, **READ_ERRORS, **error_responses(400, 404)},
        description="The pool's four indicators over the window (utilisation against its "
        "target, queue time by cause, failure reasons, replacement difficulty) and its "
        "readiness checks.",
    )
    def get(self, request: Request, name: str) -> Response:
        days = _query(WindowQuerySerializer, request)["days"]
        pool = get_object_or_404(Pool.objects.active(), name=name)
        found, checks = gather.pool_insights(pool, days=days, now=timezone.now())
        return Response(PoolInsightsSerializer(documents.insights_document(found, checks)).data)


class ProfilesView(BaseView, APIView):
    @extend_schema(
        parameters=[ProfilesQuerySerializer],
        responses={200: ProfilesSerializer, **READ_ERRORS, **error_responses(400)},
        description="Per workload class (namespace or team, and workload type): GPUs per "
        "pod, framebuffer used, CPU and memory requested, run time, concurrency, retries "
        "and failures over the window.",
    )
    def get(self, request: Request) -> Response:
        query = _query(ProfilesQuerySerializer, request)
        found = gather.profiles(days=query["days"], by=query["by"], now=timezone.now())
        body = {
            "window": documents.window_document(found.window),
            "by": found.by,
            "profiles": [documents.profile_document(p) for p in found.profiles],
            "metrics_error": found.metrics_error,
        }
        return Response(ProfilesSerializer(body).data)


class AdviceView(BaseView, APIView):
    @extend_schema(
        parameters=[WindowQuerySerializer],
        responses={200: AdviceListSerializer, **READ_ERRORS, **error_responses(400)},
        description="The advisor's suggestions, the most confident first, without those "
        "dismissed on the same evidence. A suggested move is asked with POST /api/v1/moves/ "
        "(it still needs someone else's approval).",
    )
    def get(self, request: Request) -> Response:
        days = _query(WindowQuerySerializer, request)["days"]
        now = timezone.now()
        found = gather.advice(days=days, now=now)
        body = {
            "window": documents.window_document(gather.window_of(days, now)),
            "advice": [documents.advice_document(a) for a in found],
        }
        return Response(AdviceListSerializer(body).data)


class AdviceDismissView(BaseView, APIView):
    capabilities = {"POST": Capability.REQUEST_MOVE}

    @extend_schema(
        request=DismissSerializer,
        responses={201: DismissedSerializer, **WRITE_ERRORS},
        description="Dismiss a suggestion with a reason: it stays hidden until its evidence "
        "changes.",
    )
    def post(self, request: Request) -> Response:
        parsed = DismissSerializer(data=request.data)
        parsed.is_valid(raise_exception=True)
        data = parsed.validated_data
        dismissal = dismissals.advice_dismiss(
            key=data["key"],
            reason=data["reason"],
            user=request.user,
            days=int(data["days"]),
            now=timezone.now(),
        )
        body = {
            "key": dismissal.key,
            "fingerprint": dismissal.fingerprint,
            "reason": dismissal.reason,
        }
        return Response(DismissedSerializer(body).data, status=status.HTTP_201_CREATED)
