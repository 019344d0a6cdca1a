"""The simulated mig-manager and device plugin: a node's `nvidia.com/mig.config` or
`nvidia.com/device-plugin.config` label changed through the API makes it advertise another
GPU shape after the reconfiguration delay, with mig-manager's `pending`, `success` and
`failed` states. The cluster clock stands still (--clock-scale 0): each test steps it."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from kubernetes import client

from tests.kubesim.test_devices_shapes import extended, gpu_labels, scrape
from tests.kubesim.test_exporter_dcgm4 import series
from tests.kubesim_process import Kubesim, kubesim_server

DELAY = 5.0  # kubesim's default --mig-reconfigure-seconds
STATE = "nvidia.com/mig.config.state"


@pytest.fixture(scope="module")
def devices(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Kubesim]:
    extra = ["--clock-scale", "0"]
    with kubesim_server(tmp_path_factory.mktemp("devices"), scenario="devices", extra=extra) as sim:
        yield sim


def advance(sim: Kubesim, seconds: float) -> None:
    """Step the cluster clock, firing the timers due on the way (0: those due now)."""
    sim.control("clock", {"advance": seconds})


def relabel(sim: Kubesim, node: str, key: str, value: str) -> None:
    sim.core().patch_node(node, {"metadata": {"labels": {key: value}}})
    advance(sim, 0)  # mig-manager notices the label


def state(sim: Kubesim, node: str) -> str | None:
    return gpu_labels(sim, node).get(STATE)


def delete_gpu_pods(sim: Kubesim, node: str, grace: int | None = 0) -> None:
    core = sim.core()
    for pod in core.list_pod_for_all_namespaces(field_selector=f"spec.nodeName={node}").items:
        if pod.metadata.namespace != "gpu-operator":
            core.delete_namespaced_pod(
                pod.metadata.name, pod.metadata.namespace, grace_period_seconds=grace
            )


def test_a_new_profile_waits_for_the_gpu_pods_then_is_advertised(devices: Kubesim) -> None:
    node = "h100-whole-000"  # whole GPUs, four held by a training job
    relabel(devices, node, "nvidia.com/mig.config", "all-3g.40gb")
    assert state(devices, node) == "pending"
    advance(devices, DELAY)
    assert state(devices, node) == "pending"  # the job still holds its GPUs
    assert extended(devices, node)[1] == {"nvidia.com/gpu": "8"}
    delete_gpu_pods(devices, node, grace=None)  # terminating: they hold their GPUs 30 s
    advance(devices, DELAY)
    assert state(devices, node) == "pending"
    advance(devices, 30)
    labels = gpu_labels(devices, node)
    assert labels[STATE] == "success"
    # The node had no strategy of its own: the device plugin's default, single.
    assert labels["nvidia.com/mig.strategy"] == "single"
    assert labels["nvidia.com/gpu.product"] == "NVIDIA-H100-80GB-HBM3-MIG-3g.40gb"
    assert labels["nvidia.com/gpu.count"] == "16"
    assert labels["nvidia.com/gpu.memory"] == "38912"
    assert extended(devices, node) == ({"nvidia.com/gpu": "16"},) * 2
    used = series(scrape(devices, node), "DCGM_FI_DEV_FB_USED")
    assert sorted({(labels["GPU_I_PROFILE"], labels["GPU_I_ID"]) for labels, _ in used}) == [
        ("3g.40gb", "1"),
        ("3g.40gb", "2"),
    ]
    assert len(used) == 16


def test_a_mixed_node_advertises_its_new_profile_and_schedules_it(devices: Kubesim) -> None:
    node = "h100-mig-001"
    delete_gpu_pods(devices, node)
    relabel(devices, node, "nvidia.com/mig.config", "all-3g.40gb")
    assert state(devices, node) == "pending"
    assert extended(devices, node)[1] == {"nvidia.com/mig-1g.10gb": "56"}
    advance(devices, DELAY)
    labels = gpu_labels(devices, node)
    assert labels[STATE] == "success"
    assert {k: v for k, v in labels.items() if k.startswith("nvidia.com/mig-")} == {
        "nvidia.com/mig-3g.40gb.count": "16",
        "nvidia.com/mig-3g.40gb.memory": "38912",
        "nvidia.com/mig-3g.40gb.slices.gi": "3",
        "nvidia.com/mig-3g.40gb.slices.ci": "3",
    }
    assert (labels["nvidia.com/gpu.product"], labels["nvidia.com/gpu.count"]) == (
        "NVIDIA-H100-80GB-HBM3",
        "8",
    )
    assert extended(devices, node) == ({"nvidia.com/mig-3g.40gb": "16"},) * 2
    pod = client.V1Pod(
        metadata=client.V1ObjectMeta(name="half-gpu"),
        spec=client.V1PodSpec(
            containers=[
                client.V1Container(
                    name="main",
                    image="server:1",
                    resources=client.V1ResourceRequirements(limits={"nvidia.com/mig-3g.40gb": "1"}),
                )
            ]
        ),
    )
    created = devices.core().create_namespaced_pod("ml-serving", pod)
    assert created.spec.node_name == node


def test_an_unknown_profile_fails_and_changes_nothing(devices: Kubesim) -> None:
    node = "h100-whole-001"
    before = gpu_labels(devices, node), extended(devices, node)
    # 4g.71gb is an H200's profile: an 80 GB H100 has none such.
    relabel(devices, node, "nvidia.com/mig.config", "all-4g.71gb")
    assert state(devices, node) == "pending"
    advance(devices, DELAY)
    labels = gpu_labels(devices, node)
    assert labels.pop(STATE) == "failed"
    assert labels.pop("nvidia.com/mig.config") == "all-4g.71gb"
    assert (labels, extended(devices, node)) == before


def test_a_gpu_that_is_not_mig_capable_fails(devices: Kubesim) -> None:
    node = "l40s-ts-000"
    relabel(devices, node, "nvidia.com/mig.config", "all-1g.10gb")
    advance(devices, DELAY)
    assert state(devices, node) == "failed"
    assert extended(devices, node)[1] == {"nvidia.com/gpu": "16"}


def test_an_injected_failure_fails_the_next_reconfiguration_only(devices: Kubesim) -> None:
    node = "a100-mig-001"
    delete_gpu_pods(devices, node)
    devices.control("faults", {"mig_failures": {node: 1}})
    relabel(devices, node, "nvidia.com/mig.config", "all-2g.20gb")
    advance(devices, DELAY)
    assert state(devices, node) == "failed"
    assert extended(devices, node)[1] == {"nvidia.com/gpu": "56"}
    relabel(devices, node, "nvidia.com/mig.config", "all-7g.80gb")
    advance(devices, DELAY)
    labels = gpu_labels(devices, node)
    assert labels[STATE] == "success"
    assert labels["nvidia.com/gpu.product"] == "NVIDIA-A100-SXM4-80GB-MIG-7g.80gb"
    assert extended(devices, node)[1] == {"nvidia.com/gpu": "8"}
    # And back to whole GPUs: the strategy stays, the MIG labels go.
    relabel(devices, node, "nvidia.com/mig.config", "all-disabled")
    advance(devices, DELAY)
    labels = gpu_labels(devices, node)
    assert labels[STATE] == "success"
    assert labels["nvidia.com/mig.strategy"] == "single"
    assert labels["nvidia.com/gpu.product"] == "NVIDIA-A100-SXM4-80GB"
    assert (labels["nvidia.com/gpu.count"], labels["nvidia.com/gpu.memory"]) == ("8", "81920")
    assert "nvidia.com/gpu.slices.gi" not in labels
    assert extended(devices, node) == ({"nvidia.com/gpu": "8"},) * 2
    assert len(series(scrape(devices, node), "DCGM_FI_DEV_GPU_UTIL")) == 8


def test_the_device_plugin_config_shares_and_renames_gpus(devices: Kubesim) -> None:
    node = "l40s-ts-001"
    relabel(devices, node, "nvidia.com/device-plugin.config", "mps-2-renamed")
    assert extended(devices, node)[1] == {"nvidia.com/gpu": "16"}  # not yet
    advance(devices, DELAY)
    labels = gpu_labels(devices, node)
    assert labels["nvidia.com/gpu.sharing-strategy"] == "mps"
    assert labels["nvidia.com/gpu.replicas"] == "2"
    assert labels["nvidia.com/gpu.product"] == "NVIDIA-L40S"
    assert extended(devices, node) == ({"nvidia.com/gpu.shared": "8"},) * 2
    assert len(series(scrape(devices, node), "DCGM_FI_DEV_FB_USED")) == 4
    relabel(devices, node, "nvidia.com/device-plugin.config", "default")
    advance(devices, DELAY)
    labels = gpu_labels(devices, node)
    assert "nvidia.com/gpu.replicas" not in labels
    assert "nvidia.com/gpu.sharing-strategy" not in labels
    assert labels["nvidia.com/device-plugin.config"] == "default"
    assert extended(devices, node) == ({"nvidia.com/gpu": "4"},) * 2
    # A configuration the device plugin does not have changes nothing.
    relabel(devices, node, "nvidia.com/device-plugin.config", "no-such-config")
    advance(devices, DELAY)
    assert extended(devices, node)[1] == {"nvidia.com/gpu": "4"}


def test_a_reconfiguration_pending_at_a_restart_starts_over(tmp_path: Path) -> None:
    saved = tmp_path / "state.json"
    extra = ["--clock-scale", "0", "--state", str(saved)]
    node = "h100-whole-001"
    with kubesim_server(tmp_path / "one", scenario="devices", extra=extra) as first:
        relabel(first, node, "nvidia.com/mig.config", "all-7g.80gb")
        assert state(first, node) == "pending"
        delete_gpu_pods(first, node)
    with kubesim_server(tmp_path / "two", scenario="devices", extra=extra) as second:
        advance(second, DELAY)
        assert state(second, node) == "success"
        assert extended(second, node)[1] == {"nvidia.com/gpu": "8"}
        assert gpu_labels(second, node)["nvidia.com/gpu.product"].endswith("-MIG-7g.80gb")
