"""The devices scenario's format (`gpu.mig`, `gpu.migStrategy`, `gpu.sharing`, a pod's
`resources`) and its refusals, a GPU shape read back from the labels it gives, and the
extended resources a pod asks for."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kubesim import mig, sharing
from kubesim.mig_manager import GpuShape
from kubesim.scenario import ScenarioError, load_scenario
from kubesim.scheduling import extended_request, gpu_request, is_extended


def write(tmp_path: Path, gpu: str, pods: str = "") -> Path:
    path = tmp_path / "s.yaml"
    path.write_text(
        "nodes:\n"
        "  - name: g\n"
        "    count: 1\n"
        f"    gpu: {gpu}\n" + (f"    pods:\n      - {pods}\n" if pods else "")
    )
    return path


def test_the_devices_scenario_reads_each_shape() -> None:
    groups = {g.name: g for g in load_scenario("devices").groups}
    assert groups["a100-mig-single"].mig == mig.MigLayout("1g.10gb", mig.SINGLE)
    assert groups["h100-mig-mixed"].mig == mig.MigLayout("1g.10gb", mig.MIXED)
    assert groups["l40s-time-sliced"].sharing == sharing.Sharing(sharing.TIME_SLICING, 4)
    assert groups["l4-mps"].sharing == sharing.Sharing(sharing.MPS, 4, rename=True)
    assert groups["h100-mig-mixed"].pods[0].asks() == {"nvidia.com/mig-1g.10gb": 1}


@pytest.mark.parametrize(
    ("gpu", "pods", "reason"),
    [
        (
            "{model: NVIDIA-A100-SXM4-80GB, mig: 1g.10gb, sharing: {strategy: mps, replicas: 2}}",
            "",
            "gpu.mig and gpu.sharing exclude each other",
        ),
        ("{model: NVIDIA-A100-SXM4-80GB, migStrategy: mixed}", "", "gpu.migStrategy needs"),
        (
            "{model: NVIDIA-A100-SXM4-80GB, mig: 1g.10gb, migStrategy: both}",
            "",
            "gpu.migStrategy must be one of single, mixed",
        ),
        ("{model: NVIDIA-L40S, memoryMiB: 46068, mig: 1g.10gb}", "", "is not MIG-capable"),
        (
            "{model: NVIDIA-H100-80GB-HBM3, memoryMiB: 81559, mig: 4g.71gb}",
            "",
            "MIG profile 4g.71gb does not exist on a 80 GB GPU",
        ),
        (
            "{model: NVIDIA-L4, sharing: {strategy: spatial, replicas: 4}}",
            "",
            "sharing strategy must be one of time-slicing, mps",
        ),
        (
            "{model: NVIDIA-L4, sharing: {strategy: mps, replicas: 1}}",
            "",
            "gpu.sharing.replicas must be at least 2",
        ),
        (
            "{model: NVIDIA-H100-80GB-HBM3, mig: 1g.10gb, migStrategy: mixed}",
            "{name: p, gpus: 1}",
            "its pods ask for 1 GPUs per node but a node has 0",
        ),
        (
            "{model: NVIDIA-L4, count: 2, sharing: {strategy: mps, replicas: 2, rename: true}}",
            "{name: p, resources: {nvidia.com/gpu.shared: 5}}",
            "its pods ask for 5 nvidia.com/gpu.shared per node but a node has 4",
        ),
        ("{model: NVIDIA-L4}", "{name: p, resources: {cpu: 1}}", "is no extended resource"),
    ],
)
def test_a_shape_kubesim_cannot_make_is_refused(
    tmp_path: Path, gpu: str, pods: str, reason: str
) -> None:
    with pytest.raises(ScenarioError, match=reason):
        load_scenario(str(write(tmp_path, gpu, pods)))


MODELS = {
    40: "NVIDIA-A100-SXM4-40GB",
    80: "NVIDIA-A100-SXM4-80GB",
    94: "NVIDIA-H100-NVL",
    141: "NVIDIA-H200",
}


@st.composite
def shapes(draw: st.DrawFn) -> GpuShape:
    size = draw(st.sampled_from(sorted(mig.PROFILES)))
    gpus = draw(st.integers(1, 8))
    kind = draw(st.sampled_from(["whole", "mig", "shared"]))
    layout = shared = None
    if kind == "mig":
        profile = draw(st.sampled_from(mig.PROFILES[size]))
        layout = mig.MigLayout(profile, draw(st.sampled_from(mig.STRATEGIES)))
    elif kind == "shared":
        shared = sharing.Sharing(
            draw(st.sampled_from(sharing.STRATEGIES)), draw(st.integers(2, 16)), draw(st.booleans())
        )
    # Under the single strategy GFD labels only an instance's memory: the GPU's is read
    # back as the size its product is named after.
    return GpuShape(MODELS[size], gpus, size * 1024, layout, shared)


@given(shapes())
def test_a_shape_is_read_back_from_the_labels_it_gives(shape: GpuShape) -> None:
    assert GpuShape.of(shape.labels()) == shape
    devices = sum(shape.resources().values())
    per_gpu = shape.layout.per_gpu if shape.layout else 1
    replicas = shape.shared.replicas if shape.shared else 1
    assert devices == shape.gpus * per_gpu * replicas


def test_a_pod_asks_for_every_extended_resource_of_its_containers() -> None:
    pod = {
        "spec": {
            "containers": [
                {"resources": {"limits": {"nvidia.com/mig-1g.10gb": "1", "cpu": "2"}}},
                {"resources": {"limits": {"nvidia.com/mig-1g.10gb": 2, "example.com/nic": "1"}}},
                {"resources": {"requests": {"nvidia.com/gpu": "0"}}},
            ],
            # Init containers run one at a time: the largest counts if it is larger.
            "initContainers": [
                {"resources": {"limits": {"nvidia.com/mig-1g.10gb": "5"}}},
                {"resources": {"limits": {"example.com/nic": "1"}}},
            ],
        }
    }
    assert extended_request(pod) == {"nvidia.com/mig-1g.10gb": 5, "example.com/nic": 1}
    assert gpu_request(pod) == 5  # MIG instances are devices; the NIC is not
    assert not is_extended("cpu")
    assert not is_extended("kubernetes.io/batch-cpu")
    assert not is_extended("hugepages-2Mi")
    assert is_extended("nvidia.com/gpu.shared")
