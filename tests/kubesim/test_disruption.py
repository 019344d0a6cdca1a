"""PodDisruptionBudgets as the disruption controller and eviction.go handle them (issue 12.2).

The demo's ml-serving namespace has ten chat-serving pods (a ReplicaSet's, two on each
a100-infer node) and five embedder pods; ml-training's llm-pretrain pods belong to Jobs.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from tests.kubesim.conftest import http, kubectl, needs_kubectl
from tests.kubesim_process import Kubesim

NS = "ml-serving"
CHAT = {"matchLabels": {"app": "chat-serving"}}


def budget(sim: Kubesim, name: str, spec: dict[str, Any], namespace: str = NS) -> dict[str, Any]:
    answer = http(
        sim,
        "POST",
        f"/apis/policy/v1/namespaces/{namespace}/poddisruptionbudgets",
        {
            "apiVersion": "policy/v1",
            "kind": "PodDisruptionBudget",
            "metadata": {"name": name},
            "spec": spec,
        },
    )
    assert answer.status == 201, answer.body
    return status_of(sim, name, namespace)


def status_of(sim: Kubesim, name: str, namespace: str = NS) -> dict[str, Any]:
    path = f"/apis/policy/v1/namespaces/{namespace}/poddisruptionbudgets/{name}"
    return http(sim, "GET", path).json()["status"]  # type: ignore[no-any-return]


def evict(sim: Kubesim, pod: str, namespace: str = NS) -> Any:
    return http(
        sim,
        "POST",
        f"/api/v1/namespaces/{namespace}/pods/{pod}/eviction",
        {
            "apiVersion": "policy/v1",
            "kind": "Eviction",
            "metadata": {"name": pod, "namespace": namespace},
        },
    )


def test_a_budgets_status_is_kept_current(kubesim: Kubesim) -> None:
    status = budget(kubesim, "chat", {"minAvailable": 4, "selector": CHAT})
    condition = status.pop("conditions")[0]
    assert status == {
        "observedGeneration": 1,
        "disruptionsAllowed": 6,
        "currentHealthy": 10,
        "desiredHealthy": 4,
        "expectedPods": 10,
    }
    assert (condition["type"], condition["status"], condition["reason"]) == (
        "DisruptionAllowed",
        "True",
        "SufficientPods",
    )
    # The official client reads it too.
    read = client.PolicyV1Api(kubesim.api_client()).read_namespaced_pod_disruption_budget(
        "chat", NS
    )
    assert read.status.disruptions_allowed == 6


@pytest.mark.parametrize(
    ("spec", "expected", "desired", "allowed"),
    [
        ({"minAvailable": "50%", "selector": CHAT}, 10, 5, 5),
        ({"maxUnavailable": "25%", "selector": CHAT}, 10, 7, 3),  # 2.5 rounded up
        ({"maxUnavailable": 2, "selector": CHAT}, 10, 8, 2),
        (
            {
                "minAvailable": 13,
                "selector": {
                    "matchExpressions": [
                        {"key": "app", "operator": "In", "values": ["chat-serving", "embedder"]}
                    ]
                },
            },
            15,
            13,
            2,
        ),
    ],
)
def test_integers_percentages_and_set_based_selectors(
    kubesim: Kubesim, spec: dict[str, Any], expected: int, desired: int, allowed: int
) -> None:
    status = budget(kubesim, "b", spec)
    assert (status["expectedPods"], status["desiredHealthy"], status["disruptionsAllowed"]) == (
        expected,
        desired,
        allowed,
    )


def test_no_disruption_allowed_is_429_without_retry_after(kubesim: Kubesim) -> None:
    budget(kubesim, "chat", {"minAvailable": "100%", "selector": CHAT})
    answer = evict(kubesim, "chat-serving-a100-infer-000-0")
    assert answer.status == 429
    assert "Retry-After" not in answer.headers
    assert answer.json() == {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": "Cannot evict pod as it would violate the pod's disruption budget.",
        "reason": "TooManyRequests",
        "details": {
            "causes": [
                {
                    "reason": "DisruptionBudget",
                    "message": "The disruption budget chat needs 10 healthy pods and has 10 "
                    "currently",
                }
            ]
        },
        "code": 429,
    }


def test_a_stale_budget_answers_429_retry_after_10(kubesim: Kubesim) -> None:
    kubesim.control("controllers", {"disruption": False})
    status = budget(kubesim, "chat", {"minAvailable": 1, "selector": CHAT})
    assert "observedGeneration" not in status
    answer = evict(kubesim, "chat-serving-a100-infer-000-0")
    assert answer.status == 429
    assert answer.headers["Retry-After"] == "10"
    details = answer.json()["details"]
    assert details["retryAfterSeconds"] == 10
    assert details["causes"][0]["message"] == (
        "The disruption budget chat is still being processed by the server."
    )
    kubesim.control("controllers", {"disruption": True})
    assert evict(kubesim, "chat-serving-a100-infer-000-0").status == 201


def test_an_approved_eviction_is_recorded_in_the_budget(kubesim: Kubesim) -> None:
    budget(kubesim, "chat", {"minAvailable": 9, "selector": CHAT})
    kubesim.control("controllers", {"disruption": False})
    assert evict(kubesim, "chat-serving-a100-infer-001-1").status == 201
    status = status_of(kubesim, "chat")
    assert status["disruptionsAllowed"] == 0
    assert list(status["disruptedPods"]) == ["chat-serving-a100-infer-001-1"]
    kubesim.control("controllers", {"disruption": True})
    # The controller sees the pod terminating: it no longer counts, and leaves the map.
    status = status_of(kubesim, "chat")
    assert (status["currentHealthy"], status["disruptionsAllowed"]) == (9, 0)
    assert "disruptedPods" not in status
    second = evict(kubesim, "chat-serving-a100-infer-002-0")
    assert second.status == 429
    assert "needs 9 healthy pods and has 9 currently" in second.body.decode()


def test_the_expected_count_stays_at_the_controllers_scale_after_an_eviction(
    kubesim: Kubesim,
) -> None:
    """maxUnavailable 1 over a ReplicaSet's ten pods: once the evicted pod is gone, the
    budget still expects ten and allows nothing until a replacement is Ready (K1, as
    test_k1_... proves on the real control plane)."""
    budget(kubesim, "chat", {"maxUnavailable": 1, "selector": CHAT})
    first = "chat-serving-a100-infer-000-0"
    replacement = kubesim.core().read_namespaced_pod(first, NS)
    assert evict(kubesim, first).status == 201
    kubesim.control("clock", {"advance": 60})  # its grace period is over: it is gone
    status = status_of(kubesim, "chat")
    assert (status["expectedPods"], status["currentHealthy"], status["desiredHealthy"]) == (
        10,
        9,
        9,
    )
    answer = evict(kubesim, "chat-serving-a100-infer-001-0")
    assert answer.status == 429
    assert "needs 9 healthy pods and has 9 currently" in answer.body.decode()
    # The ReplicaSet's replacement, once Ready, makes room for the next eviction.
    meta = replacement.metadata
    owners = kubesim.api_client().sanitize_for_serialization(meta.owner_references)
    kubesim.core().create_namespaced_pod(
        NS,
        {
            "metadata": {
                "name": "chat-serving-replacement",
                "labels": meta.labels,
                "ownerReferences": owners,
            },
            "spec": {
                "nodeName": replacement.spec.node_name,
                "containers": [{"name": "main", "image": "registry.example/chat-serving:1.0"}],
            },
        },
    )
    assert status_of(kubesim, "chat")["expectedPods"] == 10
    assert evict(kubesim, "chat-serving-a100-infer-001-0").status == 201


def test_two_budgets_for_one_pod_answer_500(kubesim: Kubesim) -> None:
    budget(kubesim, "one", {"minAvailable": 1, "selector": CHAT})
    budget(kubesim, "two", {"maxUnavailable": 5, "selector": CHAT})
    answer = evict(kubesim, "chat-serving-a100-infer-000-0")
    assert answer.status == 500
    assert answer.json() == {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": "This pod has more than one PodDisruptionBudget, which the eviction "
        "subresource does not support.",
        "code": 500,
    }


def test_pods_not_running_ignore_budgets(kubesim: Kubesim) -> None:
    budget(kubesim, "chat", {"minAvailable": "100%", "selector": CHAT})
    core = kubesim.core()
    core.create_namespaced_pod(
        NS,
        {
            "metadata": {"name": "chat-pending", "labels": {"app": "chat-serving"}},
            "spec": {
                "nodeSelector": {"no-such": "node"},
                "containers": [{"name": "main", "image": "chat:1"}],
            },
        },
    )
    assert evict(kubesim, "chat-pending").status == 201
    with pytest.raises(ApiException) as caught:
        core.read_namespaced_pod("chat-pending", NS)
    assert caught.value.status == 404


def set_ready(sim: Kubesim, pod: str, ready: str) -> None:
    core = sim.core()
    current = core.read_namespaced_pod(pod, NS)
    conditions = [
        {"type": c.type, "status": ready if c.type == "Ready" else c.status}
        for c in current.status.conditions
    ]
    core.patch_namespaced_pod_status(pod, NS, {"status": {"conditions": conditions}})


def test_health_counts_the_ready_condition_not_the_phase(kubesim: Kubesim) -> None:
    budget(kubesim, "chat", {"minAvailable": "100%", "selector": CHAT})
    set_ready(kubesim, "chat-serving-a100-infer-003-0", "False")
    status = status_of(kubesim, "chat")
    assert (status["currentHealthy"], status["desiredHealthy"]) == (9, 10)
    pod = kubesim.core().read_namespaced_pod("chat-serving-a100-infer-003-0", NS)
    assert pod.status.phase == "Running"
    # An unready pod of an unhealthy budget is refused (IfHealthyBudget, the default)...
    assert evict(kubesim, "chat-serving-a100-infer-003-0").status == 429


def test_an_unready_pod_may_go_when_its_budget_is_healthy(kubesim: Kubesim) -> None:
    budget(kubesim, "chat", {"minAvailable": 5, "selector": CHAT})
    set_ready(kubesim, "chat-serving-a100-infer-003-0", "False")
    assert status_of(kubesim, "chat")["disruptionsAllowed"] == 4
    assert evict(kubesim, "chat-serving-a100-infer-003-0").status == 201
    # ...and does not use up a disruption: the budget still allows four.
    assert status_of(kubesim, "chat")["disruptionsAllowed"] == 4


def test_always_allow_lets_unready_pods_go(kubesim: Kubesim) -> None:
    spec = {"minAvailable": "100%", "selector": CHAT, "unhealthyPodEvictionPolicy": "AlwaysAllow"}
    budget(kubesim, "chat", spec)
    set_ready(kubesim, "chat-serving-a100-infer-004-1", "False")
    assert evict(kubesim, "chat-serving-a100-infer-004-1").status == 201


def test_a_budget_over_job_pods_by_percentage_fails_safe(kubesim: Kubesim) -> None:
    status = budget(
        kubesim,
        "pretrain",
        {"maxUnavailable": 1, "selector": {"matchLabels": {"app": "llm-pretrain"}}},
        namespace="ml-training",
    )
    # A Job has no scale subresource: the controller cannot compute the budget.
    (condition,) = status["conditions"]
    assert condition["reason"] == "SyncFailed"
    assert condition["message"] == "jobs.batch does not implement the scale subresource"
    assert status["disruptionsAllowed"] == 0 and "observedGeneration" not in status
    answer = evict(kubesim, "llm-pretrain-a100-train-000", namespace="ml-training")
    assert answer.status == 429
    assert "is still being processed by the server" in answer.body.decode()


def test_the_generation_moves_with_the_spec(kubesim: Kubesim) -> None:
    budget(kubesim, "chat", {"minAvailable": 1, "selector": CHAT})
    policy = client.PolicyV1Api(kubesim.api_client())
    policy.patch_namespaced_pod_disruption_budget("chat", NS, {"spec": {"minAvailable": 3}})
    read = policy.read_namespaced_pod_disruption_budget("chat", NS)
    assert read.metadata.generation == 2
    assert read.status.observed_generation == 2 and read.status.desired_healthy == 3


PERCENT = (
    "a valid percent string must be a numeric string followed by an ending '%' (e.g. '1%',  "
    "or '93%', regex used for validation is '[0-9]+%')"
)


@pytest.mark.parametrize(
    ("spec", "causes"),
    [
        (
            {"minAvailable": 1, "maxUnavailable": "abc%", "selector": CHAT},
            [
                (
                    "spec",
                    'Invalid value: {"MinAvailable":1,"Selector":{"matchLabels":'
                    '{"app":"chat-serving"}},"MaxUnavailable":"abc%",'
                    '"UnhealthyPodEvictionPolicy":null}: '
                    "minAvailable and maxUnavailable cannot be both set",
                ),
                ("spec.maxUnavailable", f'Invalid value: "abc%": {PERCENT}'),
            ],
        ),
        (
            {"minAvailable": "150%"},
            [("spec.minAvailable", 'Invalid value: "150%": must not be greater than 100%')],
        ),
        (
            {
                "maxUnavailable": -1,
                "selector": {"matchExpressions": [{"key": "a", "operator": "In"}]},
            },
            [
                ("spec.maxUnavailable", "Invalid value: -1: must be greater than or equal to 0"),
                (
                    "spec.selector.matchExpressions[0].values",
                    "Required value: must be specified when `operator` is 'In' or 'NotIn'",
                ),
            ],
        ),
    ],
)
def test_an_invalid_budget_is_refused(
    kubesim_shared: Kubesim, spec: dict[str, Any], causes: list[tuple[str, str]]
) -> None:
    """ValidatePodDisruptionBudgetSpec's 422, word for word (K6); nothing is stored."""
    answer = http(
        kubesim_shared,
        "POST",
        f"/apis/policy/v1/namespaces/{NS}/poddisruptionbudgets",
        {"metadata": {"name": "invalid"}, "spec": spec},
    )
    assert answer.status == 422
    body = answer.json()
    assert body["reason"] == "Invalid"
    assert [(c["field"], c["message"]) for c in body["details"]["causes"]] == causes
    listed = [f"{field}: {message}" for field, message in causes]
    shown = listed[0] if len(listed) == 1 else "[" + ", ".join(listed) + "]"
    assert body["message"] == f'PodDisruptionBudget.policy "invalid" is invalid: {shown}'
    path = f"/apis/policy/v1/namespaces/{NS}/poddisruptionbudgets/invalid"
    assert http(kubesim_shared, "GET", path).status == 404


@needs_kubectl
def test_kubectl_drain_is_held_by_a_budget(tls_kubesim: Kubesim) -> None:
    budget(tls_kubesim, "chat", {"minAvailable": "100%", "selector": CHAT})
    result = kubectl(
        tls_kubesim,
        "drain",
        "a100-infer-000",
        "--ignore-daemonsets",
        "--delete-emptydir-data",
        "--timeout=3s",
        check=False,
    )
    assert result.returncode != 0
    assert (
        'error when evicting pods/"chat-serving-a100-infer-000-0" -n "ml-serving" (will retry '
        "after 5s): Cannot evict pod as it would violate the pod's disruption budget."
    ) in result.stderr
    node = json.loads(kubectl(tls_kubesim, "get", "node", "a100-infer-000", "-o", "json").stdout)
    assert node["spec"]["unschedulable"] is True
