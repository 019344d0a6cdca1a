"""Graceful termination: a deleted pod stays, terminating, for its grace period (issue 12.1)."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from tests.kubesim.conftest import kubectl, needs_kubectl
from tests.kubesim_process import Kubesim, kubesim_server
from tests.servers import wait_for

POD, NAMESPACE, NODE = "notebook-a100-reserve-000", "research", "a100-reserve-000"


def sim_now(sim: Kubesim) -> datetime:
    now = sim.control("clock", {})["now"]
    return datetime.strptime(now, "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=UTC)


def gone(core: client.CoreV1Api, name: str = POD) -> bool:
    try:
        core.read_namespaced_pod(name, NAMESPACE)
    except ApiException as exc:
        return exc.status == 404
    return False


def test_a_deleted_pod_terminates_for_its_grace_period(kubesim: Kubesim) -> None:
    core = kubesim.core()
    before = sim_now(kubesim)
    answer = core.delete_namespaced_pod(POD, NAMESPACE)
    # The answer is the pod, now terminating: 30 s by default.
    assert answer.metadata.deletion_grace_period_seconds == 30
    ends = answer.metadata.deletion_timestamp
    assert 29 <= (ends - before).total_seconds() <= 31
    # Still listed, still on its node, still Running: field selectors still match it.
    on_node = core.list_pod_for_all_namespaces(
        field_selector=f"spec.nodeName={NODE},status.phase=Running,metadata.namespace!=gpu-operator"
    )
    assert [p.metadata.name for p in on_node.items] == [POD]
    kubesim.control("clock", {"advance": 25})
    assert not gone(core)
    kubesim.control("clock", {"advance": 5})
    assert gone(core)


def test_a_finalizer_holds_a_deleted_pod(kubesim: Kubesim) -> None:
    """After the grace period the kubelet's final delete leaves the pod, with its
    deletionTimestamp, until an update removes the finalizer (K4, test_k4_... on the real
    control plane)."""
    core = kubesim.core()
    pod = {
        "metadata": {"name": "held", "finalizers": ["example.com/hold"]},
        "spec": {
            "containers": [{"name": "main", "image": "busybox:1"}],
            "nodeName": NODE,
            "terminationGracePeriodSeconds": 1,
        },
    }
    core.create_namespaced_pod(NAMESPACE, pod)
    core.delete_namespaced_pod("held", NAMESPACE)
    kubesim.control("clock", {"advance": 5})
    held = core.read_namespaced_pod("held", NAMESPACE)
    assert held.metadata.deletion_timestamp is not None
    assert held.metadata.deletion_grace_period_seconds == 0
    # Deleting it again changes nothing; neither does an update that keeps a finalizer.
    again = core.delete_namespaced_pod("held", NAMESPACE, grace_period_seconds=0)
    assert again.metadata.resource_version == held.metadata.resource_version
    core.patch_namespaced_pod("held", NAMESPACE, {"metadata": {"labels": {"a": "b"}}})
    assert not gone(core, "held")
    core.patch_namespaced_pod("held", NAMESPACE, {"metadata": {"finalizers": None}})
    assert gone(core, "held")


def test_a_finalizer_holds_a_deleted_node(kubesim: Kubesim) -> None:
    core = kubesim.core()
    core.create_node({"metadata": {"name": "held-node", "finalizers": ["example.com/hold"]}})
    answer = core.delete_node("held-node")
    # Not deleted yet: the answer is the object, marked, not a Status.
    assert answer["kind"] == "Node" and answer["metadata"]["deletionGracePeriodSeconds"] == 0
    assert core.read_node("held-node").metadata.deletion_timestamp is not None
    core.patch_node("held-node", {"metadata": {"finalizers": None}})
    with pytest.raises(ApiException) as caught:
        core.read_node("held-node")
    assert caught.value.status == 404


def test_the_grace_period_comes_from_the_request_then_the_pod(kubesim: Kubesim) -> None:
    core = kubesim.core()
    pod = core.read_namespaced_pod(POD, NAMESPACE)
    pod_spec = client.V1Pod(
        metadata=client.V1ObjectMeta(name="long-job"),
        spec=client.V1PodSpec(
            node_name=NODE,
            termination_grace_period_seconds=600,
            containers=[client.V1Container(name="main", image="train:1")],
        ),
    )
    core.create_namespaced_pod(NAMESPACE, pod_spec)
    answer = core.delete_namespaced_pod("long-job", NAMESPACE)
    assert answer.metadata.deletion_grace_period_seconds == 600
    # A second delete may only shorten it; a longer one changes nothing.
    longer = core.delete_namespaced_pod("long-job", NAMESPACE, grace_period_seconds=900)
    assert longer.metadata.deletion_grace_period_seconds == 600
    shorter = core.delete_namespaced_pod("long-job", NAMESPACE, grace_period_seconds=10)
    assert shorter.metadata.deletion_grace_period_seconds == 10
    assert (
        answer.metadata.deletion_timestamp - shorter.metadata.deletion_timestamp
    ).total_seconds() == 590
    kubesim.control("clock", {"advance": 10})
    assert gone(core, "long-job")
    # gracePeriodSeconds=0 deletes at once (kubectl delete --force).
    assert pod.metadata.deletion_timestamp is None
    core.delete_namespaced_pod(POD, NAMESPACE, grace_period_seconds=0)
    assert gone(core)


def test_a_pod_never_scheduled_goes_at_once(kubesim: Kubesim) -> None:
    core = kubesim.core()
    core.delete_namespaced_pod("big-train", "ml-training")
    with pytest.raises(ApiException) as caught:
        core.read_namespaced_pod("big-train", "ml-training")
    assert caught.value.status == 404


def test_delete_preconditions_are_checked(kubesim: Kubesim) -> None:
    core = kubesim.core()
    uid = core.read_namespaced_pod(POD, NAMESPACE).metadata.uid
    with pytest.raises(ApiException) as caught:
        core.delete_namespaced_pod(
            POD,
            NAMESPACE,
            body=client.V1DeleteOptions(preconditions=client.V1Preconditions(uid="x")),
        )
    assert caught.value.status == 409
    # Checked before the deletion starts (rest.BeforeDelete), which names the Kind.
    assert json.loads(caught.value.body) == {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": f'Operation cannot be fulfilled on Pod "{POD}": the UID in the precondition '
        f"(x) does not match the UID in record ({uid}). The object might have been deleted "
        "and then recreated",
        "reason": "Conflict",
        "details": {"name": POD, "kind": "Pod"},
        "code": 409,
    }
    rv = core.read_namespaced_pod(POD, NAMESPACE).metadata.resource_version
    with pytest.raises(ApiException) as caught:
        core.delete_namespaced_pod(
            POD,
            NAMESPACE,
            body=client.V1DeleteOptions(preconditions=client.V1Preconditions(resource_version="1")),
        )
    assert json.loads(caught.value.body)["message"] == (
        f'Operation cannot be fulfilled on Pod "{POD}": the ResourceVersion in the precondition '
        f"(1) does not match the ResourceVersion in record ({rv}). The object might have been "
        "modified"
    )


def test_the_clock_can_run_fast(tmp_path: Path) -> None:
    with kubesim_server(tmp_path, extra=["--clock-scale", "100"]) as sim:
        core = sim.core()
        core.delete_namespaced_pod(POD, NAMESPACE)
        # 30 simulated seconds pass in about a third of a real one.
        wait_for(lambda: gone(core), timeout=10, what="the pod to finish terminating")


@needs_kubectl
def test_kubectl_shows_terminating_and_force_deletes(tls_kubesim: Kubesim) -> None:
    out = kubectl(tls_kubesim, "delete", "pod", POD, "-n", NAMESPACE, "--wait=false").stdout
    assert out.strip() == f'pod "{POD}" deleted'
    row = kubectl(tls_kubesim, "get", "pod", POD, "-n", NAMESPACE, "--no-headers").stdout
    assert row.split()[2] == "Terminating"
    forced = kubectl(
        tls_kubesim, "delete", "pod", POD, "-n", NAMESPACE, "--grace-period=0", "--force"
    )
    assert f'pod "{POD}" force deleted' in forced.stdout
    assert gone(tls_kubesim.core())
