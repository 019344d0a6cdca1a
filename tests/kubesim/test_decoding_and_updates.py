"""Empty fields omitted, unknown fields, wrong types, immutable fields, bad options
(issue 12.4 and 12.5), as the real server decodes and validates writes."""

from __future__ import annotations

import json
from typing import Any

import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from tests.kubesim.conftest import http, kubectl, needs_kubectl
from tests.kubesim_process import Kubesim

NODE = "gpu-new-000"
SMP = "application/strategic-merge-patch+json"


def status(exc: ApiException) -> dict[str, Any]:
    return json.loads(exc.body)  # type: ignore[no-any-return]


# --- 12.4: empty lists and maps are not served ---


def test_an_untainted_node_has_no_taints_field(kubesim: Kubesim) -> None:
    core = kubesim.core()
    assert core.read_node(NODE).spec.taints is None
    raw = http(kubesim, "GET", f"/api/v1/nodes/{NODE}").json()
    assert "taints" not in raw["spec"]
    # Writing an empty list or map stores nothing either.
    core.patch_node(NODE, {"spec": {"taints": []}, "metadata": {"annotations": {}}})
    core.replace_node(NODE, core.read_node(NODE))
    raw = http(kubesim, "GET", f"/api/v1/nodes/{NODE}").json()
    assert "taints" not in raw["spec"]
    created = core.create_namespaced_pod(
        "default",
        {
            "metadata": {"name": "bare", "labels": {}},
            "spec": {"containers": [{"name": "m", "image": "i", "env": []}], "tolerations": []},
        },
    )
    assert created.metadata.labels is None
    # The only tolerations are the ones DefaultTolerationSeconds adds.
    assert {t.key for t in created.spec.tolerations} == {
        "node.kubernetes.io/not-ready",
        "node.kubernetes.io/unreachable",
    }
    raw = http(kubesim, "GET", "/api/v1/namespaces/default/pods/bare").json()
    assert "labels" not in raw["metadata"] and "env" not in raw["spec"]["containers"][0]
    # Empty structs stay, as Go serialises them.
    assert raw["spec"]["securityContext"] == {}


# --- 12.5: unknown fields ---


def test_an_unknown_field_is_dropped_with_a_warning(kubesim: Kubesim) -> None:
    answer = http(
        kubesim,
        "PATCH",
        f"/api/v1/nodes/{NODE}",
        {"spec": {"bogus": 1}, "metadata": {"labels": {"a": "b"}}},
        content_type=SMP,
    )
    assert answer.status == 200
    assert answer.headers.get_all("Warning") == ['299 - "unknown field \\"spec.bogus\\""']
    assert "bogus" not in answer.json()["spec"]
    assert answer.json()["metadata"]["labels"]["a"] == "b"


def test_strict_field_validation_refuses_unknown_fields(kubesim: Kubesim) -> None:
    patched = http(
        kubesim,
        "PATCH",
        f"/api/v1/nodes/{NODE}?fieldValidation=Strict",
        {"spec": {"bogus": 1}},
        content_type=SMP,
    )
    assert patched.status == 422
    assert patched.json()["message"] == (
        ' "" is invalid: patch: Invalid value: "map[spec:map[bogus:1]]": '
        'strict decoding error: unknown field "spec.bogus"'
    )
    created = http(
        kubesim,
        "POST",
        "/api/v1/namespaces/default/pods?fieldValidation=Strict",
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": "x"},
            "spec": {"containers": [{"name": "m", "image": "i", "colour": "red"}]},
        },
    )
    assert created.status == 400
    assert created.json()["message"] == (
        'Pod in version "v1" cannot be handled as a Pod: strict decoding error: '
        'unknown field "spec.containers[0].colour"'
    )


# --- wrong types ---


def test_a_number_as_a_label_value_is_refused(kubesim: Kubesim) -> None:
    created = http(
        kubesim,
        "POST",
        "/api/v1/namespaces/default/pods",
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": "x", "labels": {"version": 5}},
            "spec": {"containers": [{"name": "m", "image": "i"}]},
        },
    )
    assert created.status == 400
    assert created.json()["message"] == (
        'Pod in version "v1" cannot be handled as a Pod: json: cannot unmarshal number into '
        "Go struct field ObjectMeta.metadata.labels of type string"
    )
    with pytest.raises(ApiException) as caught:
        kubesim.core().patch_node(NODE, {"metadata": {"annotations": {"a": True}}})
    assert caught.value.status == 422
    assert status(caught.value)["message"] == (
        ' "" is invalid: patch: Invalid value: "map[metadata:map[annotations:map[a:true]]]": '
        "cannot convert bool to string"
    )
    merged = http(
        kubesim,
        "PATCH",
        f"/api/v1/nodes/{NODE}",
        {"metadata": {"labels": {"a": 5}}},
        content_type="application/merge-patch+json",
    )
    assert merged.status == 422
    assert merged.json()["message"].endswith(
        ": json: cannot unmarshal number into Go struct field ObjectMeta.metadata.labels of "
        "type string"
    )


# --- immutable fields ---


def test_uid_is_immutable(kubesim: Kubesim) -> None:
    core = kubesim.core()
    uid = core.read_node(NODE).metadata.uid
    with pytest.raises(ApiException) as caught:
        core.patch_node(NODE, {"metadata": {"uid": "other"}})
    assert caught.value.status == 422
    assert status(caught.value)["message"] == (
        f'Node "{NODE}" is invalid: metadata.uid: Invalid value: "other": field is immutable'
    )
    # A PUT naming another uid fails the precondition its uid implies, in etcd's storage
    # layer (a StorageError on the node's key: nodes are kept as minions).
    node = core.read_node(NODE)
    node.metadata.uid = "other"
    with pytest.raises(ApiException) as caught:
        core.replace_node(NODE, node)
    assert caught.value.status == 409
    assert status(caught.value)["message"] == (
        f'Operation cannot be fulfilled on nodes "{NODE}": StorageError: invalid object, '
        f"Code: 4, Key: /registry/minions/{NODE}, ResourceVersion: 0, AdditionalErrorMsg: "
        f"Precondition failed: UID in precondition: other, UID in object meta: {uid}"
    )


def test_a_set_pod_cidr_is_immutable(kubesim: Kubesim) -> None:
    with pytest.raises(ApiException) as caught:
        kubesim.core().patch_node(NODE, {"spec": {"podCIDR": "10.99.0.0/24"}})
    assert caught.value.status == 422
    assert status(caught.value)["message"] == (
        f'Node "{NODE}" is invalid: spec.podCIDRs: Forbidden: node updates may not change '
        'podCIDR except from "" to valid'
    )


def test_the_name_cannot_change(kubesim: Kubesim) -> None:
    with pytest.raises(ApiException) as caught:
        kubesim.core().patch_node(NODE, {"metadata": {"name": "renamed"}})
    assert caught.value.status == 400
    assert status(caught.value)["message"] == (
        f"the name of the object (renamed) does not match the name on the URL ({NODE})"
    )


# --- options and evictions ---


def test_an_invalid_dry_run_is_refused(kubesim: Kubesim) -> None:
    with pytest.raises(ApiException) as caught:
        kubesim.core().patch_node(NODE, {"metadata": {"labels": {"a": "b"}}}, dry_run="Yes")
    assert caught.value.status == 422
    assert status(caught.value) == {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": 'PatchOptions.meta.k8s.io "" is invalid: dryRun: Unsupported value: '
        '[]string{"Yes"}: supported values: "All"',
        "reason": "Invalid",
        "details": {
            "kind": "PatchOptions",
            "group": "meta.k8s.io",
            "causes": [
                {
                    "reason": "FieldValueNotSupported",
                    "message": 'Unsupported value: []string{"Yes"}: supported values: "All"',
                    "field": "dryRun",
                }
            ],
        },
        "code": 422,
    }
    assert kubesim.core().read_node(NODE).metadata.labels.get("a") is None


def test_an_eviction_naming_another_pod_is_400(kubesim: Kubesim) -> None:
    with pytest.raises(ApiException) as caught:
        kubesim.core().create_namespaced_pod_eviction(
            "notebook-a100-reserve-000",
            "research",
            client.V1Eviction(metadata=client.V1ObjectMeta(name="notebook-a100-reserve-001")),
        )
    assert caught.value.status == 400
    assert status(caught.value)["message"] == "name in URL does not match name in Eviction object"


@pytest.mark.parametrize(
    ("kind", "api_version", "problem"),
    [
        ("Pod", "v1", "converting (v1.Pod) to (policy.Eviction): unknown conversion"),
        (
            "Pod",
            None,  # defaulted to the endpoint's, policy/v1
            'no kind "Pod" is registered for version "policy/v1" in scheme '
            '"pkg/runtime/scheme.go:111"',
        ),
        (
            "Eviction",
            "v1",
            'no kind "Eviction" is registered for version "v1" in scheme '
            '"pkg/runtime/scheme.go:111"',
        ),
    ],
)
def test_an_eviction_sent_as_another_kind_is_400(
    kubesim_shared: Kubesim, kind: str, api_version: str | None, problem: str
) -> None:
    """The body must decode to an Eviction, in the scheme's words (K13); nothing is evicted."""
    pod = "notebook-a100-reserve-001"
    body = {"kind": kind, "metadata": {"name": pod}}
    if api_version:
        body["apiVersion"] = api_version
    answer = http(kubesim_shared, "POST", f"/api/v1/namespaces/research/pods/{pod}/eviction", body)
    shown = kind, (api_version or "policy/v1").rpartition("/")[2]
    assert (answer.status, answer.json()) == (
        400,
        {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": f'{shown[0]} in version "{shown[1]}" cannot be handled as a Eviction: '
            + problem,
            "reason": "BadRequest",
            "code": 400,
        },
    )
    assert (
        not kubesim_shared.core().read_namespaced_pod(pod, "research").metadata.deletion_timestamp
    )


def test_a_node_written_as_a_pod_is_400(kubesim_shared: Kubesim) -> None:
    body = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": NODE}}
    answer = http(kubesim_shared, "PUT", f"/api/v1/nodes/{NODE}", body)
    assert (answer.status, answer.json()["message"]) == (
        400,
        'Pod in version "v1" cannot be handled as a Node: converting (v1.Pod) to (core.Node): '
        "unknown conversion",
    )


@needs_kubectl
def test_kubectl_shows_the_warning_and_the_refusals(tls_kubesim: Kubesim) -> None:
    warned = kubectl(tls_kubesim, "patch", "node", NODE, "-p", '{"spec":{"bogus":1}}')
    assert 'Warning: unknown field "spec.bogus"' in warned.stderr
    refused = kubectl(
        tls_kubesim, "patch", "node", NODE, "-p", '{"spec":{"podCIDR":"10.9.0.0/24"}}', check=False
    )
    assert refused.returncode != 0
    assert (
        f'The Node "{NODE}" is invalid: spec.podCIDRs: Forbidden: node updates may not change '
        'podCIDR except from "" to valid'
    ) in refused.stderr
