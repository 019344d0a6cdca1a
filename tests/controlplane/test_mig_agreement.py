"""The fit check's verdict on pods asking for MIG instances and shared GPUs, against the
real kube-scheduler.

The test plays NVIDIA's device plugin on two of the demo scenario's nodes, as it runs with
the GPU Operator's mixed MIG strategy (each profile a resource of its own,
`nvidia.com/mig-1g.10gb`, …) and with a sharing configuration that renames its replicas
(`nvidia.com/gpu.shared`): it writes them into the nodes' capacity and allocatable, where the
kubelet puts what a device plugin advertises. The portal reads them through its inventory
sync; each case asks the portal's fit check, then creates the pod for the real scheduler.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes.client.rest import ApiException

from pools.fit.service import fit_check_run
from pools.inventory import inventory_sync
from pools.models import GpuPod
from tests.controlplane.test_dra_agreement import scheduled, wait_until
from tests.real_cluster import RealCluster

pytestmark = [pytest.mark.django_db, pytest.mark.kubernetes]

NAMESPACE = "mig-check"
SLICE = "nvidia.com/mig-1g.10gb"
BIG_SLICE = "nvidia.com/mig-3g.40gb"
SHARED = "nvidia.com/gpu.shared"
# What the device plugin advertises on each of the two nodes.
ADVERTISED = ({SLICE: "7", BIG_SLICE: "1"}, {SHARED: "4"})


def unit_pod(name: str, limits: dict[str, str]) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": NAMESPACE},
        "spec": {
            "containers": [{"name": "main", "image": "serve:1", "resources": {"limits": limits}}],
            "tolerations": [{"operator": "Exists"}],
        },
    }


def _bound_eventually(real: RealCluster, name: str, limits: dict[str, str]) -> str:
    """Create a pod and wait until it is bound: the scheduler retries an unschedulable pod
    when a node changes, so once it is bound the scheduler has seen the nodes' new
    resources (its cache lags the API server by a moment)."""
    real.core().create_namespaced_pod(NAMESPACE, unit_pod(name, limits))

    def bound() -> bool:
        return bool(real.core().read_namespaced_pod(name, NAMESPACE).spec.node_name)

    wait_until(bound, f"{name} bound once the scheduler sees the advertised units")
    return str(real.core().read_namespaced_pod(name, NAMESPACE).spec.node_name)


def _advertise(real: RealCluster, node: str, resources: dict[str, str | None]) -> None:
    body = {"status": {"capacity": resources, "allocatable": resources}}
    real.core().patch_node_status(node, body)


@pytest.fixture
def devices(real: RealCluster, settings) -> Iterator[tuple[RealCluster, list[str]]]:  # type: ignore[no-untyped-def]
    settings.KUBECONFIG = str(real.kubeconfig)
    settings.KUBE_CONTEXT = ""
    settings.KUBE_IN_CLUSTER = False
    core = real.core()
    ready = sorted(
        n.metadata.name
        for n in core.list_node().items
        if not n.spec.unschedulable
        and any(c.type == "Ready" and c.status == "True" for c in n.status.conditions or [])
    )
    nodes = ready[:2]
    try:
        core.create_namespace({"metadata": {"name": NAMESPACE}})
    except ApiException as error:
        if error.status != 409:
            raise
    try:
        for node, resources in zip(nodes, ADVERTISED, strict=True):
            _advertise(real, node, dict(resources))
        for probe, limits in (("probe-slice", {SLICE: "1"}), ("probe-share", {SHARED: "1"})):
            _bound_eventually(real, probe, limits)
            core.delete_namespaced_pod(probe, NAMESPACE, grace_period_seconds=0)
        wait_until(lambda: not core.list_namespaced_pod(NAMESPACE).items, "the probes gone")
        yield real, nodes
    finally:
        core.delete_collection_namespaced_pod(NAMESPACE, grace_period_seconds=0)
        wait_until(lambda: not core.list_namespaced_pod(NAMESPACE).items, "pods gone")
        for node, resources in zip(nodes, ADVERTISED, strict=True):
            _advertise(real, node, dict.fromkeys(resources))  # null: the key removed


CASES = {
    "one-slice": {SLICE: "1"},
    "every-slice": {SLICE: "7"},
    "more-slices-than-a-node-has": {SLICE: "8"},
    "a-bigger-slice": {BIG_SLICE: "1"},
    "two-bigger-slices": {BIG_SLICE: "2"},
    "a-profile-no-node-offers": {"nvidia.com/mig-7g.80gb": "1"},
    "shares": {SHARED: "4"},
    "more-shares-than-a-node-has": {SHARED: "5"},
    "a-slice-and-a-share": {SLICE: "1", SHARED: "1"},
}


def _verdict(pod: dict[str, Any]) -> Any:
    inventory_sync()
    check = fit_check_run(manifest=json.dumps(pod))
    (verdict,) = check.report.workloads[0].cluster
    return verdict


def _assert_agrees(real: RealCluster, pod: dict[str, Any]) -> tuple[str | None, Any]:
    verdict = _verdict(pod)
    real.core().create_namespaced_pod(NAMESPACE, pod)
    node, message = scheduled(real, pod)
    name = pod["metadata"]["name"]
    assert (node is not None) == verdict.fits, (name, node, message, verdict)
    if node is not None:
        assert node in verdict.nodes_fit, name
    else:
        # Word for word: the reasons, their counts, and the preemption's verdict.
        assert message == verdict.scheduler_message, name
    return node, verdict


def test_verdicts_on_mig_instances_and_shares_are_the_real_schedulers(devices) -> None:  # type: ignore[no-untyped-def]
    """Each case on the same two nodes, its pod deleted once the scheduler has decided (one
    control-plane reset for all: a reset costs more than a case)."""
    real, (slices_node, shared_node) = devices
    core = real.core()
    # Where each case lands (None: nowhere), so agreeing on "no" everywhere cannot pass.
    lands = {
        "one-slice": slices_node,
        "every-slice": slices_node,
        "a-bigger-slice": slices_node,
        "shares": shared_node,
    }
    for case, limits in CASES.items():
        node, verdict = _assert_agrees(real, unit_pod(case, limits))
        assert node == lands.get(case), (case, node)
        if node is not None:
            assert verdict.nodes_fit == (node,), case
        core.delete_namespaced_pod(case, NAMESPACE, grace_period_seconds=0)
        wait_until(lambda: not core.list_namespaced_pod(NAMESPACE).items, f"{case} gone")


def test_what_running_pods_hold_of_mig_instances_is_counted(devices) -> None:  # type: ignore[no-untyped-def]
    """Five of seven instances held by a pod the inventory keeps as a GPU pod: three more do
    not fit, two do, as the real scheduler says."""
    real, (slices_node, _) = devices
    assert _bound_eventually(real, "holder", {SLICE: "5"}) == slices_node
    inventory_sync()
    holder = GpuPod.objects.get(namespace=NAMESPACE, name="holder")
    assert (holder.gpus, holder.units, holder.unit_requests) == (0, 5, {SLICE: 5})
    node, verdict = _assert_agrees(real, unit_pod("three-more", {SLICE: "3"}))
    assert node is None and f"Insufficient {SLICE}" in verdict.scheduler_message
    node, _ = _assert_agrees(real, unit_pod("two-more", {SLICE: "2"}))
    assert node == slices_node
