"""Scenario files: the demo's shape, the generator, and bad files refused with file:line."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from kubesim.cluster import Cluster
from kubesim.scenario import ScenarioError, generated_scenario, load_scenario
from kubesim.seeding import seed

ROOT = Path(__file__).resolve().parents[2]


def seeded(scenario_name: str) -> Cluster:
    cluster = Cluster()
    seed(cluster, load_scenario(scenario_name))
    return cluster


def labels_of(cluster: Cluster) -> list[dict[str, str]]:
    return [e.obj["metadata"]["labels"] for e in cluster.store.objects["nodes"].values()]


def test_demo_is_the_articles_cluster() -> None:
    cluster = seeded("demo")
    nodes = [e.obj for e in cluster.store.objects["nodes"].values()]
    a100 = [
        n
        for n in nodes
        if n["metadata"]["labels"]["nvidia.com/gpu.product"].startswith("NVIDIA-A100")
    ]
    pools = [n["metadata"]["labels"].get("gpu-pool") for n in a100]
    assert (pools.count("training"), pools.count("inference"), pools.count("mixed")) == (5, 5, 10)
    h100 = [n for n in nodes if "H100" in n["metadata"]["labels"]["nvidia.com/gpu.product"]]
    assert len(h100) == 3
    unlabelled = [n for n in nodes if "gpu-pool" not in n["metadata"]["labels"]]
    assert [n["metadata"]["name"] for n in unlabelled] == ["gpu-new-000", "gpu-new-001"]
    drifted = [
        n
        for n in nodes
        if n["metadata"]["labels"].get("gpu-pool") == "training" and not n["spec"].get("taints")
    ]
    assert [n["metadata"]["name"] for n in drifted] == ["a100-train-drift-000"]
    pending = [
        e.obj
        for e in cluster.store.objects["pods"].values()
        if e.obj["status"]["phase"] == "Pending"
    ]
    assert {p["metadata"]["name"] for p in pending} == {"eval-job-2", "big-train"}
    # Beyond the 300 s NoExecute tolerations every pod gets, eval-job tolerates nothing.
    assert all(
        {t["effect"] for t in p["spec"].get("tolerations") or []} <= {"NoExecute"}
        for p in pending
        if p["metadata"]["name"].startswith("eval-job")
    )


def test_nodes_carry_gpu_feature_discovery_labels_and_gpu_capacity() -> None:
    node = seeded("demo").store.get("nodes", None, "h100-infer-000").obj
    labels = node["metadata"]["labels"]
    assert labels["nvidia.com/gpu.product"] == "NVIDIA-H100-80GB-HBM3"
    assert labels["nvidia.com/gpu.count"] == "8"
    assert labels["nvidia.com/gpu.memory"] == "81559"
    assert labels["nvidia.com/gpu.family"] == "hopper"
    assert node["status"]["capacity"]["nvidia.com/gpu"] == "8"
    assert node["status"]["nodeInfo"]["kubeletVersion"] == "v1.30.0"


def test_labelled_demo_nodes_reserve_cpu_and_memory_but_the_hand_built_one() -> None:
    cluster = seeded("demo")
    status = {
        e.obj["metadata"]["name"]: e.obj["status"] for e in cluster.store.objects["nodes"].values()
    }
    trained = status["a100-train-000"]
    assert (trained["capacity"]["cpu"], trained["allocatable"]["cpu"]) == ("96", "94")
    assert (trained["capacity"]["memory"], trained["allocatable"]["memory"]) == ("1056Gi", "1040Gi")
    for name in ("a100-train-drift-000", "gpu-new-000"):
        assert status[name]["allocatable"]["cpu"] == status[name]["capacity"]["cpu"] == "96"
        assert status[name]["allocatable"]["memory"] == status[name]["capacity"]["memory"]


def test_generator_makes_n_nodes_with_pods() -> None:
    cluster = Cluster()
    seed(cluster, generated_scenario(200))
    assert len(cluster.store.objects["nodes"]) == 200
    everything = cluster.store.objects["pods"]
    pods = {k: e for k, e in everything.items() if not k.startswith("gpu-operator/")}
    assert 1500 <= len(pods) <= 1600
    assert len(everything) - len(pods) == 2 * 200  # a device plugin and an exporter a node
    assert all(e.obj["spec"].get("nodeName") for e in everything.values())
    assert sum(cluster.allocated.values()) == sum(
        int(e.obj["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpu"])
        for e in pods.values()
    )


@pytest.mark.parametrize(
    ("text", "line", "reason"),
    [
        (
            "nodes:\n  - name: a\n    count: two\n    gpu: {model: X}\n",
            3,
            "count must be a whole number, got 'two'",
        ),
        (
            "nodes:\n  - name: a\n    count: 1\n    gpu: {model: X}\n    colour: red\n",
            5,
            "unknown field 'colour' in node group",
        ),
        (
            "nodes:\n  - name: a\n    count: 1\n    gpu: {model: X}\n"
            "    taints: [{key: k, effect: Sometimes}]\n",
            5,
            "taint effect must be one of",
        ),
        (
            "nodes:\n  - name: a\n    count: 1\n    gpu: {model: X}\n    labels: {'bad key!': x}\n",
            5,
            "invalid label key 'bad key!'",
        ),
        (
            "nodes:\n  - name: a\n    count: 1\n    gpu: {model: X}\n"
            "    allocatable: {cpu: '1', gpus: '2'}\n",
            5,
            "unknown field 'gpus' in allocatable",
        ),
        ("nodes:\n  - name: a\n    count: 1\n", 2, "a node group needs 'gpu'"),
        ("nodes: [\n", 2, "not valid YAML"),
    ],
)
def test_bad_scenarios_name_the_file_line_and_reason(
    tmp_path: Path, text: str, line: int, reason: str
) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text(text)
    with pytest.raises(ScenarioError) as caught:
        load_scenario(str(path))
    assert str(caught.value).startswith(f"{path}:{line}: {reason}")


def test_the_cli_refuses_a_bad_scenario_with_the_reason(tmp_path: Path) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text("nodes:\n  - name: a\n    count: -1\n    gpu: {model: X}\n")
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "kubesim",
            "serve",
            "--scenario",
            str(path),
            "--kubeconfig",
            str(tmp_path / "kc"),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 2
    assert f"{path}:3: count must be at least 0, got -1" in result.stderr
    assert not (tmp_path / "kc").exists()
