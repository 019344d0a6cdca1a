"""kubesim plays NVIDIA's DRA driver (`gpu.dra`): the nodes advertise no GPU resource, their
GPUs are devices of ResourceSlices, the driver's DeviceClasses are served, and kubesim's own
API server, which allocates no claim, leaves a pod with claims Pending in the scheduler's
words. The portal's inventory counts the devices as DRA units."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from collections.abc import Iterator

import pytest
from kubernetes import client
from kubernetes.client.rest import ApiException

from kubesim.scenario import ScenarioError, load_scenario
from tests.kubesim_process import Kubesim, kubesim_server

KUBECTL = shutil.which("kubectl")


@pytest.fixture(scope="module")
def dra_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Kubesim]:
    with kubesim_server(tmp_path_factory.mktemp("kubesim-dra"), scenario="dra", tls=True) as server:
        yield server


def synced(cluster: Kubesim, settings) -> None:  # type: ignore[no-untyped-def]
    """The portal pointed at the cluster, its inventory listed."""
    from pools.inventory import inventory_sync

    settings.KUBECONFIG = str(cluster.kubeconfig)
    settings.KUBE_CONTEXT = ""
    settings.KUBE_IN_CLUSTER = False
    inventory_sync()


def test_the_scenario_reads_gpu_dra_and_refuses_it_with_mig(tmp_path) -> None:  # type: ignore[no-untyped-def]
    groups = {g.name: g for g in load_scenario("dra").groups}
    assert groups["h100-dra"].dra and not groups["a100-plugin"].dra
    path = tmp_path / "s.yaml"
    path.write_text(
        "nodes:\n  - name: g\n    count: 1\n"
        "    gpu: {model: NVIDIA-A100-SXM4-80GB, mig: 1g.10gb, dra: true}\n"
    )
    with pytest.raises(ScenarioError, match=r"gpu\.dra serves whole GPUs"):
        load_scenario(str(path))


def test_dra_nodes_advertise_no_gpu_and_publish_their_gpus_as_devices(dra_cluster: Kubesim) -> None:
    core = dra_cluster.core()
    node = core.read_node("h100-dra-000")
    assert "nvidia.com/gpu" not in node.status.allocatable
    assert node.metadata.labels["nvidia.com/gpu.count"] == "4"
    assert core.read_node("a100-plugin-000").status.allocatable["nvidia.com/gpu"] == "8"
    resource = client.ResourceV1Api(dra_cluster.api_client())
    slices = {s.spec.node_name: s for s in resource.list_resource_slice().items}
    assert sorted(slices) == ["h100-dra-000", "h100-dra-001"]
    one = slices["h100-dra-000"]
    assert (one.spec.driver, one.spec.pool.generation, one.spec.pool.resource_slice_count) == (
        "gpu.nvidia.com",
        1,
        1,
    )
    assert [d.name for d in one.spec.devices] == ["gpu-0", "gpu-1", "gpu-2", "gpu-3"]
    attributes = one.spec.devices[0].attributes
    assert attributes["type"].string == "gpu"
    assert attributes["productName"].string == "NVIDIA H100-80GB-HBM3"
    assert attributes["uuid"].string.startswith("GPU-")
    assert one.spec.devices[0].capacity["memory"].value == "81559Mi"
    classes = [c.metadata.name for c in resource.list_device_class().items]
    assert classes == ["gpu.nvidia.com", "mig.nvidia.com"]
    assert resource.list_resource_claim_for_all_namespaces().items == []


def test_dra_objects_are_served_for_reading_only(dra_cluster: Kubesim) -> None:
    resource = client.ResourceV1Api(dra_cluster.api_client())
    with pytest.raises(ApiException) as refused:
        resource.create_namespaced_resource_claim(
            "default",
            {"metadata": {"name": "c"}, "spec": {"devices": {"requests": []}}},
        )
    assert refused.value.status == 405


@pytest.mark.skipif(KUBECTL is None, reason="no kubectl on this machine")
def test_kubectl_gets_the_slices_and_classes(dra_cluster: Kubesim) -> None:
    env = {**os.environ, "KUBECONFIG": str(dra_cluster.kubeconfig)}
    env.pop("KUBERNETES_SERVICE_HOST", None)

    def kubectl(*args: str) -> str:
        done = subprocess.run(
            [KUBECTL or "kubectl", *args], env=env, capture_output=True, text=True, timeout=60
        )
        assert done.returncode == 0, done.stderr
        return done.stdout

    assert "h100-dra-000-gpu.nvidia.com" in kubectl("get", "resourceslices")
    listed = json.loads(kubectl("get", "deviceclasses", "-o", "json"))
    assert [i["metadata"]["name"] for i in listed["items"]] == ["gpu.nvidia.com", "mig.nvidia.com"]


def test_a_pod_with_claims_stays_pending_in_the_schedulers_words(dra_cluster: Kubesim) -> None:
    core = dra_cluster.core()
    pod = {
        "metadata": {"name": "claims-gpu", "namespace": "default"},
        "spec": {
            "containers": [{"name": "c", "image": "x", "resources": {"claims": [{"name": "g"}]}}],
            "resourceClaims": [{"name": "g", "resourceClaimTemplateName": "one-gpu"}],
        },
    }
    created = core.create_namespaced_pod("default", pod)
    assert created.spec.node_name is None
    [condition] = [c for c in created.status.conditions if c.type == "PodScheduled"]
    assert condition.reason == "Unschedulable"
    assert condition.message == (
        '0/3 nodes are available: pod "default/claims-gpu": ResourceClaim not created yet. '
        "preemption: 0/3 nodes are available: 3 Preemption is not helpful for scheduling."
    )


@pytest.mark.django_db
def test_the_portal_counts_the_dra_devices_of_kubesims_nodes(
    dra_cluster: Kubesim, settings
) -> None:  # type: ignore[no-untyped-def]
    from pools.models import Node

    synced(dra_cluster, settings)
    node = Node.objects.get(name="h100-dra-000")
    assert node.dra_units == [["gpu.nvidia.com", "gpu", "", 4, 0]]
    devices = node.device_set()
    assert devices.gpus == 4 and devices.whole_gpus == 0
    assert [u.kind.label for u in devices.units] == ["DRA GPU (gpu.nvidia.com)"]


def test_a_scenario_extends_another_and_may_not_extend_itself(tmp_path) -> None:  # type: ignore[no-untyped-def]
    demo, showcase = load_scenario("demo"), load_scenario("showcase")
    assert [g.name for g in showcase.groups[: len(demo.groups)]] == [g.name for g in demo.groups]
    added = {g.name: g for g in showcase.groups[len(demo.groups) :]}
    assert added["a100-mig"].mig is not None and added["h100-dra"].dra
    assert len(showcase.pending) == len(demo.pending)
    looped = tmp_path / "loop.yaml"
    looped.write_text(f"extends: {looped}\nnodes: []\n")
    with pytest.raises(ScenarioError, match="extends itself"):
        load_scenario(str(looped))


@pytest.mark.django_db
def test_the_demo_pool_of_mig_instances_is_created_once() -> None:
    from io import StringIO

    from django.core.management import call_command

    from pools.models import Pool

    out = StringIO()
    call_command("demo_pools", stdout=out)
    call_command("demo_pools", stdout=out)
    pool = Pool.objects.get(name="mig-inference")
    assert pool.accepted_gpu_layouts == ["mig-1g.10gb"]
    assert pool.taint is not None and out.getvalue().count("Created") == 1
    policy = Pool.objects.get(name="inference").reclaim_policy
    assert (policy.enabled, policy.below_percent, policy.for_hours) == (True, 5, 1)
    assert out.getvalue().count("reclaim policy") == 1


def test_the_exporter_reports_every_gpu_of_a_dra_node(dra_cluster: Kubesim) -> None:
    from tests.kubesim.test_devices_shapes import scrape

    text = scrape(dra_cluster, "h100-dra-000")
    series = [line for line in text.splitlines() if line.startswith("DCGM_FI_DEV_GPU_UTIL{")]
    assert sorted(line.split('gpu="')[1].split('"')[0] for line in series) == ["0", "1", "2", "3"]


@pytest.mark.django_db
def test_a_dra_nodes_page_says_what_of_its_devices_is_allocated(
    dra_cluster: Kubesim, settings
) -> None:  # type: ignore[no-untyped-def]
    from django.test import Client

    from tests.moves_helpers import user_in

    synced(dra_cluster, settings)
    page = Client()
    page.force_login(user_in("viewers", "dra-node-viewer"))
    html = page.get("/nodes/h100-dra-000/").content.decode()
    assert "<span data-units-allocated>0 of 4 DRA GPU (gpu.nvidia.com)</span> allocated" in html
    assert "0 of 0 GPUs allocated" not in html
    # A node of whole GPUs says it as before.
    assert "of 8 GPUs allocated" in page.get("/nodes/a100-plugin-000/").content.decode()
