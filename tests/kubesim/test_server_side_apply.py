"""Server-side apply of nodes' labels and taints, with managedFields (issue 12.9).

The demo's a100-train-000 carries `gpu-pool: training`, set (as kubesim seeds it) by
`kubectl label` (manager kubectl-label) and its pool taint by `kubectl taint`.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from kubernetes.client.exceptions import ApiException

from tests.kubesim.conftest import kubectl, needs_kubectl
from tests.kubesim_process import Kubesim

NODE = "a100-train-000"
APPLY = "application/apply-patch+yaml"


def apply(sim: Kubesim, config: dict[str, Any], manager: str = "ops", force: bool = False) -> Any:
    body = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": NODE}, **config}
    return sim.core().patch_node(
        NODE, body, field_manager=manager, force=force or None, _content_type=APPLY
    )


def managers(node: Any) -> dict[str, Any]:
    return {(m.manager, m.operation): m.fields_v1 for m in node.metadata.managed_fields}


def test_an_apply_records_its_fields(kubesim: Kubesim) -> None:
    node = apply(kubesim, {"metadata": {"name": NODE, "labels": {"team": "vision"}}})
    assert node.metadata.labels["team"] == "vision"
    assert managers(node)[("ops", "Apply")] == {"f:metadata": {"f:labels": {"f:team": {}}}}
    # Applying the same value another manager owns shares the field: no conflict.
    shared = apply(kubesim, {"metadata": {"name": NODE, "labels": {"gpu-pool": "training"}}})
    assert managers(shared)[("ops", "Apply")] == {"f:metadata": {"f:labels": {"f:gpu-pool": {}}}}
    # And a field left out of the next apply goes, unless someone else owns it too.
    assert "team" not in shared.metadata.labels
    assert shared.metadata.labels["gpu-pool"] == "training"


def test_a_conflicting_apply_is_409_unless_forced(kubesim: Kubesim) -> None:
    change = {"metadata": {"name": NODE, "labels": {"gpu-pool": "inference"}}}
    with pytest.raises(ApiException) as caught:
        apply(kubesim, change)
    assert caught.value.status == 409
    assert json.loads(caught.value.body) == {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": 'Apply failed with 1 conflict: conflict with "kubectl-label" using v1: '
        ".metadata.labels.gpu-pool",
        "reason": "Conflict",
        "details": {
            "causes": [
                {
                    "reason": "FieldManagerConflict",
                    "message": 'conflict with "kubectl-label" using v1',
                    "field": ".metadata.labels.gpu-pool",
                }
            ]
        },
        "code": 409,
    }
    forced = apply(kubesim, change, force=True)
    assert forced.metadata.labels["gpu-pool"] == "inference"
    # The previous owner lost the field it was forced out of.
    assert "f:gpu-pool" not in json.dumps(managers(forced)[("kubectl-label", "Update")])


def test_taints_are_one_atomic_field(kubesim: Kubesim) -> None:
    taint = {"key": "workload-inference", "value": "true", "effect": "NoSchedule"}
    with pytest.raises(ApiException) as caught:
        apply(kubesim, {"spec": {"taints": [taint]}})
    message = json.loads(caught.value.body)["message"]
    assert message == (
        'Apply failed with 1 conflict: conflict with "kubectl-taint" using v1: .spec.taints'
    )
    # A cordon makes the node lifecycle controller the taints' owner.
    kubesim.core().patch_node(NODE, {"spec": {"unschedulable": True}})
    with pytest.raises(ApiException) as caught:
        apply(kubesim, {"spec": {"taints": [taint]}})
    assert (
        '"kube-controller-manager" using v1: .spec.taints'
        in json.loads(caught.value.body)["message"]
    )


def test_several_conflicts_are_listed_by_manager(kubesim: Kubesim) -> None:
    config = {
        "metadata": {"name": NODE, "labels": {"gpu-pool": "x", "workload-type": "x"}},
        "spec": {"taints": []},
    }
    with pytest.raises(ApiException) as caught:
        apply(kubesim, config)
    assert json.loads(caught.value.body)["message"] == (
        "Apply failed with 3 conflicts: "
        'conflicts with "kubectl-label" using v1:\n'
        "- .metadata.labels.gpu-pool\n"
        "- .metadata.labels.workload-type\n"
        'conflicts with "kubectl-taint" using v1:\n'
        "- .spec.taints"
    )


def test_an_update_takes_the_fields_it_changes(kubesim: Kubesim) -> None:
    core = kubesim.core()
    node = core.patch_node(
        NODE, {"metadata": {"labels": {"gpu-pool": "mixed"}}}, field_manager="portal"
    )
    owned = managers(node)
    assert owned[("portal", "Update")] == {"f:metadata": {"f:labels": {"f:gpu-pool": {}}}}
    assert "f:gpu-pool" not in json.dumps(owned[("kubectl-label", "Update")])


def test_apply_needs_a_field_manager(kubesim: Kubesim) -> None:
    with pytest.raises(ApiException) as caught:
        kubesim.core().patch_node(
            NODE,
            {"apiVersion": "v1", "kind": "Node", "metadata": {"name": NODE}},
            _content_type=APPLY,
        )
    assert caught.value.status == 422
    assert json.loads(caught.value.body)["message"] == (
        'PatchOptions.meta.k8s.io "" is invalid: fieldManager: Required value: '
        "is required for apply patch"
    )


def test_an_unknown_field_in_an_apply_is_a_500_as_real(kubesim: Kubesim) -> None:
    # The real server still answers a plain error here (kubernetes/kubernetes#122480).
    with pytest.raises(ApiException) as caught:
        apply(kubesim, {"spec": {"bogus": 1}})
    assert caught.value.status == 500
    assert json.loads(caught.value.body)["message"] == (
        f"failed to create typed patch object (/{NODE}; /v1, Kind=Node): "
        ".spec.bogus: field not declared in schema"
    )


@needs_kubectl
def test_kubectl_apply_server_side(tls_kubesim: Kubesim, tmp_path: Path) -> None:
    manifest = tmp_path / "node.yaml"
    manifest.write_text(
        f"apiVersion: v1\nkind: Node\nmetadata:\n  name: {NODE}\n"
        "  labels:\n    gpu-pool: inference\n"
    )
    refused = kubectl(
        tls_kubesim, "apply", "--server-side", "--validate=false", "-f", str(manifest), check=False
    )
    assert refused.returncode != 0
    assert (
        'Apply failed with 1 conflict: conflict with "kubectl-label" using v1: '
        ".metadata.labels.gpu-pool"
    ) in refused.stderr
    forced = kubectl(
        tls_kubesim,
        "apply",
        "--server-side",
        "--force-conflicts",
        "--validate=false",
        "-f",
        str(manifest),
    )
    assert forced.stdout.strip() == f"node/{NODE} serverside-applied"
    node = json.loads(
        kubectl(tls_kubesim, "get", "node", NODE, "-o", "json", "--show-managed-fields").stdout
    )
    assert node["metadata"]["labels"]["gpu-pool"] == "inference"
    assert {"manager": "kubectl", "operation": "Apply"}.items() <= node["metadata"][
        "managedFields"
    ][0].items()
