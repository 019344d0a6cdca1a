"""The fit check's verdict on pods with ResourceClaims, against the real kube-scheduler.

The test plays NVIDIA's DRA driver on two of the demo scenario's nodes: it creates the
driver's DeviceClasses and publishes a ResourceSlice for each node (four H100s on one, two
A100s and two MIG slices on the other). The portal lists them through its inventory sync,
and each case asks the fit check, then creates the ResourceClaimTemplate and the pod: the
real resourceclaim controller makes the claim, the real scheduler allocates it or says why
not. Kubesim's own API server does not serve `resource.k8s.io`, so the check is proven
here only.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes import client
from kubernetes.client.rest import ApiException

from pools.fit.service import fit_check_run
from pools.inventory import inventory_sync
from tests.core.dra.slices import GPU_CLASS, MIG_CLASS, gpu, mig
from tests.real_cluster import RealCluster

pytestmark = [pytest.mark.django_db, pytest.mark.kubernetes]

NAMESPACE = "dra-check"
DRIVER = "gpu.nvidia.com"


def _slice(node: str, devices: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceSlice",
        "metadata": {"name": f"{node}-gpu.nvidia.com"},
        "spec": {
            "driver": DRIVER,
            "nodeName": node,
            "pool": {"name": node, "generation": 1, "resourceSliceCount": 1},
            "devices": devices,
        },
    }


@pytest.fixture
def dra(real: RealCluster, settings) -> Iterator[tuple[RealCluster, list[str]]]:  # type: ignore[no-untyped-def]
    settings.KUBECONFIG = str(real.kubeconfig)
    settings.KUBE_CONTEXT = ""
    settings.KUBE_IN_CLUSTER = False
    api = client.ResourceV1Api(real.api_client())
    core = real.core()
    ready = sorted(
        n.metadata.name
        for n in core.list_node().items
        if not n.spec.unschedulable
        and any(c.type == "Ready" and c.status == "True" for c in n.status.conditions or [])
    )
    nodes = ready[:2]
    slices = [
        _slice(nodes[0], [gpu(i) for i in range(4)]),
        _slice(
            nodes[1],
            [gpu(0, "NVIDIA A100"), gpu(1, "NVIDIA A100"), mig(0, 2), mig(1, 2)],
        ),
    ]
    for device_class in (GPU_CLASS, MIG_CLASS):
        api.create_device_class(
            {"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", **device_class}
        )
    for item in slices:
        api.create_resource_slice(item)
    try:
        core.create_namespace({"metadata": {"name": NAMESPACE}})
    except ApiException as error:
        if error.status != 409:
            raise
    try:
        yield real, nodes
    finally:
        core.delete_collection_namespaced_pod(NAMESPACE, grace_period_seconds=0)
        api.delete_collection_namespaced_resource_claim_template(NAMESPACE)
        wait_until(lambda: not core.list_namespaced_pod(NAMESPACE).items, "pods gone")
        api.delete_collection_namespaced_resource_claim(NAMESPACE)
        wait_until(lambda: not api.list_namespaced_resource_claim(NAMESPACE).items, "claims gone")
        for item in slices:
            api.delete_resource_slice(item["metadata"]["name"])
        for device_class in (GPU_CLASS, MIG_CLASS):
            api.delete_device_class(device_class["metadata"]["name"])


def wait_until(done: Any, what: str, seconds: float = 60) -> None:
    deadline = time.monotonic() + seconds
    while not done():
        if time.monotonic() > deadline:
            raise AssertionError(f"waited {seconds:.0f} s for {what}")
        time.sleep(0.2)


def template(name: str, requests: list[dict[str, Any]], constraints: list[Any] | None = None):  # type: ignore[no-untyped-def]
    devices: dict[str, Any] = {"requests": requests}
    if constraints:
        devices["constraints"] = constraints
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaimTemplate",
        "metadata": {"name": name, "namespace": NAMESPACE},
        "spec": {"spec": {"devices": devices}},
    }


def claim_pod(name: str, template_name: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": NAMESPACE},
        "spec": {
            "containers": [
                {"name": "main", "image": "trainer:1", "resources": {"claims": [{"name": "gpu"}]}}
            ],
            "resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": template_name}],
            "tolerations": [{"operator": "Exists"}],
        },
    }


def exactly(cls: str = "gpu.nvidia.com", **more: Any) -> dict[str, Any]:
    return {"name": "gpu", "exactly": {"deviceClassName": cls, **more}}


CASES = {
    "one-gpu": [exactly()],
    "four-gpus": [exactly(count=4)],
    "five-gpus": [exactly(count=5)],
    "no-such-class": [exactly(cls="tpu.example.com")],
    "all-mig": [exactly(cls="mig.nvidia.com", allocationMode="All")],
    "big-memory": [
        exactly(
            selectors=[
                {
                    "cel": {
                        "expression": 'device.capacity["gpu.nvidia.com"].memory'
                        '.compareTo(quantity("64Gi")) >= 0 && device.attributes'
                        '["gpu.nvidia.com"].productName == "NVIDIA A100"'
                    }
                }
            ],
            count=2,
        )
    ],
    "three-of-a-kind": [exactly(count=3)],
    "either": [
        {
            "name": "gpu",
            "firstAvailable": [
                {"name": "h100s", "deviceClassName": "gpu.nvidia.com", "count": 6},
                {"name": "slices", "deviceClassName": "mig.nvidia.com", "count": 2},
            ],
        }
    ],
}
CONSTRAINTS = {"three-of-a-kind": [{"matchAttribute": "gpu.nvidia.com/productName"}]}


def scheduled(real: RealCluster, pod: dict[str, Any]) -> tuple[str | None, str]:
    """The node the real scheduler bound the pod to, or None and its Unschedulable text."""
    core = real.core()
    name, namespace = pod["metadata"]["name"], pod["metadata"]["namespace"]
    found: dict[str, Any] = {}

    def decided() -> bool:
        created = core.read_namespaced_pod(name, namespace)
        if created.spec.node_name:
            found["node"] = created.spec.node_name
            return True
        for condition in created.status.conditions or []:
            if condition.type == "PodScheduled" and condition.reason == "Unschedulable":
                found["message"] = condition.message
                return True
        return False

    wait_until(decided, f"the scheduler's decision on {name}")
    return found.get("node"), found.get("message", "")


@pytest.mark.parametrize("case", sorted(CASES))
def test_a_claims_verdict_is_what_the_real_scheduler_does(dra, case: str) -> None:  # type: ignore[no-untyped-def]
    real, dra_nodes = dra
    wanted = template(f"{case}-claim", CASES[case], CONSTRAINTS.get(case))
    pod = claim_pod(case, wanted["metadata"]["name"])
    inventory_sync()  # nodes, pods, and DRA's objects
    check = fit_check_run(
        manifest=json.dumps({"kind": "List", "apiVersion": "v1", "items": [wanted, pod]})
    )
    (verdict,) = check.report.workloads[0].cluster
    client.ResourceV1Api(real.api_client()).create_namespaced_resource_claim_template(
        NAMESPACE, wanted
    )
    real.core().create_namespaced_pod(NAMESPACE, pod)
    node, message = scheduled(real, pod)
    assert (node is not None) == verdict.fits, (node, message, verdict)
    if node is not None:
        assert node in verdict.nodes_fit and set(verdict.nodes_fit) <= set(dra_nodes)
    else:
        # Word for word: the plugin's reasons, their counts, and the preemption's verdict.
        assert message == verdict.scheduler_message


def test_the_inventory_counts_dra_devices_and_what_claims_hold(dra, token_for) -> None:  # type: ignore[no-untyped-def]
    from django.test import Client

    from pools.models import Node
    from tests.moves_helpers import user_in

    real, (h100s, mixed) = dra
    inventory_sync()
    assert Node.objects.get(name=h100s).dra_units == [["gpu.nvidia.com", "gpu", "", 4, 0]]
    assert Node.objects.get(name=mixed).dra_units == [
        ["gpu.nvidia.com", "gpu", "", 2, 0],
        ["gpu.nvidia.com", "mig", "1g.10gb", 2, 0],
    ]
    wanted = template("two-gpus", [exactly(count=2)])
    client.ResourceV1Api(real.api_client()).create_namespaced_resource_claim_template(
        NAMESPACE, wanted
    )
    pod = claim_pod("holder", "two-gpus")
    real.core().create_namespaced_pod(NAMESPACE, pod)
    node, message = scheduled(real, pod)
    assert node in (h100s, mixed), message
    inventory_sync()
    held = {tuple(u[:3]): u[4] for u in Node.objects.get(name=node).dra_units}
    assert held[("gpu.nvidia.com", "gpu", "")] == 2
    # The API gives the node's DRA devices as units of their own kind, beside its GPUs.
    body = (
        Client(HTTP_AUTHORIZATION=f"Bearer {token_for('viewers')}")
        .get(f"/api/v1/nodes/{node}/")
        .json()
    )
    [gpus] = [u for u in body["devices"]["units"] if u["label"] == "DRA GPU (gpu.nvidia.com)"]
    assert (gpus["kind"], gpus["allocated"]) == ("dra", 2)
    # The node page names them too.
    page = Client()
    page.force_login(user_in("viewers", "dra-viewer"))
    assert "DRA GPU (gpu.nvidia.com)" in page.get(f"/nodes/{node}/").content.decode()
    # The node's slices gone, its units go at the next listing.
    api = client.ResourceV1Api(real.api_client())
    api.delete_resource_slice(f"{h100s}-gpu.nvidia.com")
    api.create_resource_slice(_slice(h100s, []))  # put back empty, for the fixture to delete
    inventory_sync()
    assert Node.objects.get(name=h100s).dra_units == []
