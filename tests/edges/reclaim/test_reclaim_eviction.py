"""An approved reclaim's eviction against an API server's disruption budgets (kubesim's and the
real control plane's): a pod whose budget allows no disruption is refused, asked again, audited
once, and left running; once the budget allows it, it is evicted through the eviction API, the
pod noticed and no other; a pod made again under its name is never evicted in its place; an
API server that answers 503 leaves the reclaim approved and saying why."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from pools.inventory import inventory_sync
from pools.models import AuditEvent, Node, Reclaim
from pools.reclaim.evict import reclaim_evict
from tests.factories import reclaim_row
from tests.kubesim_process import Kubesim
from tests.moves_helpers import user_in
from tests.servers import wait_for

pytestmark = [pytest.mark.django_db, pytest.mark.both_backends]
NAMESPACE, POD = "ml-serving", "idle-notebook"


def _pod(node: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": POD, "namespace": NAMESPACE, "labels": {"app": "idle-notebook"}},
        "spec": {
            "nodeName": node,
            "terminationGracePeriodSeconds": 0,
            "tolerations": [{"operator": "Exists"}],
            "containers": [
                {
                    "name": "main",
                    "image": "notebook:1",
                    "resources": {"limits": {"nvidia.com/gpu": "1"}},
                }
            ],
        },
    }


def _running(core: client.CoreV1Api) -> Any:
    try:
        pod = core.read_namespaced_pod(POD, NAMESPACE)
    except ApiException:
        return None
    ready = any(c.type == "Ready" and c.status == "True" for c in pod.status.conditions or [])
    return pod if ready and not pod.metadata.deletion_timestamp else None


def _gone_or_leaving(core: client.CoreV1Api, uid: str) -> bool:
    try:
        pod = core.read_namespaced_pod(POD, NAMESPACE)
    except ApiException as error:
        return error.status == 404
    return pod.metadata.uid != uid or pod.metadata.deletion_timestamp is not None


@pytest.fixture
def notebook(cluster: Kubesim) -> Iterator[tuple[Any, Node]]:
    """An idle notebook pod holding a GPU on an inference node, alone under a budget that
    allows no disruption."""
    core = cluster.core()
    inventory_sync()
    node = next(
        n
        for n in Node.objects.present().filter(pool__name="inference", ready=True)
        if n.gpu_allocatable - n.gpu_allocated >= 1
    )
    core.create_namespaced_pod(NAMESPACE, _pod(node.name))
    pod = wait_for(lambda: _running(core), timeout=60, what="the notebook to run")
    policy = client.PolicyV1Api(cluster.api_client())
    policy.create_namespaced_pod_disruption_budget(
        NAMESPACE,
        client.V1PodDisruptionBudget(
            metadata=client.V1ObjectMeta(name="idle-notebook"),
            spec=client.V1PodDisruptionBudgetSpec(
                min_available=1,
                selector=client.V1LabelSelector(match_labels={"app": "idle-notebook"}),
            ),
        ),
    )
    wait_for(
        lambda: (
            (s := policy.read_namespaced_pod_disruption_budget("idle-notebook", NAMESPACE))
            and s.status
            and s.status.current_healthy == 1
        ),
        timeout=60,
        what="the budget to count the notebook",
    )
    yield pod, node
    try:
        policy.delete_namespaced_pod_disruption_budget("idle-notebook", NAMESPACE)
    except ApiException as error:
        if error.status != 404:
            raise
    try:
        core.delete_namespaced_pod(POD, NAMESPACE, grace_period_seconds=0)
    except ApiException as error:
        if error.status != 404:
            raise


def _approved(pod: Any, node: Node) -> Reclaim:
    now = timezone.now()
    return reclaim_row(
        "inference",
        namespace=NAMESPACE,
        pod=POD,
        uid=pod.metadata.uid,
        node=node.name,
        state=Reclaim.State.APPROVED,
        requested_by=user_in("requesters", "rita"),
        decided_by=user_in("approvers", "arno"),
        decided_at=now,
        evict_deadline=now + timedelta(hours=1),
    )


def test_an_approved_reclaim_keeps_the_budget_then_evicts_the_pod(
    cluster: Kubesim, notebook: tuple[Any, Node], settings
) -> None:  # type: ignore[no-untyped-def]
    pod, node = notebook
    core = cluster.core()
    reclaim = _approved(pod, node)
    now = timezone.now()
    tick = timedelta(seconds=settings.RECLAIM_TICK_SECONDS)

    first = reclaim_evict(reclaim.pk, now=now)
    assert first is not None and first.state == Reclaim.State.APPROVED
    assert "disruption budget" in first.refused
    assert reclaim_evict(reclaim.pk, now=now) is None  # not before its next try
    again = reclaim_evict(reclaim.pk, now=now + tick)
    assert again is not None and again.state == Reclaim.State.APPROVED
    refused = AuditEvent.objects.filter(reclaim=reclaim, action="pod.eviction_refused")
    assert refused.count() == 1  # once per change of the budget's words
    assert _running(core) is not None and _running(core).metadata.uid == pod.metadata.uid

    client.PolicyV1Api(cluster.api_client()).delete_namespaced_pod_disruption_budget(
        "idle-notebook", NAMESPACE
    )
    done = reclaim_evict(reclaim.pk, now=now + 2 * tick)
    assert done is not None and done.state == Reclaim.State.EVICTED, done.refused
    assert done.finished_at is not None and "eviction API" in done.outcome
    wait_for(
        lambda: _gone_or_leaving(core, pod.metadata.uid), timeout=60, what="the notebook to leave"
    )
    evicted = AuditEvent.objects.get(reclaim=reclaim, action="pod.evicted")
    assert evicted.node_name == node.name and f"{NAMESPACE}/{POD}" in evicted.message
    assert reclaim_evict(reclaim.pk, now=now + 3 * tick) is None  # exactly once


def test_a_pod_made_again_under_its_name_is_never_evicted_in_its_place(
    cluster: Kubesim, notebook: tuple[Any, Node]
) -> None:
    pod, node = notebook
    core = cluster.core()
    reclaim = _approved(pod, node)
    client.PolicyV1Api(cluster.api_client()).delete_namespaced_pod_disruption_budget(
        "idle-notebook", NAMESPACE
    )
    core.delete_namespaced_pod(POD, NAMESPACE, grace_period_seconds=0)
    wait_for(
        lambda: _gone_or_leaving(core, pod.metadata.uid), timeout=60, what="the notebook to go"
    )
    wait_for(lambda: _running(core) is None, timeout=60, what="the old pod to be gone")
    core.create_namespaced_pod(NAMESPACE, _pod(node.name))
    again = wait_for(lambda: _running(core), timeout=60, what="the new notebook to run")
    assert again.metadata.uid != pod.metadata.uid

    found = reclaim_evict(reclaim.pk, now=timezone.now())
    assert found is not None and found.state == Reclaim.State.RECOVERED
    assert found.outcome == "the pod went away before its eviction"
    assert _running(core).metadata.uid == again.metadata.uid  # the new one untouched
    assert not AuditEvent.objects.filter(reclaim=reclaim, action="pod.evicted").exists()


@pytest.mark.kubesim_only("the API server answers 503 to everything, then recovers")
def test_an_api_server_that_answers_503_leaves_it_approved_and_says_why(
    cluster: Kubesim, notebook: tuple[Any, Node], settings
) -> None:  # type: ignore[no-untyped-def]
    pod, node = notebook
    reclaim = _approved(pod, node)
    client.PolicyV1Api(cluster.api_client()).delete_namespaced_pod_disruption_budget(
        "idle-notebook", NAMESPACE
    )
    cluster.control("faults", {"fail_next": [{"status": 503, "count": 1000}]})
    now = timezone.now()
    try:
        found = reclaim_evict(reclaim.pk, now=now)
    finally:
        cluster.control("faults", {"reset": True})
    assert found is not None and found.state == Reclaim.State.APPROVED
    assert found.refused.startswith("the Kubernetes API:") and "503" in found.refused
    later = now + timedelta(seconds=settings.RECLAIM_TICK_SECONDS)
    done = reclaim_evict(reclaim.pk, now=later)
    assert done is not None and done.state == Reclaim.State.EVICTED
