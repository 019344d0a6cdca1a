"""Strings only where the API documents a string: DRF would take 5 for "5"."""

from __future__ import annotations

import json
from collections.abc import Callable

import pytest
from rest_framework import serializers

from pools.models import Drill, MoveRequest, Node, Pool
from tests.api.conftest import api
from tests.api.input_serializers import input_serializers
from tests.factories import demo_inventory

JSON = "application/json"


def post(client, path: str, body: object):  # type: ignore[no-untyped-def]
    return client.post(path, json.dumps(body), content_type=JSON)


POOL = {"name": "batch", "display_name": "Batch", "labels": {"workload-type": "batch"}}


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"name": 5}, "name"),
        ({"display_name": 5}, "display_name"),
        ({"labels": {"workload-type": 5}}, "labels"),
        ({"labels": {"workload-type": True}}, "labels"),
        ({"accepted_gpu_models": [5]}, "accepted_gpu_models"),
    ],
)
def test_a_pool_refuses_numbers_for_strings(
    token_for: Callable[[str], str], change: dict[str, object], field: str
) -> None:
    response = post(api(token_for("pool-admins")), "/api/v1/pools/", {**POOL, **change})
    assert response.status_code == 400, response.content
    error = response.json()["error"]
    assert error["code"] == "validation" and field in error["fields"]
    assert "Must be a string" in json.dumps(error["fields"][field])
    assert not Pool.objects.filter(name__in=["batch", "5"]).exists()


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"reason": 5}, "reason"),
        ({"nodes": [5]}, "nodes"),
        ({"health_override": 5}, "health_override"),
    ],
)
def test_a_move_refuses_numbers_for_strings(
    token_for: Callable[[str], str], change: dict[str, object], field: str
) -> None:
    demo_inventory()
    body = {"nodes": ["a100-reserve-000"], "destination": "training", "reason": "more", **change}
    response = post(api(token_for("requesters")), "/api/v1/moves/", body)
    assert response.status_code == 400, response.content
    assert field in response.json()["error"]["fields"]
    assert not MoveRequest.objects.exists()
    assert Node.objects.exists()


@pytest.mark.django_db
def test_a_drill_refuses_a_number_for_its_node(token_for: Callable[[str], str]) -> None:
    """The drill's node was a plain CharField, which took 5 for "5"."""
    demo_inventory()
    body = {"kind": "node_down", "pool": "training", "node": 5}
    response = post(api(token_for("pool-admins")), "/api/v1/drills/", body)
    assert response.status_code == 400, response.content
    assert "Must be a string" in json.dumps(response.json()["error"]["fields"]["node"])
    assert not Drill.objects.exists()


def test_every_string_the_api_takes_is_strict() -> None:
    """The rule's one place: no body is read through a plain CharField."""
    classes = input_serializers()
    names = set(classes)
    assert {"MoveCreateSerializer", "DryRunSerializer", "DecisionSerializer"} <= names
    loose = []
    for name in sorted(names):
        for field_name, field in classes[name]().get_fields().items():
            for f in (field, getattr(field, "child", None)):
                if type(f) is serializers.CharField and not field.read_only:
                    loose.append(f"{name}.{field_name}")
    assert loose == []
