"""The fit check over the API: will this manifest, or this Pending pod, land, and if not why."""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import (
    extend_schema,
)
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from pools.api.base import BaseView, error_responses, validated
from pools.api.fields import StrictCharField
from pools.core.cluster_scope import any_cluster
from pools.fit.fleet import fleet_fit_run
from pools.fit.service import PodName, fit_check_run


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


class FitView(BaseView, APIView):
    @extend_schema(
        request=FitRequestSerializer,
        responses={200: FitResultSerializer, **error_responses(400, 401, 403, 415, 429)},
        description="Will this manifest (YAML or JSON) or this pod land, in which pool, and "
        "if not, why: the scheduler's verdict per pool, gang capacity, warnings and the fix. "
        "Reads only.",
    )
    def post(self, request: Request) -> Response:
        data = validated(FitRequestSerializer, request)
        pod = data.get("pod")
        check = fit_check_run(
            manifest=data.get("manifest"),
            pod=PodName(pod["namespace"], pod["name"]) if pod else None,
        )
        return Response(check.as_dict())


class FleetFitRequestSerializer(serializers.Serializer):  # type: ignore[type-arg]
    manifest = StrictCharField(trim_whitespace=False, max_length=1_000_000, allow_blank=False)


class ClusterFitSerializer(serializers.Serializer):  # type: ignore[type-arg]
    cluster = serializers.CharField()
    fits_now = serializers.BooleanField(help_text="Every workload finds room now in it.")
    pools_fitting_now = serializers.ListField(child=serializers.CharField())
    pools_with_a_fix = serializers.ListField(child=serializers.CharField())
    report = FitResultSerializer(help_text="The cluster's own fit check, as POST /api/v1/fit/.")


@any_cluster
class FleetFitView(BaseView, APIView):
    @extend_schema(
        request=FleetFitRequestSerializer,
        responses={
            200: ClusterFitSerializer(many=True),
            **error_responses(400, 401, 403, 415, 429),
        },
        description="Which cluster and pool will take this manifest: the fit check in every "
        "cluster served, those where it lands now first, each with its pools and fixes. "
        "Reads only.",
    )
    def post(self, request: Request) -> Response:
        data = validated(FleetFitRequestSerializer, request)
        fits = fleet_fit_run(manifest=data["manifest"])
        return Response([fit.as_dict() for fit in fits])
