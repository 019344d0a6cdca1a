"""OpenAPI v2 and v3 for the served kinds, generated from the official client's models:
`kubectl explain`, and `kubectl apply`/`kubectl create -f` with validation on."""

from __future__ import annotations

import json
import ssl
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from kubernetes.client import models

from tests.kubesim.test_kubectl import KUBECTL, kubectl
from tests.kubesim_process import ADMIN_TOKEN, Kubesim, kubesim_server

needs_kubectl = pytest.mark.skipif(KUBECTL is None, reason="no kubectl on this machine")
PROTOBUF = "application/com.github.proto-openapi.spec.v2@v1.0+protobuf"


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Kubesim]:
    with kubesim_server(tmp_path_factory.mktemp("kubesim-openapi"), tls=True) as server:
        yield server


def fetch(
    cluster: Kubesim, path: str, headers: dict[str, str] | None = None
) -> tuple[int, dict[str, str], bytes]:
    request = urllib.request.Request(
        cluster.url + path, headers={"Authorization": f"Bearer {ADMIN_TOKEN}", **(headers or {})}
    )
    context = ssl.create_default_context(
        cafile=str(cluster.kubeconfig.parent / "kubesim-tls" / "ca.crt")
    )
    try:
        with urllib.request.urlopen(request, timeout=10, context=context) as response:
            return response.status, dict(response.headers), response.read()
    except urllib.error.HTTPError as error:
        return error.code, dict(error.headers), error.read()


def v3(cluster: Kubesim, group_version_path: str) -> dict:  # type: ignore[type-arg]
    _, _, index = fetch(cluster, "/openapi/v3")
    url = json.loads(index)["paths"][group_version_path]["serverRelativeURL"]
    status, headers, body = fetch(cluster, url)
    assert status == 200 and headers["Cache-Control"] == "public, immutable"
    return json.loads(body)  # type: ignore[no-any-return]


def test_v3_has_a_document_for_every_served_group_version(cluster: Kubesim) -> None:
    _, _, index = fetch(cluster, "/openapi/v3")
    assert set(json.loads(index)["paths"]) == {
        "api/v1",
        "apis/apps/v1",
        "apis/events.k8s.io/v1",
        "apis/policy/v1",
        "apis/resource.k8s.io/v1",
    }
    core = v3(cluster, "api/v1")
    node = core["components"]["schemas"]["io.k8s.api.core.v1.Node"]
    assert node["x-kubernetes-group-version-kind"] == [
        {"group": "", "kind": "Node", "version": "v1"}
    ]
    assert node["description"].startswith("Node is a worker node in Kubernetes.")
    patch = core["paths"]["/api/v1/nodes/{name}"]["patch"]
    assert patch["x-kubernetes-group-version-kind"] == {
        "group": "",
        "kind": "Node",
        "version": "v1",
    }
    # kubectl looks for this parameter to leave validation to the server.
    assert "fieldValidation" in {p["name"] for p in patch["parameters"] if p["in"] == "query"}
    assert "application/strategic-merge-patch+json" in patch["requestBody"]["content"]
    apps = v3(cluster, "apis/apps/v1")
    assert "/apis/apps/v1/namespaces/{namespace}/daemonsets/{name}" in apps["paths"]


@pytest.mark.parametrize(
    ("definition", "model"),
    [
        ("io.k8s.api.core.v1.Node", "V1Node"),
        ("io.k8s.api.core.v1.NodeSpec", "V1NodeSpec"),
        ("io.k8s.api.core.v1.Taint", "V1Taint"),
        ("io.k8s.api.core.v1.PodSpec", "V1PodSpec"),
        ("io.k8s.api.apps.v1.DaemonSetStatus", "V1DaemonSetStatus"),
        ("io.k8s.api.events.v1.Event", "EventsV1Event"),
        ("io.k8s.apimachinery.pkg.apis.meta.v1.ListMeta", "V1ListMeta"),
    ],
)
def test_schemas_are_the_client_models(cluster: Kubesim, definition: str, model: str) -> None:
    _, _, body = fetch(cluster, "/openapi/v2", {"Accept": "application/json"})
    schema = json.loads(body)["definitions"][definition]
    cls = getattr(models, model)
    assert set(schema["properties"]) == set(cls.attribute_map.values())
    required = {
        cls.attribute_map[name]
        for name, field in cls.model_fields.items()
        if field.is_required() and name in cls.attribute_map
    }
    assert set(schema.get("required", [])) == required


def test_v2_types_refs_and_patch_keys(cluster: Kubesim) -> None:
    _, headers, body = fetch(cluster, "/openapi/v2", {"Accept": "application/json"})
    assert headers["Content-Type"] == "application/json"
    definitions = json.loads(body)["definitions"]
    taint = definitions["io.k8s.api.core.v1.Taint"]
    assert taint["required"] == ["effect", "key"]
    assert taint["properties"]["timeAdded"] == {
        "type": "string",
        "format": "date-time",
        "description": "TimeAdded represents the time at which the taint was added.",
    }
    spec = definitions["io.k8s.api.core.v1.PodSpec"]["properties"]
    assert spec["containers"]["items"] == {"$ref": "#/definitions/io.k8s.api.core.v1.Container"}
    # The merge keys of kubesim's own strategic merge patch.
    assert spec["containers"]["x-kubernetes-patch-merge-key"] == "name"
    budget = definitions["io.k8s.api.policy.v1.PodDisruptionBudgetSpec"]["properties"]
    int_or_string = "io.k8s.apimachinery.pkg.util.intstr.IntOrString"
    assert budget["minAvailable"]["$ref"] == f"#/definitions/{int_or_string}"
    assert definitions[int_or_string]["format"] == "int-or-string"


def test_v2_in_protobuf_and_etags(cluster: Kubesim) -> None:
    status, headers, body = fetch(cluster, "/openapi/v2", {"Accept": PROTOBUF})
    assert status == 200
    assert headers["Content-Type"] == "application/com.github.proto-openapi.spec.v2.v1.0+protobuf"
    assert body.startswith(b"\n\x032.0")  # field 1 (swagger), "2.0"
    again = {"Accept": PROTOBUF, "If-None-Match": headers["ETag"]}
    status, _, body = fetch(cluster, "/openapi/v2", again)
    assert (status, body) == (304, b"")
    assert fetch(cluster, "/openapi/v3/apis/nosuch/v1")[0] == 404


@needs_kubectl
def test_kubectl_explain(cluster: Kubesim) -> None:
    node = kubectl(cluster, "explain", "node").stdout
    assert "KIND:       Node" in node and "Node is a worker node in Kubernetes." in node
    taints = kubectl(cluster, "explain", "node.spec.taints").stdout
    assert "FIELD: taints <[]Taint>" in taints
    assert "effect\t<string> -required-" in taints and "timeAdded\t<string>" in taints
    budget = kubectl(cluster, "explain", "pdb.spec.minAvailable").stdout
    assert "FIELD: minAvailable <IntOrString>" in budget
    ds = kubectl(cluster, "explain", "ds.status.numberReady").stdout
    assert "GROUP:      apps" in ds and "<integer>" in ds
    v2 = kubectl(
        cluster, "explain", "pod.spec.containers.resources", "--output=plaintext-openapiv2"
    ).stdout
    assert "RESOURCE: resources <Object>" in v2 and "limits\t<map[string]string>" in v2


@needs_kubectl
def test_kubectl_apply_and_create_with_validation(cluster: Kubesim, tmp_path: Path) -> None:
    manifest = tmp_path / "node.yaml"
    manifest.write_text(
        "apiVersion: v1\nkind: Node\nmetadata:\n  name: gpu-extra-000\n  labels:\n"
        '    nvidia.com/gpu.present: "true"\n    gpu-pool: inference\n'
        'spec:\n  taints:\n  - {key: workload-inference, value: "true", effect: NoSchedule}\n'
    )
    assert kubectl(cluster, "apply", "-f", str(manifest)).stdout.strip() == (
        "node/gpu-extra-000 created"
    )
    assert kubectl(cluster, "apply", "-f", str(manifest)).stdout.strip() == (
        "node/gpu-extra-000 unchanged"
    )
    manifest.write_text(manifest.read_text().replace("gpu-pool: inference", "gpu-pool: mixed"))
    assert kubectl(cluster, "apply", "-f", str(manifest)).stdout.strip() == (
        "node/gpu-extra-000 configured"
    )
    node = cluster.core().read_node("gpu-extra-000")
    assert node.metadata.labels["gpu-pool"] == "mixed"
    assert "kubectl.kubernetes.io/last-applied-configuration" in node.metadata.annotations
    pod = tmp_path / "pod.yaml"
    pod.write_text(
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: trainer\n  namespace: research\n"
        "spec:\n  containers:\n  - name: main\n    image: example/trainer:1\n"
        "    resources:\n      limits:\n        nvidia.com/gpu: 1\n"
    )
    assert kubectl(cluster, "create", "-f", str(pod)).stdout.strip() == "pod/trainer created"
    # Validation stayed on: kubectl left it to the server, which the document says it does.
    writes = [
        e["requestURI"]
        for e in cluster.audit_events()
        if e["verb"] in ("create", "patch") and e["userAgent"].startswith("kubectl")
    ]
    assert len(writes) == 3 and all("fieldValidation=Strict" in uri for uri in writes)
