"""A pool may not claim the labels and taints other components own (issue 25, R2): refused
by the page (the API: tests/api/test_pool_ownership.py) and the model alike; pools stored
before are reported by /readyz's pool_definitions check and by `manage.py check --deploy`."""

from __future__ import annotations

import io

import pytest
from django.core.management import call_command

from pools.models import Pool
from portal.readiness import check_pool_definitions, readiness_report
from tests.edges.fleet.test_pool_management import FORM, user_in

pytestmark = pytest.mark.django_db

CLAIMING = {
    "kubernetes.io/hostname": "gpu-node-1",
    "nvidia.com/gpu.product": "NVIDIA-A100-SXM4-80GB",
}


def test_the_page_refuses_owned_keys_and_host_names_and_saves_nothing() -> None:
    form = {
        **FORM,
        "name": "grab",
        "labels": "feature.node.kubernetes.io/cpu-model=x\nsite=gpu-17.dc1.example.com",
        "save": "1",
    }
    response = user_in("pool-admins").post("/pools/new/", form)
    assert response.status_code == 400  # refused, the form shown again with why
    html = response.content.decode()
    assert "is owned by Node Feature Discovery" in html
    assert "looks like a host name" in html
    assert not Pool.objects.filter(name="grab").exists()


def stored_before_the_rule() -> None:
    # As a pool saved by an earlier version: written without the model's checks.
    Pool.objects.filter(name="training").update(
        labels={**Pool.objects.get(name="training").labels, **CLAIMING}
    )


def test_readiness_reports_pools_that_claim_owned_keys() -> None:
    assert check_pool_definitions().startswith("no pool claims")
    stored_before_the_rule()
    report = readiness_report(required=[]).as_dict()["checks"]["pool_definitions"]
    assert report["ok"] is False
    assert "pool training: Label key 'kubernetes.io/hostname' is owned by" in report["error"]
    assert "'nvidia.com/gpu.product' is owned by GPU Feature Discovery" in report["error"]


def test_check_deploy_reports_pools_that_claim_owned_keys() -> None:
    out = io.StringIO()
    call_command("check", "--deploy", "--tag", "pools", stdout=out, stderr=out)
    assert "pools.W001" not in out.getvalue()
    stored_before_the_rule()
    call_command("check", "--deploy", "--tag", "pools", stdout=out, stderr=out)
    assert "pool training: (pools.W001) Pool 'training' claims what another component owns" in (
        out.getvalue()
    )
    assert "'kubernetes.io/hostname' is owned by Kubernetes" in out.getvalue()
