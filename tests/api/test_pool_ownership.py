"""`POST /api/v1/pools/` refuses label and taint keys other components own (issue 25, R2)."""

from __future__ import annotations

import json

import pytest

from pools.models import Pool
from tests.api.conftest import api
from tests.fleet.test_pool_ownership import CLAIMING

pytestmark = pytest.mark.django_db


def test_the_api_refuses_owned_keys_naming_the_field_and_each_owner(token_for):  # type: ignore[no-untyped-def]
    body = {
        "name": "grab",
        "display_name": "Grab",
        "labels": CLAIMING,
        "taint_key": "node.kubernetes.io/gpu",
        "taint_value": "true",
        "taint_effect": "NoSchedule",
    }
    response = api(token_for("pool-admins")).post(
        "/api/v1/pools/", json.dumps(body), content_type="application/json"
    )
    assert response.status_code == 400, response.content
    fields = response.json()["error"]["fields"]
    labels = " ".join(fields["labels"])
    assert "'kubernetes.io/hostname' is owned by Kubernetes and the kubelet" in labels
    assert "'nvidia.com/gpu.product' is owned by GPU Feature Discovery" in labels
    assert "owned by the kubelet and the node lifecycle controller" in " ".join(fields["taint_key"])
    assert not Pool.objects.filter(name="grab").exists()
