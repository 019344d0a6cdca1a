"""The insights over the API: a pool's indicators, the advisor and its dismissals, the
workload profiles; bad input refused with the field named."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from pools.models import AdviceDismissal, AuditEvent, GpuPod
from tests.api.conftest import api
from tests.insights import scenarios

pytestmark = pytest.mark.django_db


def test_pool_insights_answer_the_known_queue(token_for) -> None:  # type: ignore[no-untyped-def]
    scenarios.queue()
    response = api(token_for("viewers")).get("/api/v1/pools/queue/insights/?days=30")
    assert response.status_code == 200
    body = response.json()
    assert body["window"]["days"] == 30
    assert body["queue"]["queued"] == 20
    assert body["queue"]["by_cause"]["restricted"]["count"] == 20
    assert body["queue"]["growing"] is True
    assert body["utilisation"]["target"] == 60
    # No Prometheus here: the utilisation says why it has no figures, the rest stands.
    assert body["utilisation"]["average"] is None and body["utilisation"]["metrics_error"]
    assert body["replacement"]["level"] == "low"
    checks = {c["name"]: c["status"] for c in body["readiness"]}
    assert checks["labels_taints"] == "pass"
    assert checks["system_reserved"] == "pass"  # the stored nodes reserve 1 CPU, 24 GiB
    assert set(checks) == {
        "labels_taints",
        "workloads_declare",
        "system_reserved",
        "metrics",
        "recognised",
        "loans",
    }


def test_a_mig_pools_insights_say_the_share_of_its_instances_held(token_for) -> None:  # type: ignore[no-untyped-def]
    """Without Prometheus the pod history still says how much of the pool was held: for a
    pool of MIG instances, in instances."""
    scenarios.mig_slices()
    body = api(token_for("viewers")).get("/api/v1/pools/slices/insights/?days=30").json()
    u = body["utilisation"]
    assert u["average"] is None and u["metrics_error"]
    assert u["allocated_share"] == pytest.approx((28 + 1 / 24) / 112, rel=0.01)
    assert 0 < u["empty_node_share"] < 1  # the second node runs a job an hour a day
    assert body["queue"]["queued"] == scenarios.DAYS


def test_failure_examples_name_the_pods(token_for) -> None:  # type: ignore[no-untyped-def]
    scenarios.oom()
    body = api(token_for("viewers")).get("/api/v1/pools/oom/insights/").json()
    assert body["failures"]["counts"] == {
        "oom": 9,
        "gpu_fault": 0,
        "image": 1,
        "resources": 0,
        "eviction": 0,
        "timeout": 0,
        "other": 0,
    }
    assert body["failures"]["examples"]["image"][0]["reason"] == "ErrImagePull"


@pytest.mark.parametrize("query", ["days=8", "days=x", "days=-30"])
def test_a_window_other_than_7_30_or_90_days_is_refused(token_for, query: str) -> None:  # type: ignore[no-untyped-def]
    response = api(token_for("viewers")).get(f"/api/v1/pools/mixed/insights/?{query}")
    assert response.status_code == 400
    assert "days" in response.json()["error"]["fields"]


def test_unknown_pool_is_404(token_for) -> None:  # type: ignore[no-untyped-def]
    assert api(token_for("viewers")).get("/api/v1/pools/nope/insights/").status_code == 404


def test_insights_cost_the_same_queries_however_much_history(token_for) -> None:  # type: ignore[no-untyped-def]
    client = api(token_for("viewers"))
    scenarios.idle()
    client.get("/api/v1/advice/")  # the token's last-used stamp is written once a minute
    with CaptureQueriesContext(connection) as small:
        client.get("/api/v1/advice/")
    scenarios.shortage()
    with CaptureQueriesContext(connection) as large:
        moves = [a for a in client.get("/api/v1/advice/").json()["advice"] if a["move"]]
    assert GpuPod.objects.count() > 400
    # Besides the history, each suggested move is checked by the move's own preview: a
    # constant number of queries each, however many nodes and pods.
    assert len(moves) == 1
    # The pools are read once for all of them.
    assert len(large) == len(small) + 1 + PREVIEW_QUERIES * len(moves)


# The move's plan (nodes, pools, their facts, the maintenances that hold its nodes) and its
# impact (the cluster's nodes and pods, the pending queue) for one suggested move.
PREVIEW_QUERIES = 13


def test_advice_dismissed_with_a_reason_stays_hidden_until_the_evidence_changes(
    token_for,  # type: ignore[no-untyped-def]
) -> None:
    scenarios.queue()
    requester, viewer = api(token_for("requesters")), api(token_for("viewers"))
    (lend,) = viewer.get("/api/v1/advice/").json()["advice"]
    assert lend["key"] == "lend:idle+queue"
    assert lend["move"]["nodes"] == ["idle-000"] and lend["move"]["loan_days"] == 7
    assert lend["confidence_level"] in {"low", "medium", "high"}

    refused = viewer.post(
        "/api/v1/advice/dismiss/", {"key": lend["key"], "reason": "no"}, "application/json"
    )
    assert refused.status_code == 403
    empty = requester.post(
        "/api/v1/advice/dismiss/", {"key": lend["key"], "reason": " "}, "application/json"
    )
    assert empty.status_code == 400 and "reason" in empty.json()["error"]["fields"]
    assert not AdviceDismissal.objects.exists()

    done = requester.post(
        "/api/v1/advice/dismiss/",
        {"key": lend["key"], "reason": "the queue pool is being rebuilt"},
        "application/json",
    )
    assert done.status_code == 201 and done.json()["fingerprint"] == lend["fingerprint"]
    assert AuditEvent.objects.filter(action="advice.dismissed").count() == 1
    assert viewer.get("/api/v1/advice/").json()["advice"] == []

    # Twice as many pods wait now: new evidence, the suggestion is back.
    start = scenarios.START
    GpuPod.objects.bulk_create(
        scenarios.pod(
            "queue", "queue-000", start + timedelta(days=d, hours=5), wait=timedelta(hours=1)
        )
        for d in range(1, 29)
    )
    (again,) = viewer.get("/api/v1/advice/").json()["advice"]
    assert again["key"] == lend["key"] and again["fingerprint"] != lend["fingerprint"]


def test_profiles_by_namespace_and_by_team(token_for) -> None:  # type: ignore[no-untyped-def]
    scenarios.idle()
    client = api(token_for("viewers"))
    body = client.get("/api/v1/profiles/?days=30&by=namespace").json()
    assert body["by"] == "namespace"
    (profile,) = body["profiles"]
    assert (profile["owner"], profile["workload_type"]) == ("ml", "training")
    assert profile["pods"] == 6 * 30
    assert profile["gpus_per_pod"]["p50"] == 8
    assert profile["run_seconds"]["p50"] == 3600
    assert profile["concurrency_peak"] == 6
    assert profile["concurrency_typical"] == 0
    assert client.get("/api/v1/profiles/?by=cluster").status_code == 400
