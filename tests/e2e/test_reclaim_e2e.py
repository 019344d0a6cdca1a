"""A reclaim end to end: a real Celery worker on a real Redis evicts the pod as soon as the
reclaim is approved, with no beat running (the approval announces it after its commit)."""

from __future__ import annotations

from pathlib import Path

import pytest
from django.utils import timezone
from kubernetes.client.exceptions import ApiException

from pools.inventory import inventory_sync
from pools.models import AuditEvent, GpuPod, Reclaim
from pools.reclaim.requests import reclaim_approve
from tests.factories import reclaim_row
from tests.kubesim_process import Kubesim
from tests.moves_helpers import user_in
from tests.servers import RedisServer, wait_for
from tests.workers import celery_worker

pytestmark = pytest.mark.django_db(transaction=True)


def _leaving(cluster: Kubesim, pod: GpuPod) -> bool:
    try:
        found = cluster.core().read_namespaced_pod(pod.name, pod.namespace)
    except ApiException as error:
        return error.status == 404
    return found.metadata.deletion_timestamp is not None


def test_the_worker_evicts_the_pod_once_the_reclaim_is_approved(
    cluster: Kubesim, redis: RedisServer, tmp_path: Path
) -> None:
    inventory_sync()
    pod = GpuPod.objects.live().get(node_name="a100-infer-000", name__startswith="embedder")
    reclaim = reclaim_row(
        "inference",
        namespace=pod.namespace,
        pod=pod.name,
        uid=pod.uid,
        node=pod.node_name,
        state=Reclaim.State.REQUESTED,
        requested_by=user_in("requesters", "rita"),
        requested_at=timezone.now(),
    )
    with celery_worker(tmp_path):
        reclaim_approve(reclaim.pk, approver=user_in("approvers", "arno"), now=timezone.now())
        wait_for(
            lambda: Reclaim.objects.get(pk=reclaim.pk).state == Reclaim.State.EVICTED,
            timeout=60,
            what="the worker to evict the pod",
        )
    assert _leaving(cluster, pod)
    assert AuditEvent.objects.filter(reclaim=reclaim, action="pod.evicted").count() == 1
