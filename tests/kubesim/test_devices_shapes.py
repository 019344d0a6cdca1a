"""The GPU shapes of the devices scenario as a client reads them: GPU feature discovery's
labels and the device plugin's resources per shape (MIG single and mixed, time-slicing,
MPS renamed, whole GPUs), and dcgm-exporter's series for each."""

from __future__ import annotations

import urllib.request
from collections.abc import Iterator

import pytest

from tests.kubesim.test_exporter_dcgm4 import series
from tests.kubesim_process import Kubesim, kubesim_server

GFD = "nvidia.com/"


@pytest.fixture(scope="module")
def devices(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Kubesim]:
    with kubesim_server(tmp_path_factory.mktemp("devices"), scenario="devices") as sim:
        yield sim


def gpu_labels(sim: Kubesim, node: str) -> dict[str, str]:
    labels = sim.core().read_node(node).metadata.labels
    return {k: v for k, v in labels.items() if k.startswith(GFD) and ".driver." not in k}


def extended(sim: Kubesim, node: str) -> tuple[dict[str, str], dict[str, str]]:
    status = sim.core().read_node(node).status
    return (
        {k: v for k, v in status.capacity.items() if "/" in k},
        {k: v for k, v in status.allocatable.items() if "/" in k},
    )


def scrape(sim: Kubesim, node: str) -> str:
    with urllib.request.urlopen(f"{sim.metrics_url}/metrics/node/{node}", timeout=10) as r:
        return r.read().decode()


def test_single_strategy_mig_is_advertised_as_nvidia_com_gpu(devices: Kubesim) -> None:
    assert gpu_labels(devices, "a100-mig-000") == {
        "nvidia.com/gpu.present": "true",
        "nvidia.com/gpu.product": "NVIDIA-A100-SXM4-80GB-MIG-1g.10gb",
        "nvidia.com/gpu.count": "56",
        "nvidia.com/gpu.memory": "9728",
        "nvidia.com/gpu.family": "ampere",
        "nvidia.com/gpu.slices.gi": "1",
        "nvidia.com/gpu.slices.ci": "1",
        "nvidia.com/mig.capable": "true",
        "nvidia.com/mig.strategy": "single",
        "nvidia.com/mig.config": "all-1g.10gb",
        "nvidia.com/mig.config.state": "success",
    }
    assert extended(devices, "a100-mig-000") == ({"nvidia.com/gpu": "56"},) * 2


def test_mixed_strategy_mig_is_advertised_per_profile(devices: Kubesim) -> None:
    assert gpu_labels(devices, "h100-mig-001") == {
        "nvidia.com/gpu.present": "true",
        "nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3",
        "nvidia.com/gpu.count": "8",
        "nvidia.com/gpu.memory": "81559",
        "nvidia.com/gpu.family": "hopper",
        "nvidia.com/mig.capable": "true",
        "nvidia.com/mig.strategy": "mixed",
        "nvidia.com/mig.config": "all-1g.10gb",
        "nvidia.com/mig.config.state": "success",
        "nvidia.com/mig-1g.10gb.count": "56",
        "nvidia.com/mig-1g.10gb.memory": "9728",
        "nvidia.com/mig-1g.10gb.slices.gi": "1",
        "nvidia.com/mig-1g.10gb.slices.ci": "1",
    }
    # Every GPU is MIG-enabled: no nvidia.com/gpu is left.
    assert extended(devices, "h100-mig-001") == ({"nvidia.com/mig-1g.10gb": "56"},) * 2


def test_time_sliced_gpus_are_replicas_of_nvidia_com_gpu(devices: Kubesim) -> None:
    labels = gpu_labels(devices, "l40s-ts-000")
    assert {k: labels[k] for k in labels if k != "nvidia.com/gpu.present"} == {
        "nvidia.com/gpu.product": "NVIDIA-L40S-SHARED",
        "nvidia.com/gpu.count": "4",
        "nvidia.com/gpu.memory": "46068",
        "nvidia.com/gpu.family": "ada-lovelace",
        "nvidia.com/gpu.replicas": "4",
        "nvidia.com/gpu.sharing-strategy": "time-slicing",
        "nvidia.com/device-plugin.config": "time-sliced-4",
        "nvidia.com/mig.capable": "false",
    }
    assert extended(devices, "l40s-ts-000") == ({"nvidia.com/gpu": "16"},) * 2


def test_renamed_mps_replicas_are_nvidia_com_gpu_shared(devices: Kubesim) -> None:
    labels = gpu_labels(devices, "l4-mps-000")
    assert labels["nvidia.com/gpu.product"] == "NVIDIA-L4"  # renamed: no -SHARED
    assert labels["nvidia.com/gpu.count"] == "8"
    assert labels["nvidia.com/gpu.replicas"] == "4"
    assert labels["nvidia.com/gpu.sharing-strategy"] == "mps"
    assert labels["nvidia.com/device-plugin.config"] == "mps-4-renamed"
    assert extended(devices, "l4-mps-000") == ({"nvidia.com/gpu.shared": "32"},) * 2


def test_whole_gpus_carry_no_mig_or_sharing_labels(devices: Kubesim) -> None:
    labels = gpu_labels(devices, "h100-whole-000")
    assert labels["nvidia.com/gpu.count"] == "8"
    assert labels["nvidia.com/mig.capable"] == "true"
    assert not [k for k in labels if "mig." in k and k != "nvidia.com/mig.capable"]
    assert "nvidia.com/gpu.replicas" not in labels
    assert extended(devices, "h100-whole-000") == ({"nvidia.com/gpu": "8"},) * 2


def test_scenario_pods_hold_the_units_their_node_offers(devices: Kubesim) -> None:
    core = devices.core()
    pods = core.list_namespaced_pod("ml-serving", field_selector="spec.nodeName=h100-mig-000")
    limits = [p.spec.containers[0].resources.limits for p in pods.items]
    assert limits == [{"nvidia.com/mig-1g.10gb": "1"}] * 2
    assert {p.status.phase for p in pods.items} == {"Running"}


def test_a_mig_instance_is_a_series_under_either_strategy(devices: Kubesim) -> None:
    for node in ("a100-mig-000", "h100-mig-000"):
        text = scrape(devices, node)
        used = series(text, "DCGM_FI_DEV_FB_USED")
        assert len(used) == 56
        assert {labels["GPU_I_PROFILE"] for labels, _ in used} == {"1g.10gb"}
        assert sorted({labels["GPU_I_ID"] for labels, _ in used}, key=int) == [
            str(i) for i in range(7, 14)
        ]
        assert {labels["gpu"] for labels, _ in used} == {str(g) for g in range(8)}
        # No utilisation, copy, encoder or decoder for an instance; the profiling ratios are.
        for counter in ("GPU_UTIL", "MEM_COPY_UTIL", "ENC_UTIL", "DEC_UTIL"):
            assert not series(text, f"DCGM_FI_DEV_{counter}")
        assert len(series(text, "DCGM_FI_PROF_GR_ENGINE_ACTIVE")) == 56
    held = {
        (labels["gpu"], labels["GPU_I_ID"]): labels["pod"]
        for labels, _ in series(scrape(devices, "h100-mig-000"), "DCGM_FI_DEV_FB_USED")
        if "pod" in labels
    }
    assert held == {
        ("0", "7"): "slice-serving-h100-mig-000-0",
        ("0", "8"): "slice-serving-h100-mig-000-1",
    }


def test_a_shared_gpu_is_one_series_however_many_replicas(devices: Kubesim) -> None:
    used = series(scrape(devices, "l40s-ts-000"), "DCGM_FI_DEV_FB_USED")
    assert len(used) == 4  # the physical GPUs, not the 16 replicas
    assert not [labels for labels, _ in used if "GPU_I_ID" in labels]
    # Five pods on four GPUs: the device plugin spreads the replicas, and the exporter
    # names one pod a GPU (GPU 0 runs the first and the fifth).
    assert [labels.get("pod") for labels, _ in used] == [
        f"notebook-l40s-ts-000-{i}" for i in range(4)
    ]
    text = scrape(devices, "l4-mps-000")
    assert len(series(text, "DCGM_FI_DEV_GPU_UTIL")) == 8
    held = [labels.get("pod") for labels, _ in series(text, "DCGM_FI_DEV_FB_USED")]
    assert held[:3] == [f"batch-infer-l4-mps-000-{i}" for i in range(3)]


def test_whole_gpus_are_a_series_each(devices: Kubesim) -> None:
    used = series(scrape(devices, "h100-whole-000"), "DCGM_FI_DEV_FB_USED")
    assert len(used) == 8
    assert sum(1 for labels, _ in used if labels.get("pod") == "finetune-h100-whole-000") == 4
