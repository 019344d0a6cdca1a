"""Integers only where the API documents a number: DRF would take "600" and 600.0 for 600
(issue 25, R8). Every documented number is sent as a string and as a float; each answer is a
400 naming the field, and nothing is written."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest
from rest_framework import serializers

from pools.api.fields import StrictIntegerField
from pools.maintenance import waves
from pools.models import (
    AuditEvent,
    Booking,
    Drill,
    Maintenance,
    MoveRequest,
    Pool,
    ReclaimPolicy,
)
from tests.api.conftest import api
from tests.api.input_serializers import input_serializers
from tests.factories import demo_inventory
from tests.moves_helpers import user_in

API_DOC = Path(__file__).resolve().parents[2] / "docs" / "api.md"
MOVE = {"nodes": ["a100-reserve-000"], "destination": "training", "reason": "more"}
POOL = {"name": "batch", "display_name": "Batch", "labels": {"workload-type": "batch"}}
DRILL = {"kind": "node_down", "pool": "training", "node": "a100-train-001"}
WAVES = {"pool": "mixed", "wave_size": 1, "step": "driver upgraded", "reason": "driver 570"}
BOOKING = {
    "source": "mixed",
    "destination": "training",
    "gpu_model": "NVIDIA-A100-SXM4-80GB",
    "starts_at": "2030-01-01T00:00:00Z",
    "ends_at": "2030-01-02T00:00:00Z",
    "reason": "evaluation",
}
RECLAIM = "/api/v1/pools/mixed/reclaim/"
POLICY = {"enabled": True, "below_percent": 5.0}
# A path with {maintenance}: a maintenance of the mixed pool is started first.
CONFIRM = "/api/v1/maintenances/{maintenance}/confirm/"

# Each number the API documents in a body: (role, path, body, field, a valid value).
DOCUMENTED = [
    ("pool-admins", "/api/v1/pools/", POOL, "min_nodes", 2),
    ("pool-admins", "/api/v1/pools/", POOL, "approvals_required", 2),
    ("pool-admins", "/api/v1/pools/", POOL, "utilisation_target", 70),
    ("requesters", "/api/v1/moves/", MOVE, "drain_deadline_seconds", 600),
    ("requesters", "/api/v1/moves/dry-run/", MOVE, "drain_deadline_seconds", 600),
    ("approvers", "/api/v1/moves/bulk-approve/", {}, "ids", [1]),
    ("approvers", "/api/v1/moves/bulk-reject/", {"reason": "no"}, "ids", [1]),
    ("pool-admins", "/api/v1/drills/", DRILL, "hold_seconds", 60),
    ("pool-admins", "/api/v1/maintenances/", WAVES, "wave_size", 2),
    ("pool-admins", "/api/v1/maintenances/", WAVES, "count", 2),
    ("pool-admins", "/api/v1/maintenances/", WAVES, "drain_deadline_seconds", 600),
    ("pool-admins", CONFIRM, {}, "wave", 1),
    ("requesters", "/api/v1/bookings/", BOOKING, "gpus", 8),
    ("pool-admins", f"PUT {RECLAIM}", POLICY, "for_hours", 4),
    ("pool-admins", f"PUT {RECLAIM}", POLICY, "grace_hours", 24),
]


def loose(value: object) -> list[object]:
    """The same number as a string and as a float: "600", 600.0 (and ["1"], [1.0] for ids)."""
    if isinstance(value, list):
        return [[str(v) for v in value], [float(v) for v in value]]
    assert isinstance(value, int)
    return [str(value), float(value)]


def written() -> tuple[int, ...]:
    return (
        Pool.objects.count(),
        MoveRequest.objects.count(),
        Drill.objects.count(),
        Maintenance.objects.count(),
        Booking.objects.count(),
        ReclaimPolicy.objects.count(),
        AuditEvent.objects.count(),
    )


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("role", "path", "body", "field", "value"),
    DOCUMENTED,
    ids=[f"{path} {field}" for _, path, _, field, _ in DOCUMENTED],
)
def test_a_documented_number_sent_as_a_string_or_a_float_is_refused_naming_it(  # type: ignore[no-untyped-def]
    token_for: Callable[[str], str], role, path, body, field, value
) -> None:
    demo_inventory()
    if "{maintenance}" in path:
        started = waves.maintenance_start(
            pool=Pool.objects.get(name="mixed"),
            user=user_in("pool-admins", "paula"),
            reason="firmware",
            wave_size=1,
            step="done",
        )
        path = path.format(maintenance=started.pk)
    client = api(token_for(role))
    before = written()
    method, _, path = path.rpartition(" ")
    send = client.put if method == "PUT" else client.post
    for bad in loose(value):
        response = send(path, json.dumps({**body, field: bad}), content_type="application/json")
        assert response.status_code == 400, (bad, response.content)
        fields = response.json()["error"]["fields"]
        assert field in fields, (bad, fields)
        assert "Must be an integer, not a" in json.dumps(fields[field]), (bad, fields)
    assert written() == before


def test_every_documented_number_is_covered_and_documented() -> None:
    """The list above is every integer an input serializer reads, and each is in docs/api.md."""
    doc = API_DOC.read_text()
    covered = {field for *_, field, _ in DOCUMENTED}
    for field in covered:
        assert f"`{field}`" in doc or f'"{field}"' in doc, field
    classes = list(input_serializers().values())
    assert {c.__name__ for c in classes} >= {"DrillStartSerializer", "MoveCreateSerializer"}
    integers, plain = set(), []
    for serializer in classes:
        for name, field in serializer().get_fields().items():
            for f in (field, getattr(field, "child", None)):
                if isinstance(f, serializers.IntegerField) and not field.read_only:
                    integers.add(name)
                    if not isinstance(f, StrictIntegerField):
                        plain.append(f"{serializer.__name__}.{name}")
    assert plain == []
    assert integers == covered
