"""The fit check through the portal (inventory synced from kubesim, the service, the API)
against kubesim's scheduler on the same cluster.

Each case syncs the inventory from a fresh demo cluster, asks the portal's fit check, then
creates the pods in kubesim and reads what its scheduler did: each pod bound to a node the
check named, or Pending with the same reasons on the same number of nodes; for a workload of
N replicas, as many bind as the check said fit now.
"""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest
from django.test import Client
from django.utils import timezone

from pools.fit.pending import SCHEDULER, pending_pods, pool_intruders
from pools.fit.service import PodName, fit_check_run
from pools.inventory import inventory_sync
from pools.models import GpuPod, Pool
from tests.api.conftest import api
from tests.edges.fit.test_fit_kubesim import (
    IN_TRAINING,
    NAMESPACE,
    POOL_KEY,
    TOLERATE_INFERENCE,
    create,
    gpu_pod,
    reasons_of,
)
from tests.kubesim_process import Kubesim
from tests.moves_helpers import user_in

# The cluster is kubesim's API server, then the real control plane with the real
# kube-scheduler deciding.
pytestmark = [pytest.mark.django_db, pytest.mark.both_backends]


UNTOLERATED = "node(s) had untolerated taint"


def in_the_schedulers_words(reasons: dict[str, int]) -> dict[str, int]:
    """Reasons as every scheduler version words them: since Kubernetes 1.34 (kubernetes
    #134740) a pod's status says "node(s) had untolerated taint(s)" without naming the
    taint; the fit check and kubesim (1.32's words) name it. Counts are summed."""
    found: dict[str, int] = {}
    for reason, count in reasons.items():
        key = f"{UNTOLERATED}(s)" if reason.startswith(UNTOLERATED) else reason
        found[key] = found.get(key, 0) + count
    return found


def portal_verdict(manifest: dict[str, Any]):  # type: ignore[no-untyped-def]
    inventory_sync()
    check = fit_check_run(manifest=json.dumps(manifest))
    return check.report.workloads[0]


def asking(name: str, limits: dict[str, str], **placement: Any) -> dict[str, Any]:
    """A pod whose container asks for `limits` (MIG profiles, shared GPUs, ...)."""
    pod = gpu_pod(name, 0, **placement)
    pod["spec"]["containers"][0]["resources"] = {"limits": limits}
    return pod


@pytest.mark.parametrize(
    "pod",
    [
        # No node offers this MIG profile: every node is short of it, as the scheduler says.
        asking(
            "mig-4g-nowhere", {"nvidia.com/mig-4g.71gb": "1"}, tolerations=[{"operator": "Exists"}]
        ),
        asking(
            "gpu-and-profile",
            {"nvidia.com/gpu": "1", "nvidia.com/mig-1g.10gb": "2"},
            selector={POOL_KEY: "mixed"},
        ),
        gpu_pod("mixed-1", 1, selector={POOL_KEY: "mixed"}),
        gpu_pod("anywhere-4", 4),
        gpu_pod("inference-3", 3, selector={POOL_KEY: "inference"}, tolerations=TOLERATE_INFERENCE),
        gpu_pod("new-gpus", 4, expressions=[{"key": POOL_KEY, "operator": "DoesNotExist"}]),
        gpu_pod("everything-8", 8, tolerations=[{"operator": "Exists"}]),
        gpu_pod("train-no-toleration", 2, expressions=IN_TRAINING),
        gpu_pod("sixteen", 16),
        gpu_pod("inference-9", 9, selector={POOL_KEY: "inference"}, tolerations=TOLERATE_INFERENCE),
        gpu_pod("mixed-whole", 8, selector={POOL_KEY: "mixed"}),
    ],
    ids=lambda pod: pod["metadata"]["name"],
)
def test_a_pods_verdict_is_what_kubesims_scheduler_does(
    cluster: Kubesim, pod: dict[str, Any]
) -> None:
    (verdict,) = portal_verdict(pod).cluster
    node, message = create(cluster, pod)
    assert (node is not None) == verdict.fits, (node, message, verdict)
    if node is not None:
        assert node in verdict.nodes_fit
    else:
        assert message.startswith(f"0/{verdict.nodes_total} nodes are available: ")
        assert in_the_schedulers_words(reasons_of(message)) == in_the_schedulers_words(
            dict(verdict.reasons)
        )


DEPLOYMENT = {
    "apiVersion": "apps/v1",
    "kind": "Deployment",
    "metadata": {"name": "chat", "namespace": NAMESPACE},
    "spec": {
        "replicas": 40,
        "selector": {"matchLabels": {"app": "chat"}},
        "template": {
            "metadata": {"labels": {"app": "chat"}},
            "spec": gpu_pod("chat", 2)["spec"],
        },
    },
}


def test_replicas_that_fit_now_are_the_replicas_kubesim_binds(cluster: Kubesim) -> None:
    workload = portal_verdict(DEPLOYMENT)
    (verdict,) = workload.cluster
    bound = 0
    for index in range(40):
        pod = copy.deepcopy(gpu_pod(f"chat-{index}", 2))
        node, _ = create(cluster, pod)
        bound += node is not None
    assert verdict.replicas_fit == bound == 31
    assert not workload.fits_now


def test_the_scheduler_message_of_a_pending_pod_matches_the_check(cluster: Kubesim) -> None:
    inventory_sync()
    big = GpuPod.objects.get(name="big-train")
    assert big.phase == GpuPod.Phase.PENDING and big.unschedulable_message
    check = fit_check_run(pod=PodName(big.namespace, big.name))
    (verdict,) = check.report.workloads[0].cluster
    assert in_the_schedulers_words(reasons_of(big.unschedulable_message)) == (
        in_the_schedulers_words(dict(verdict.reasons))
    )


def test_the_demo_shows_pending_pods_and_intruders(cluster: Kubesim) -> None:
    inventory_sync()
    pending = {f"{p.pod.namespace}/{p.pod.name}": p for p in pending_pods(now=timezone.now())}
    assert set(pending) == {"ml-training/big-train", "ml-training/eval-job-2"}
    assert all(p.reason_from == SCHEDULER for p in pending.values())
    training = pool_intruders(Pool.objects.get(name="training"))
    # The drifted node lacks the training taint: what runs there tolerates nothing.
    assert sorted(i.pod.name for i in training) == [
        "eval-job-0",
        "eval-job-1",
        "finetune-a100-train-drift-000",
    ]
    assert not any(i.node_tainted for i in training)
    assert pool_intruders(Pool.objects.get(name="inference")) == []
    viewer = Client()
    viewer.force_login(user_in("viewers", "vera"))
    html = viewer.get("/pools/training/").content.decode()
    assert 'data-intruder="ml-training/eval-job-0"' in html
    assert 'data-pod="ml-training/big-train"' in html


def test_the_api_and_the_page_answer_as_kubesim_schedules(cluster: Kubesim, token_for) -> None:  # type: ignore[no-untyped-def]
    inventory_sync()
    pod = gpu_pod(
        "inference-4", 4, selector={POOL_KEY: "inference"}, tolerations=TOLERATE_INFERENCE
    )
    response = api(token_for("viewers")).post(
        "/api/v1/fit/", json.dumps({"manifest": json.dumps(pod)}), content_type="application/json"
    )
    assert response.status_code == 200, response.content
    body = response.json()
    pools = {p["pool"]: p for p in body["workloads"][0]["pools"]}
    viewer = Client()
    viewer.force_login(user_in("viewers", "vera"))
    page = viewer.post("/fit/", {"manifest": json.dumps(pod)}).content.decode()
    fitting = len(pools["inference"]["templates"][0]["nodes_fit"])
    assert f"{fitting}/8 nodes can take it" in page
    node, _ = create(cluster, pod)
    assert node in pools["inference"]["templates"][0]["nodes_fit"]
    assert not pools["mixed"]["fits_now"]
