"""The fit check of a manifest with claims through the portal: the DRA state kept by the
inventory's listing (one row), read once per listing and process."""

from __future__ import annotations

import json

import pytest
from django.utils import timezone

from pools.models import DraSnapshot, Node
from tests.api.conftest import api
from tests.core.dra.slices import GPU_CLASS, gpu, node_slice
from tests.factories import demo_inventory

pytestmark = pytest.mark.django_db

CLAIMING = {
    "apiVersion": "v1",
    "kind": "List",
    "items": [
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "ResourceClaimTemplate",
            "metadata": {"name": "two", "namespace": "research"},
            "spec": {
                "spec": {
                    "devices": {
                        "requests": [
                            {
                                "name": "gpu",
                                "exactly": {"deviceClassName": "gpu.nvidia.com", "count": 2},
                            }
                        ]
                    }
                }
            },
        },
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": "claims", "namespace": "research"},
            "spec": {
                "containers": [
                    {"name": "c", "image": "x", "resources": {"claims": [{"name": "g"}]}}
                ],
                "resourceClaims": [{"name": "g", "resourceClaimTemplateName": "two"}],
                "tolerations": [{"operator": "Exists"}],
            },
        },
    ],
}


def listing(node: str, gpus: int) -> None:
    DraSnapshot.objects.update_or_create(
        name="cluster",
        defaults={
            "served": True,
            "slices": [node_slice(node, [gpu(i) for i in range(gpus)])],
            "classes": [GPU_CLASS],
            "claims": [],
            "templates": [],
            "listed_at": timezone.now(),
        },
    )


def test_a_claim_check_reads_the_listing_once_per_listing(
    token_for, django_assert_num_queries, settings
):  # type: ignore[no-untyped-def]
    settings.API_TOKEN_CACHE_SECONDS = 0
    demo_inventory()
    node = Node.objects.present().order_by("name").first().name
    listing(node, 2)
    client = api(token_for("viewers"))
    body = json.dumps({"manifest": json.dumps(CLAIMING)})
    first = client.post("/api/v1/fit/", body, content_type="application/json")
    assert first.status_code == 200, first.content
    [verdict] = first.json()["workloads"][0]["cluster"]
    assert verdict["nodes_fit"] == [node]
    # The five of every check (the token with its user, the groups, then pools, nodes and
    # GPU pods) and the listing's stamp: the state itself is the one read before.
    with django_assert_num_queries(6):
        client.post("/api/v1/fit/", body, content_type="application/json")
    listing(node, 1)  # a new listing: read once more, and its answer is the new one's
    with django_assert_num_queries(7):
        again = client.post("/api/v1/fit/", body, content_type="application/json")
    [verdict] = again.json()["workloads"][0]["cluster"]
    assert verdict["nodes_fit"] == [] and "cannot allocate all claims" in verdict["message"]


def test_a_check_without_claims_does_not_read_the_listing(
    token_for, django_assert_num_queries, settings
):  # type: ignore[no-untyped-def]
    from tests.fit.test_service import DEPLOYMENT

    settings.API_TOKEN_CACHE_SECONDS = 0
    demo_inventory()
    listing("a100-reserve-000", 2)
    client = api(token_for("viewers"))
    body = json.dumps({"manifest": DEPLOYMENT})
    client.post("/api/v1/fit/", body, content_type="application/json")
    with django_assert_num_queries(5) as counted:
        client.post("/api/v1/fit/", body, content_type="application/json")
    assert not any("drasnapshot" in q["sql"] for q in counted.captured_queries)


def test_the_fit_page_names_the_nodes_a_claim_lands_on_and_why_no_pool_can_be_fixed() -> None:
    from html import unescape

    from django.test import Client

    from pools.models import Pool
    from tests.moves_helpers import user_in

    demo_inventory()
    node = Node.objects.present().order_by("name").first()
    listing(node.name, 2)
    page = Client()
    page.force_login(user_in("viewers", "dra-page"))
    html = unescape(page.post("/fit/", {"manifest": json.dumps(CLAIMING)}).content.decode())
    verdict = html.split("data-cluster-verdict>")[1].split("</p>")[0]
    assert f"<span data-nodes-fit>{node.name}</span>" in verdict, verdict
    reason = "none can work: no node here has DRA devices that could take its claims"
    others = Pool.objects.active().exclude(pk=node.pool_id).count()
    assert html.count(reason) == others
    # The model's reason is for a pod asking for a GPU model by label, not here.
    assert "no node here has the GPU model asked for" not in html
