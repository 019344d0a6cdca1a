"""The machine's real kubectl against kubesim (HTTPS: kubectl sends tokens only over TLS)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.kubesim_process import Kubesim, kubesim_server

KUBECTL = shutil.which("kubectl")
pytestmark = pytest.mark.skipif(KUBECTL is None, reason="no kubectl on this machine")


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Kubesim]:
    with kubesim_server(tmp_path_factory.mktemp("kubesim-tls"), tls=True) as server:
        yield server


def kubectl(cluster: Kubesim, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "KUBECONFIG": str(cluster.kubeconfig)}
    env.pop("KUBERNETES_SERVICE_HOST", None)
    result = subprocess.run(
        [KUBECTL or "kubectl", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    if check and result.returncode != 0:
        raise AssertionError(f"kubectl {' '.join(args)} failed: {result.stderr}")
    return result


def node(cluster: Kubesim, name: str) -> dict:  # type: ignore[type-arg]
    return json.loads(kubectl(cluster, "get", "node", name, "-o", "json").stdout)


def test_kubeconfig_carries_the_generated_ca(cluster: Kubesim) -> None:
    text = cluster.kubeconfig.read_text()
    assert "certificate-authority-data" in text and "https://127.0.0.1:" in text
    assert (Path(cluster.kubeconfig).stat().st_mode & 0o777) == 0o600


def test_get_nodes_as_a_server_side_table(cluster: Kubesim) -> None:
    out = kubectl(cluster, "get", "nodes").stdout.splitlines()
    assert out[0].split() == ["NAME", "STATUS", "ROLES", "AGE", "VERSION"]
    assert len(out) == 26
    down = next(line for line in out if line.startswith("a100-reserve-down-000"))
    assert down.split()[1] == "NotReady"
    wide = kubectl(cluster, "get", "node", "a100-train-000", "-o", "wide").stdout
    assert "INTERNAL-IP" in wide and "containerd://1.7.13" in wide


def test_label_selectors_and_short_names(cluster: Kubesim) -> None:
    out = kubectl(cluster, "get", "no", "-l", "gpu-pool in (training)", "-o", "name").stdout
    assert len(out.split()) == 5
    assert kubectl(cluster, "get", "nodes", "-l", "!gpu-pool", "-o", "name").stdout.split() == [
        "node/gpu-new-000",
        "node/gpu-new-001",
    ]


def test_label_and_unlabel(cluster: Kubesim) -> None:
    kubectl(cluster, "label", "node", "gpu-new-000", "gpu-pool=inference")
    assert node(cluster, "gpu-new-000")["metadata"]["labels"]["gpu-pool"] == "inference"
    refused = kubectl(cluster, "label", "node", "gpu-new-000", "gpu-pool=training", check=False)
    assert refused.returncode != 0 and "already has a value" in refused.stderr
    kubectl(cluster, "label", "node", "gpu-new-000", "gpu-pool=training", "--overwrite")
    kubectl(cluster, "label", "node", "gpu-new-000", "gpu-pool-")
    assert "gpu-pool" not in node(cluster, "gpu-new-000")["metadata"]["labels"]


def test_label_with_a_stale_resource_version_conflicts(cluster: Kubesim) -> None:
    stale = node(cluster, "gpu-new-001")["metadata"]["resourceVersion"]
    kubectl(cluster, "label", "node", "gpu-new-001", "touched=1")
    result = kubectl(
        cluster,
        "label",
        "node",
        "gpu-new-001",
        "again=1",
        f"--resource-version={stale}",
        check=False,
    )
    assert result.returncode != 0
    assert "the object has been modified" in result.stderr


def test_taint_and_untaint(cluster: Kubesim) -> None:
    kubectl(cluster, "taint", "node", "gpu-new-000", "workload-training=true:NoSchedule")
    kubectl(cluster, "taint", "node", "gpu-new-000", "other=x:PreferNoSchedule")
    taints = node(cluster, "gpu-new-000")["spec"]["taints"]
    assert {(t["key"], t["effect"]) for t in taints} == {
        ("workload-training", "NoSchedule"),
        ("other", "PreferNoSchedule"),
    }
    kubectl(cluster, "taint", "node", "gpu-new-000", "workload-training:NoSchedule-")
    assert [t["key"] for t in node(cluster, "gpu-new-000")["spec"]["taints"]] == ["other"]
    kubectl(cluster, "taint", "node", "gpu-new-000", "other-")
    assert not node(cluster, "gpu-new-000")["spec"].get("taints")


def test_cordon_and_uncordon(cluster: Kubesim) -> None:
    kubectl(cluster, "cordon", "a100-reserve-005")
    assert node(cluster, "a100-reserve-005")["spec"]["unschedulable"] is True
    line = kubectl(cluster, "get", "node", "a100-reserve-005", "--no-headers").stdout
    assert "Ready,SchedulingDisabled" in line
    out = kubectl(
        cluster, "get", "nodes", "--field-selector", "spec.unschedulable=true", "-o", "name"
    ).stdout.split()
    assert out == ["node/a100-reserve-005"]
    kubectl(cluster, "uncordon", "a100-reserve-005")
    assert not node(cluster, "a100-reserve-005")["spec"].get("unschedulable")


def test_patch_of_every_type(cluster: Kubesim) -> None:
    kubectl(
        cluster, "patch", "node", "a100-reserve-006", "-p", '{"metadata":{"labels":{"smp":"yes"}}}'
    )
    kubectl(
        cluster,
        "patch",
        "node",
        "a100-reserve-006",
        "--type",
        "merge",
        "-p",
        '{"metadata":{"labels":{"merge":"yes"}}}',
    )
    kubectl(
        cluster,
        "patch",
        "node",
        "a100-reserve-006",
        "--type",
        "json",
        "-p",
        '[{"op":"add","path":"/metadata/labels/json","value":"yes"}]',
    )
    labels = node(cluster, "a100-reserve-006")["metadata"]["labels"]
    assert (labels["smp"], labels["merge"], labels["json"]) == ("yes", "yes", "yes")


def test_invalid_label_is_refused_by_the_server(cluster: Kubesim) -> None:
    result = kubectl(cluster, "label", "node", "gpu-new-000", "bad key!=x", check=False)
    assert result.returncode != 0
    assert (
        'The Node "gpu-new-000" is invalid: metadata.labels: Invalid value: "bad key!"'
        in result.stderr
    )


def test_describe_node_lists_its_pods(cluster: Kubesim) -> None:
    out = kubectl(cluster, "describe", "node", "a100-infer-001").stdout
    assert "Taints:             workload-inference=true:NoSchedule" in out
    assert "chat-serving-a100-infer-001-0" in out
    assert "nvidia.com/gpu" in out


def test_get_pods_in_all_namespaces(cluster: Kubesim) -> None:
    out = kubectl(cluster, "get", "pods", "-A").stdout.splitlines()
    assert out[0].split()[:3] == ["NAMESPACE", "NAME", "READY"]
    pending = {line.split()[1] for line in out if " Pending " in line}
    # Earlier tests in this module labelled a node training without its taint, and the
    # scheduler rightly placed an eval job there: only the 8-GPU job is sure to wait.
    assert "big-train" in pending
    assert len(out) == 1 + 36 + 2 * 25  # and a device plugin and an exporter on each node
    selected = kubectl(
        cluster,
        "get",
        "pods",
        "-A",
        "--field-selector",
        "spec.nodeName=a100-train-000,metadata.namespace!=gpu-operator",
        "-o",
        "name",
    ).stdout.split()
    assert selected == ["pod/llm-pretrain-a100-train-000"]


def test_read_only_context_is_forbidden_to_write(cluster: Kubesim) -> None:
    result = kubectl(
        cluster, "--context", "kubesim-readonly", "label", "node", "gpu-new-000", "x=y", check=False
    )
    assert result.returncode != 0
    assert 'User "kubesim-viewer" cannot patch resource "nodes"' in result.stderr
    assert kubectl(cluster, "--context", "kubesim-readonly", "get", "nodes").returncode == 0


def test_wrong_token_is_unauthorized(cluster: Kubesim, tmp_path: Path) -> None:
    broken = tmp_path / "kubeconfig"
    broken.write_text(
        cluster.kubeconfig.read_text().replace("kubesim-admin-token-for-tests", "not-the-token")
    )
    result = subprocess.run(
        [KUBECTL or "kubectl", "get", "nodes"],
        env={**os.environ, "KUBECONFIG": str(broken)},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode != 0
    assert "You must be logged in to the server" in result.stderr
