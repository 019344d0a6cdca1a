"""Least privilege: the ClusterRole grants exactly what the portal does, to its account only."""

from __future__ import annotations

from tests.deploy.chart import NAMESPACE, all_on_docs, default_docs, deployment, of_kind, render

# (API group, resource, verb): the inventory and watcher read nodes and pods (and list DRA's
# devices, classes and claims), a move patches nodes, a drain evicts pods, a pool's
# maintenance headroom lists the disruption budgets. Nothing else: no
# delete, no pod writes, no secrets, and no rule the portal never calls
# (tests/deploy/test_rbac_chart.py proves each is called).
EXPECTED = {
    ("", "nodes", "get"),
    ("", "nodes", "list"),
    ("", "nodes", "watch"),
    ("", "nodes", "patch"),
    ("", "pods", "list"),
    ("", "pods", "watch"),
    ("", "pods/eviction", "create"),
    ("resource.k8s.io", "resourceslices", "list"),
    ("resource.k8s.io", "deviceclasses", "list"),
    ("resource.k8s.io", "resourceclaims", "list"),
    ("resource.k8s.io", "resourceclaimtemplates", "list"),
    ("policy", "poddisruptionbudgets", "list"),
}


def granted(role: dict) -> set[tuple[str, str, str]]:  # type: ignore[type-arg]
    triples = set()
    for rule in role["rules"]:
        # Every key widens or narrows a rule: only the three the expectation speaks of.
        assert set(rule) == {"apiGroups", "resources", "verbs"}, rule
        for group in rule["apiGroups"]:
            for resource in rule["resources"]:
                for verb in rule["verbs"]:
                    assert "*" not in (group, resource, verb), rule
                    triples.add((group, resource, verb))
    return triples


def test_the_cluster_role_has_exactly_the_rules_the_portal_uses() -> None:
    for docs in (default_docs(), all_on_docs()):
        (role,) = of_kind(docs, "ClusterRole")
        assert granted(role) == EXPECTED
        assert of_kind(docs, "Role") == [] and of_kind(docs, "RoleBinding") == []


def test_the_new_node_drill_gets_node_create_and_delete_only_when_asked() -> None:
    (role,) = of_kind(render(sets=("rbac.newNodeDrills=true",)), "ClusterRole")
    assert granted(role) == EXPECTED | {("", "nodes", "create"), ("", "nodes", "delete")}


def test_the_role_is_bound_to_the_charts_service_account_only() -> None:
    docs = default_docs()
    (role,) = of_kind(docs, "ClusterRole")
    (binding,) = of_kind(docs, "ClusterRoleBinding")
    (account,) = of_kind(docs, "ServiceAccount")
    assert binding["roleRef"] == {
        "apiGroup": "rbac.authorization.k8s.io",
        "kind": "ClusterRole",
        "name": role["metadata"]["name"],
    }
    assert binding["subjects"] == [
        {"kind": "ServiceAccount", "name": account["metadata"]["name"], "namespace": NAMESPACE}
    ]
    for component in ("web", "worker", "watcher"):
        spec = deployment(docs, component)["spec"]["template"]["spec"]
        assert spec["serviceAccountName"] == account["metadata"]["name"]


def test_rbac_and_the_account_can_be_managed_outside_the_chart() -> None:
    docs = render(
        sets=("rbac.create=false", "serviceAccount.create=false", "serviceAccount.name=ops")
    )
    assert of_kind(docs, "ClusterRole") == [] and of_kind(docs, "ServiceAccount") == []
    assert deployment(docs, "worker")["spec"]["template"]["spec"]["serviceAccountName"] == "ops"
