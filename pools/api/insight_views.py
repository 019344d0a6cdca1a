"""The insights over the API: workload profiles, a pool's indicators and readiness, the
advisor's suggestions and their dismissal. Thin: parse, call pools.insights, shape."""

from __future__ import annotations

from django.shortcuts import get_object_or_404
from django.utils import timezone
from drf_spectacular.utils import extend_schema
from rest_framework import status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from pools import insights
from pools.api import insight_serializers as s
from pools.api.views import READ_ERRORS, WRITE_ERRORS, BaseView, errors
from pools.common.roles import Capability
from pools.core.insights import documents
from pools.insights import advice
from pools.models import Pool


def _query(serializer: type[s.WindowQuerySerializer], request: Request) -> dict:  # type: ignore[type-arg]
    parsed = serializer(data=request.query_params)
    parsed.is_valid(raise_exception=True)
    return dict(parsed.validated_data)


class PoolInsightsView(BaseView, APIView):
    @extend_schema(
        parameters=[s.WindowQuerySerializer],
        responses={200: s.PoolInsightsSerializer, **READ_ERRORS, **errors(400, 404)},
        description="The pool's four indicators over the window (utilisation against its "
        "target, queue time by cause, failure reasons, replacement difficulty) and its "
        "readiness checks.",
    )
    def get(self, request: Request, name: str) -> Response:
        days = _query(s.WindowQuerySerializer, request)["days"]
        pool = get_object_or_404(Pool.objects.active(), name=name)
        found, checks = insights.pool_insights(pool, days=days, now=timezone.now())
        return Response(s.PoolInsightsSerializer(documents.insights_document(found, checks)).data)


class ProfilesView(BaseView, APIView):
    @extend_schema(
        parameters=[s.ProfilesQuerySerializer],
        responses={200: s.ProfilesSerializer, **READ_ERRORS, **errors(400)},
        description="Per workload class (namespace or team, and workload type): GPUs per "
        "pod, framebuffer used, CPU and memory requested, run time, concurrency, retries "
        "and failures over the window.",
    )
    def get(self, request: Request) -> Response:
        query = _query(s.ProfilesQuerySerializer, request)
        found = insights.profiles(days=query["days"], by=query["by"], now=timezone.now())
        body = {
            "window": documents.window_document(found.window),
            "by": found.by,
            "profiles": [documents.profile_document(p) for p in found.profiles],
            "metrics_error": found.metrics_error,
        }
        return Response(s.ProfilesSerializer(body).data)


class AdviceView(BaseView, APIView):
    @extend_schema(
        parameters=[s.WindowQuerySerializer],
        responses={200: s.AdviceListSerializer, **READ_ERRORS, **errors(400)},
        description="The advisor's suggestions, the most confident first, without those "
        "dismissed on the same evidence. A suggested move is asked with POST /api/v1/moves/ "
        "(it still needs someone else's approval).",
    )
    def get(self, request: Request) -> Response:
        days = _query(s.WindowQuerySerializer, request)["days"]
        now = timezone.now()
        found = insights.advice(days=days, now=now)
        body = {
            "window": documents.window_document(insights.window_of(days, now)),
            "advice": [documents.advice_document(a) for a in found],
        }
        return Response(s.AdviceListSerializer(body).data)


class AdviceDismissView(BaseView, APIView):
    capabilities = {"POST": Capability.REQUEST_MOVE}

    @extend_schema(
        request=s.DismissSerializer,
        responses={201: s.DismissedSerializer, **WRITE_ERRORS},
        description="Dismiss a suggestion with a reason: it stays hidden until its evidence "
        "changes.",
    )
    def post(self, request: Request) -> Response:
        parsed = s.DismissSerializer(data=request.data)
        parsed.is_valid(raise_exception=True)
        data = parsed.validated_data
        dismissal = advice.advice_dismiss(
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
        return Response(s.DismissedSerializer(body).data, status=status.HTTP_201_CREATED)
