"""The drills over the API: a drill with its result, and what starting one takes."""

from __future__ import annotations

from rest_framework import serializers as S

from pools.api.fields import StrictIntegerField
from pools.core.insights.drills import MAX_HOLD_SECONDS
from pools.models import Drill, Pool

DEFAULT_HOLD_SECONDS = 60


class DrillCheckSerializer(S.Serializer):  # type: ignore[type-arg]
    name = S.CharField()
    title = S.CharField()
    status = S.ChoiceField(choices=["pass", "fail", "unknown"])
    detail = S.CharField()


class DrillSerializer(S.ModelSerializer):  # type: ignore[type-arg]
    pool = S.SlugRelatedField(slug_field="name", read_only=True)
    node = S.CharField(source="node_name", read_only=True)
    started_by = S.SlugRelatedField(slug_field="username", read_only=True)
    checks = DrillCheckSerializer(many=True, read_only=True)
    observed = S.DictField(
        read_only=True, help_text="What the drill saw before and during the hold, by kind."
    )

    class Meta:
        model = Drill
        fields = [
            "id",
            "kind",
            "pool",
            "node",
            "state",
            "hold_seconds",
            "started_by",
            "started_at",
            "ends_at",
            "finished_at",
            "checks",
            "observed",
            "error",
        ]
        read_only_fields = fields


class DrillStartSerializer(S.Serializer):  # type: ignore[type-arg]
    kind = S.ChoiceField(choices=Drill.Kind.choices)
    pool = S.SlugRelatedField(
        slug_field="name",
        queryset=Pool.objects.active(),
        error_messages={"does_not_exist": "No active pool is named {value}."},
    )
    node = S.CharField(
        max_length=253,
        required=False,
        default="",
        allow_blank=True,
        help_text="A node of the pool (node_down, gpu_fault); none for node_joins, which adds "
        "its own.",
    )
    hold_seconds = StrictIntegerField(
        default=DEFAULT_HOLD_SECONDS,
        max_value=MAX_HOLD_SECONDS,
        help_text="How long the change lasts; node_joins needs at least one inventory sync "
        "(INVENTORY_SYNC_SECONDS).",
    )
