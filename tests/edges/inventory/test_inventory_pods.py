"""The inventory's GPU pods and the nodes' CPU and memory figures, against kubesim."""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta

import pytest
from django.utils import timezone

from pools.inventory import inventory_sync
from pools.models import GpuPod, MoveItem, MoveRequest, Node, Pool
from tests.kubesim_process import Kubesim

# The cluster is kubesim's API server, then the real control plane.
pytestmark = pytest.mark.both_backends


@pytest.fixture(autouse=True)
def priority_class(cluster: Kubesim, backend: str) -> None:
    """The class the pods name: a real API server refuses a pod whose PriorityClass does not
    exist (the Priority admission plugin); kubesim's does not check."""
    if backend == "kubernetes":
        from kubernetes import client
        from kubernetes.client.rest import ApiException

        body = {"metadata": {"name": "research-low"}, "value": 100}
        try:
            client.SchedulingV1Api(cluster.api_client()).create_priority_class(body)
        except ApiException as error:
            if error.status != 409:  # made for an earlier test of the module
                raise


def pod(name: str, node: str, *, gpus: int = 1, **requests: str) -> dict[str, object]:
    return {
        "metadata": {
            "name": name,
            "namespace": "research",
            # No owner: on a real cluster the garbage collector deletes a pod whose owner
            # does not exist.
            "labels": {"team": "vision", "workload-type": "training"},
            # The tests write these pods' status themselves: kubesim's kubelets leave it.
            "annotations": {"kubesim.io/status": "manual"},
        },
        "spec": {
            "nodeName": node,
            "priorityClassName": "research-low",
            "containers": [
                {
                    "name": "main",
                    "image": "registry.example/train:1",
                    "resources": {"requests": requests, "limits": {"nvidia.com/gpu": str(gpus)}},
                }
            ],
        },
    }


@pytest.mark.django_db
def test_gpu_pods_are_kept_with_their_node_pool_and_times(cluster: Kubesim) -> None:
    report = inventory_sync()
    # 36 workload pods ask for GPUs; the DaemonSet pods do not and are not kept.
    assert report.gpu_pods == GpuPod.objects.count() == 36
    serving = GpuPod.objects.get(name="chat-serving-a100-infer-000-0")
    assert (serving.node_name, serving.pool_label, serving.phase) == (
        "a100-infer-000",
        "inference",
        "Running",
    )
    assert (serving.gpus, serving.owner_kind, serving.owner_name) == (
        2,
        "ReplicaSet",
        "chat-serving",
    )
    assert serving.created_at <= serving.scheduled_at <= serving.started_at
    assert serving.finished_at is None and serving.deleted_at is None
    assert serving.resource_version
    waiting = GpuPod.objects.pending().get(name="big-train")
    assert (waiting.node_name, waiting.pool_label, waiting.scheduled_at) == ("", "", None)
    assert waiting.unschedulable_message.startswith("0/25 nodes are available")
    assert waiting.affinity["nodeAffinity"]
    # A real API server adds the 300 s not-ready and unreachable tolerations to every pod
    # (DefaultTolerationSeconds); kubesim's does not: the pod's own are kept either way.
    defaulted = {"node.kubernetes.io/not-ready", "node.kubernetes.io/unreachable"}
    assert [t for t in waiting.tolerations if t["key"] not in defaulted] == [
        {"key": "workload-training", "operator": "Exists", "effect": "NoSchedule"}
    ]
    assert GpuPod.objects.live().count() == 36


@pytest.mark.django_db
def test_nodes_hold_numeric_allocatable_and_the_requests_of_every_bound_pod(
    cluster: Kubesim,
) -> None:
    core = cluster.core()
    core.create_namespaced_pod("research", pod("probe", "gpu-new-000", cpu="1500m", memory="2Gi"))
    cpu_only = pod("sidecar", "gpu-new-000", gpus=0, cpu="250m", memory="512Mi")
    core.create_namespaced_pod("research", cpu_only)
    inventory_sync()
    node = Node.objects.get(name="gpu-new-000")
    allocatable = core.read_node("gpu-new-000").status.allocatable
    assert allocatable["cpu"].isdigit()
    assert node.cpu_allocatable_milli == int(allocatable["cpu"]) * 1000
    assert node.memory_allocatable_bytes > 0
    # The CPU-only pod counts in the node's sums; only the GPU pod is kept as a GpuPod.
    assert (node.cpu_requested_milli, node.memory_requested_bytes) == (1750, (2048 + 512) * 2**20)
    row = GpuPod.objects.get(name="probe")
    assert (row.cpu_milli, row.memory_bytes, row.gpus) == (1500, 2 * 2**30, 1)
    assert (row.team, row.workload_type, row.priority_class) == (
        "vision",
        "training",
        "research-low",
    )
    assert not GpuPod.objects.filter(name="sidecar").exists()


@pytest.mark.django_db
def test_a_finished_pod_keeps_its_end_and_frees_its_node(cluster: Kubesim) -> None:
    core = cluster.core()
    core.create_namespaced_pod("research", pod("done", "gpu-new-001", cpu="1"))
    inventory_sync()
    ended = {"exitCode": 3, "reason": "Error", "message": "CUDA out of memory"}
    status = {
        "phase": "Failed",
        "containerStatuses": [
            {
                "name": "main",
                "ready": False,
                "restartCount": 2,
                "image": "registry.example/train:1",
                "imageID": "",
                "state": {
                    "terminated": {
                        **ended,
                        "startedAt": "2026-11-30T09:00:00Z",
                        "finishedAt": "2026-11-30T09:05:00Z",
                    }
                },
            }
        ],
    }
    core.patch_namespaced_pod_status("done", "research", {"status": status})
    inventory_sync()
    row = GpuPod.objects.get(name="done")
    assert row.phase == "Failed"
    assert row.finished_at == datetime(2026, 11, 30, 9, 5, tzinfo=UTC)
    assert (row.termination_reason, row.exit_code, row.restarts) == ("Error", 3, 2)
    assert row.termination_message == "CUDA out of memory"
    assert not GpuPod.objects.live().filter(name="done").exists()
    node = Node.objects.get(name="gpu-new-001")
    assert (node.gpu_allocated, node.cpu_requested_milli) == (0, 0)
    assert "done" not in [p["name"] for p in node.pods]


@pytest.mark.django_db
def test_a_pod_keeps_the_pool_it_was_bound_in_and_is_marked_deleted(cluster: Kubesim) -> None:
    core = cluster.core()
    core.create_namespaced_pod("research", pod("moved", "a100-reserve-000"))
    inventory_sync()
    core.patch_node("a100-reserve-000", {"metadata": {"labels": {"gpu-pool": "training"}}})
    inventory_sync()
    assert Node.objects.get(name="a100-reserve-000").pool_label == "training"
    assert GpuPod.objects.get(name="moved").pool_label == "mixed"
    core.delete_namespaced_pod("moved", "research", grace_period_seconds=0)
    report = inventory_sync()
    assert report.pods_deleted == 1
    gone = GpuPod.objects.get(name="moved")
    assert gone.deleted_at is not None
    assert GpuPod.objects.filter(deleted_at__isnull=False).count() == 1


@pytest.mark.django_db
def test_deleted_pods_are_forgotten_after_the_history_days(cluster: Kubesim, settings) -> None:  # type: ignore[no-untyped-def]
    settings.POD_HISTORY_DAYS = 7
    inventory_sync()
    now = timezone.now()
    # Two pods deleted long ago (under uids the cluster no longer has).
    old, recent = GpuPod.objects.order_by("id")[:2]
    GpuPod.objects.filter(pk=old.pk).update(uid="old", deleted_at=now - timedelta(days=8))
    GpuPod.objects.filter(pk=recent.pk).update(uid="recent", deleted_at=now - timedelta(days=6))
    inventory_sync()
    assert not GpuPod.objects.filter(uid="old").exists()
    assert GpuPod.objects.filter(uid="recent").exists()


def _finish(core, name: str, started: str, finished: str) -> None:  # type: ignore[no-untyped-def]
    terminated = {
        "exitCode": 0,
        "reason": "Completed",
        "startedAt": started,
        "finishedAt": finished,
    }
    # Bound by nodeName, no scheduler sets PodScheduled: the kubelet adds it when it first
    # writes the pod's status (kubesim's API server sets it at the pod's creation).
    bound = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    status = {
        "phase": "Succeeded",
        "conditions": [{"type": "PodScheduled", "status": "True", "lastTransitionTime": bound}],
        "containerStatuses": [
            {
                "name": "main",
                "ready": False,
                "restartCount": 0,
                "image": "registry.example/train:1",
                "imageID": "",
                "state": {"terminated": terminated},
            }
        ],
    }
    core.patch_namespaced_pod_status(name, "research", {"status": status})


@pytest.mark.django_db
def test_a_pod_first_seen_finished_is_placed_in_the_pool_its_node_was_in_when_bound(
    cluster: Kubesim,
) -> None:
    """A job that ended before the portal saw it (the history from before it watched, or a
    job shorter than the time between two syncs) still counts in its pool's insights; a move
    of its node since then does not carry it along."""
    inventory_sync()
    core = cluster.core()
    core.create_namespaced_pod("research", pod("before-move", "a100-reserve-000"))
    _finish(core, "before-move", "2026-11-30T09:00:00Z", "2026-11-30T09:05:00Z")
    # The node then moved from mixed to training, and another job ran there.
    core.patch_node("a100-reserve-000", {"metadata": {"labels": {"gpu-pool": "training"}}})
    move = MoveRequest.objects.create(
        destination=Pool.objects.get(name="training"),
        reason="test",
        state=MoveRequest.State.SUCCEEDED,
    )
    MoveItem.objects.create(
        request=move,
        node=Node.objects.get(name="a100-reserve-000"),
        source_label="mixed",
        planned_diff={},
        state=MoveItem.State.DONE,
        active=False,
        finished_at=timezone.now(),
    )
    inventory_sync()
    time.sleep(1.5)  # Kubernetes keeps times to the second: the next job binds after the move
    core.create_namespaced_pod("research", pod("after-move", "a100-reserve-000"))
    _finish(core, "after-move", "2026-11-30T10:00:00Z", "2026-11-30T10:05:00Z")
    inventory_sync()
    placed = dict(GpuPod.objects.filter(name__endswith="-move").values_list("name", "pool_label"))
    assert placed == {"before-move": "mixed", "after-move": "training"}


@pytest.mark.django_db
def test_a_pod_that_never_pulled_its_image_keeps_that_reason_after_its_deadline(
    cluster: Kubesim,
) -> None:
    core = cluster.core()
    core.create_namespaced_pod("research", pod("no-image", "gpu-new-001"))
    waiting = {"waiting": {"reason": "ImagePullBackOff", "message": 'Back-off pulling image "x"'}}
    container = {"name": "main", "ready": False, "restartCount": 0, "image": "x", "imageID": ""}
    status = {"phase": "Pending", "containerStatuses": [{**container, "state": waiting}]}
    core.patch_namespaced_pod_status("no-image", "research", {"status": status})
    inventory_sync()
    # The active deadline fails the pod; its container never ran, and no longer says why.
    unknown = {"exitCode": 137, "reason": "ContainerStatusUnknown", "message": "not located"}
    status = {
        "phase": "Failed",
        "reason": "DeadlineExceeded",
        "containerStatuses": [{**container, "state": {"terminated": unknown}}],
    }
    core.patch_namespaced_pod_status("no-image", "research", {"status": status})
    inventory_sync()
    row = GpuPod.objects.get(name="no-image")
    assert (row.phase, row.waiting_reason) == ("Failed", "ImagePullBackOff")
