"""RBAC for service-account tokens from --rbac FILE (issue 12.6)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from tests.kubesim.conftest import kubectl, needs_kubectl
from tests.kubesim_process import Kubesim, kubesim_server

PORTAL = "system:serviceaccount:gpu-portal:portal"
VIEWER = "system:serviceaccount:gpu-portal:viewer"
RBAC = """
apiVersion: v1
kind: ServiceAccount
metadata: {name: portal, namespace: gpu-portal}
---
apiVersion: v1
kind: ServiceAccount
metadata: {name: viewer, namespace: gpu-portal}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: gpu-portal}
rules:
  - apiGroups: [""]
    resources: [nodes]
    verbs: [get, list, watch, patch]
  - apiGroups: [""]
    resources: [pods]
    verbs: [get, list, watch]
  - apiGroups: [""]
    resources: [pods/eviction]
    verbs: [create]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: gpu-portal}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: gpu-portal}
subjects: [{kind: ServiceAccount, name: portal, namespace: gpu-portal}]
---
apiVersion: v1
kind: List
items:
  - apiVersion: rbac.authorization.k8s.io/v1
    kind: Role
    metadata: {name: pod-reader, namespace: research}
    rules: [{apiGroups: [""], resources: [pods], verbs: [get, list]}]
  - apiVersion: rbac.authorization.k8s.io/v1
    kind: RoleBinding
    metadata: {name: viewer-reads-research, namespace: research}
    roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: pod-reader}
    subjects: [{kind: ServiceAccount, name: viewer, namespace: gpu-portal}]
  - apiVersion: rbac.authorization.k8s.io/v1
    kind: ClusterRoleBinding
    metadata: {name: viewer-missing}
    roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: missing}
    subjects: [{kind: ServiceAccount, name: viewer, namespace: gpu-portal}]
"""


@pytest.fixture
def secured(tmp_path: Path) -> Iterator[Kubesim]:
    rbac = tmp_path / "rbac.yaml"
    rbac.write_text(RBAC)
    with kubesim_server(tmp_path, tls=True, extra=["--rbac", str(rbac)]) as server:
        yield server


def as_user(sim: Kubesim, user: str) -> client.ApiClient:
    from kubernetes import config

    return config.new_client_from_config(config_file=str(sim.kubeconfig), context=user)


def message(exc: ApiException) -> str:
    return str(json.loads(exc.body)["message"])


def test_a_role_allows_what_it_names_and_nothing_else(secured: Kubesim) -> None:
    core = client.CoreV1Api(as_user(secured, PORTAL))
    assert len(core.list_node().items) == 25
    core.patch_node("gpu-new-000", {"metadata": {"labels": {"gpu-pool": "mixed"}}})
    with pytest.raises(ApiException) as caught:
        core.delete_node("gpu-new-000")
    assert caught.value.status == 403
    assert message(caught.value) == (
        f'nodes "gpu-new-000" is forbidden: User "{PORTAL}" cannot delete resource "nodes" '
        'in API group "" at the cluster scope'
    )
    assert json.loads(caught.value.body)["details"] == {"name": "gpu-new-000", "kind": "nodes"}


def test_namespaced_and_subresource_refusals(secured: Kubesim) -> None:
    viewer = client.CoreV1Api(as_user(secured, VIEWER))
    assert viewer.list_namespaced_pod("research").items
    with pytest.raises(ApiException) as caught:
        viewer.list_namespaced_pod("ml-serving")
    # The binding to a role that does not exist is named as the RBAC authorizer names it.
    assert message(caught.value) == (
        f'pods is forbidden: User "{VIEWER}" cannot list resource "pods" in API group "" in '
        'the namespace "ml-serving": RBAC: clusterrole.rbac.authorization.k8s.io "missing" '
        "not found"
    )
    with pytest.raises(ApiException) as caught:
        viewer.create_namespaced_pod_eviction(
            "notebook-a100-reserve-000",
            "research",
            client.V1Eviction(metadata=client.V1ObjectMeta(name="notebook-a100-reserve-000")),
        )
    assert message(caught.value).startswith(
        f'pods "notebook-a100-reserve-000" is forbidden: User "{VIEWER}" cannot create '
        'resource "pods/eviction" in API group "" in the namespace "research"'
    )


def test_self_subject_access_review(secured: Kubesim) -> None:
    reviews = client.AuthorizationV1Api(as_user(secured, PORTAL))
    review = reviews.create_self_subject_access_review(
        client.V1SelfSubjectAccessReview(
            spec=client.V1SelfSubjectAccessReviewSpec(
                resource_attributes=client.V1ResourceAttributes(verb="patch", resource="nodes")
            )
        )
    )
    assert review.status.allowed is True
    assert review.status.reason == (
        'RBAC: allowed by ClusterRoleBinding "gpu-portal" of ClusterRole "gpu-portal" to '
        'ServiceAccount "portal/gpu-portal"'
    )
    denied = reviews.create_self_subject_access_review(
        client.V1SelfSubjectAccessReview(
            spec=client.V1SelfSubjectAccessReviewSpec(
                resource_attributes=client.V1ResourceAttributes(verb="delete", resource="nodes")
            )
        )
    )
    assert denied.status.allowed is False


def test_the_admin_and_read_only_tokens_keep_their_powers(secured: Kubesim) -> None:
    secured.core().delete_namespaced_pod("big-train", "ml-training")
    with pytest.raises(ApiException) as caught:
        secured.core(read_only=True).patch_node("gpu-new-000", {"metadata": {"labels": {"a": "b"}}})
    assert caught.value.status == 403


@needs_kubectl
def test_kubectl_auth_can_i(secured: Kubesim) -> None:
    yes = kubectl(secured, "auth", "can-i", "patch", "nodes", context=PORTAL)
    assert yes.stdout.strip() == "yes"
    no = kubectl(secured, "auth", "can-i", "delete", "nodes", context=PORTAL, check=False)
    assert (no.returncode, no.stdout.strip()) == (1, "no")
    evict = kubectl(
        secured,
        "auth",
        "can-i",
        "create",
        "pods",
        "--subresource=eviction",
        "-n",
        "research",
        context=PORTAL,
    )
    assert evict.stdout.strip() == "yes"
    listed = kubectl(secured, "auth", "can-i", "--list", context=PORTAL).stdout
    rows = {line.split()[0]: line for line in listed.splitlines()[1:]}
    assert "[get list watch patch]" in rows["nodes"]
    kubectl(secured, "label", "node", "gpu-new-000", "x=y", context=PORTAL)
    refused = kubectl(secured, "delete", "node", "gpu-new-000", context=PORTAL, check=False)
    assert refused.stderr.strip() == (
        f'Error from server (Forbidden): nodes "gpu-new-000" is forbidden: User "{PORTAL}" '
        'cannot delete resource "nodes" in API group "" at the cluster scope'
    )


@needs_kubectl
def test_impersonation_answers_for_the_impersonated_user(secured: Kubesim) -> None:
    """Impersonate-User and Impersonate-Group, as test_k3_... proves on the real control
    plane (K3): the admin may impersonate anyone, and is then only what they are."""
    nobody = "system:serviceaccount:default:nobody"
    no = kubectl(secured, "auth", "can-i", "patch", "nodes", f"--as={nobody}", check=False)
    assert (no.returncode, no.stdout.strip()) == (1, "no")
    yes = kubectl(secured, "auth", "can-i", "patch", "nodes", f"--as={PORTAL}")
    assert yes.stdout.strip() == "yes"
    refused = kubectl(secured, "delete", "node", "gpu-new-000", f"--as={PORTAL}", check=False)
    assert refused.stderr.strip() == (
        f'Error from server (Forbidden): nodes "gpu-new-000" is forbidden: User "{PORTAL}" '
        'cannot delete resource "nodes" in API group "" at the cluster scope'
    )
    # A caller without the impersonate verb is refused, in 1.37's words.
    denied = kubectl(secured, "get", "nodes", "--as=alice", context=VIEWER, check=False)
    assert denied.stderr.strip() == (
        f'Error from server (Forbidden): nodes is forbidden: User "{VIEWER}" cannot '
        'impersonate-on:user-info:list resource "nodes" in API group "" at the cluster scope'
    )


@needs_kubectl
def test_without_rbac_the_two_tokens_answer_as_before(tls_kubesim: Kubesim) -> None:
    reader = "kubesim-readonly"
    assert (
        kubectl(tls_kubesim, "auth", "can-i", "list", "nodes", context=reader).stdout.strip()
        == "yes"
    )
    no = kubectl(tls_kubesim, "auth", "can-i", "patch", "nodes", context=reader, check=False)
    assert (no.returncode, no.stdout.strip()) == (1, "no")
    assert kubectl(tls_kubesim, "auth", "can-i", "delete", "nodes").stdout.strip() == "yes"
