"""A maintenance in waves against an API server's disruption budgets (kubesim's and the real
control plane's): three nodes, each running one pod of a service whose budget allows one
disruption, taken in waves of at most two. The headroom lets only one node go at a time, so
there are three waves; no eviction is ever refused, every budget holds at every step, each
wave waits for its confirmation, and every node ends uncordoned, every step audited. The test
plays the service's ReplicaSet: an evicted pod is replaced on a node outside the maintenance.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest
from django.utils import timezone
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from pools.inventory import inventory_sync
from pools.maintenance import waves
from pools.maintenance.advance import maintenance_advance
from pools.models import AuditEvent, Maintenance, MaintenanceNode, Node, Pool
from tests.kubesim_process import Kubesim
from tests.moves_helpers import user_in

pytestmark = [pytest.mark.django_db, pytest.mark.both_backends]
NAMESPACE = "ml-serving"
BUDGET_MIN_AVAILABLE = 2
ROUNDS = 600  # ticks at most; each takes a moment: the loop ends long before on any machine


def _serve_pod(name: str, node: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": NAMESPACE, "labels": {"app": "serve"}},
        "spec": {
            "nodeName": node,
            "terminationGracePeriodSeconds": 0,
            "tolerations": [{"operator": "Exists"}],
            "containers": [
                {
                    "name": "serve",
                    "image": "serve:1",
                    "resources": {
                        "requests": {"nvidia.com/gpu": "1"},
                        "limits": {"nvidia.com/gpu": "1"},
                    },
                }
            ],
        },
    }


def _wait(check: Any, what: str, seconds: float = 60.0) -> Any:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if found := check():
            return found
        time.sleep(0.2)
    raise AssertionError(f"timed out waiting for {what}")


def _ready(core: client.CoreV1Api, name: str) -> bool:
    try:
        pod = core.read_namespaced_pod(name, NAMESPACE)
    except ApiException:
        return False
    conditions = pod.status.conditions or []
    return not pod.metadata.deletion_timestamp and any(
        c.type == "Ready" and c.status == "True" for c in conditions
    )


def _budget(policy: client.PolicyV1Api) -> Any:
    return policy.read_namespaced_pod_disruption_budget("serve", NAMESPACE).status


def _free_gpu_nodes(pool: str) -> list[str]:
    return sorted(
        n.name
        for n in Node.objects.present().filter(pool__name=pool, ready=True, cordoned=False)
        if n.gpu_allocatable - n.gpu_allocated >= 1
    )


def _only_serve_pods_on(cluster: Kubesim, nodes: list[str]) -> None:
    """The scenario's pods off `nodes`: once evicted they take 30 s each to terminate, which
    says nothing more here. On the real control plane their ReplicaSets (real there) are
    deleted first, leaving their pods, or they would put them back at once; the next test's
    reset makes the scenario again."""
    core = cluster.core()
    leaving = [
        p
        for p in core.list_pod_for_all_namespaces().items
        if p.spec.node_name in nodes
        and not any(o.kind == "DaemonSet" for o in p.metadata.owner_references or [])
    ]
    owners = {
        (p.metadata.namespace, o.name)
        for p in leaving
        for o in p.metadata.owner_references or []
        if o.kind == "ReplicaSet"
    }
    apps = client.AppsV1Api(cluster.api_client())
    try:
        sets = apps.list_replica_set_for_all_namespaces().items
    except ApiException as error:  # kubesim serves no apps API: nothing puts pods back
        if error.status != 404:
            raise
        sets = []
    for found in sets:
        if (found.metadata.namespace, found.metadata.name) in owners:
            apps.delete_namespaced_replica_set(
                found.metadata.name, found.metadata.namespace, propagation_policy="Orphan"
            )
    for pod in leaving:
        core.delete_namespaced_pod(
            pod.metadata.name, pod.metadata.namespace, grace_period_seconds=0
        )


@pytest.fixture
def service(cluster: Kubesim) -> Iterator[tuple[list[str], list[str]]]:
    """Three inference nodes with one `serve` pod each under a budget allowing one
    disruption; and the nodes outside the maintenance where replacements go."""
    core = cluster.core()
    inventory_sync()
    free = _free_gpu_nodes("inference")
    assert len(free) >= 4, free
    maintained, spare = free[:3], free[3:]
    _only_serve_pods_on(cluster, maintained)
    for i, node in enumerate(maintained):
        core.create_namespaced_pod(NAMESPACE, _serve_pod(f"serve-{i}", node))
    _wait(lambda: all(_ready(core, f"serve-{i}") for i in range(3)), "the serve pods")
    policy = client.PolicyV1Api(cluster.api_client())
    policy.create_namespaced_pod_disruption_budget(
        NAMESPACE,
        client.V1PodDisruptionBudget(
            metadata=client.V1ObjectMeta(name="serve"),
            spec=client.V1PodDisruptionBudgetSpec(
                min_available=BUDGET_MIN_AVAILABLE,
                selector=client.V1LabelSelector(match_labels={"app": "serve"}),
            ),
        ),
    )
    _wait(lambda: _budget(policy) and _budget(policy).disruptions_allowed == 1, "the budget")
    inventory_sync()
    yield maintained, spare
    policy.delete_namespaced_pod_disruption_budget("serve", NAMESPACE)
    for pod in core.list_namespaced_pod(NAMESPACE, label_selector="app=serve").items:
        core.delete_namespaced_pod(pod.metadata.name, NAMESPACE)


def _replace_evicted(core: client.CoreV1Api, spare: list[str], made: list[str]) -> None:
    """The ReplicaSet's part: a serve pod for each one gone, on a node outside the waves."""
    live = [
        p
        for p in core.list_namespaced_pod(NAMESPACE, label_selector="app=serve").items
        if not p.metadata.deletion_timestamp
    ]
    for _ in range(3 - len(live)):
        name = f"serve-r{len(made)}"
        core.create_namespaced_pod(NAMESPACE, _serve_pod(name, spare[len(made) % len(spare)]))
        made.append(name)


def test_a_three_wave_maintenance_keeps_every_budget(
    cluster: Kubesim, service: tuple[list[str], list[str]]
) -> None:
    maintained, spare = service
    core, policy = cluster.core(), client.PolicyV1Api(cluster.api_client())
    admin = user_in("pool-admins", "paula")
    maintenance = waves.maintenance_start(
        pool=Pool.objects.get(name="inference"),
        user=admin,
        reason="driver 570 on the serving nodes",
        wave_size=2,
        hold="confirm",
        step="driver upgraded",
        nodes=maintained,
    )
    made: list[str] = []
    healthy_seen: list[int] = []
    most_cordoned = 0
    for _ in range(ROUNDS):
        found = maintenance_advance(maintenance.pk, now=timezone.now())
        assert found is not None
        if found.state != Maintenance.State.RUNNING:
            break
        status = _budget(policy)
        healthy_seen.append(status.current_healthy)
        cordoned = [n for n in maintained if core.read_node(n).spec.unschedulable]
        most_cordoned = max(most_cordoned, len(cordoned))
        rows = MaintenanceNode.objects.filter(maintenance=found, wave=found.wave)
        if rows.exists() and all(r.state == MaintenanceNode.State.HELD for r in rows):
            assert not any(
                _ready(core, f"serve-{i}") for i in range(3) if maintained[i] in cordoned
            )
            waves.maintenance_confirm(found.pk, wave=found.wave, user=admin)
        _replace_evicted(core, spare, made)
        inventory_sync()
        time.sleep(0.2)
    found = Maintenance.objects.get(pk=maintenance.pk)
    assert found.state == Maintenance.State.DONE, found.waiting

    rows = list(MaintenanceNode.objects.filter(maintenance=found).select_related("node"))
    assert sorted(r.wave for r in rows) == [1, 2, 3]  # the budget let one node go at a time
    assert all(r.state == MaintenanceNode.State.DONE and not r.cordoned_by_portal for r in rows)
    assert most_cordoned == 1
    assert min(healthy_seen) >= BUDGET_MIN_AVAILABLE
    assert not any(core.read_node(n).spec.unschedulable for n in maintained)
    events = AuditEvent.objects.filter(maintenance=found)
    assert not events.filter(action="pod.eviction_refused").exists()
    evicted = {e.message.rsplit(": ", 1)[1] for e in events.filter(action="pod.evicted")}
    assert {f"{NAMESPACE}/serve-{i}" for i in range(3)} <= evicted
    actions = [e.action for e in events.order_by("at", "id")]
    for action in ("wave_started", "wave_held", "confirmed", "wave_done"):
        assert actions.count(f"maintenance.{action}") == 3, actions
    assert actions.count("node.cordoned") == 3 and actions.count("node.uncordoned") == 3
    assert actions[-1] == "maintenance.done"
