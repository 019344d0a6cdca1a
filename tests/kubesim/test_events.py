"""Events (core/v1 and events.k8s.io/v1) as the scheduler and the kubelet record them:
FailedScheduling with the scheduler's message, NodeNotSchedulable/NodeSchedulable on a
cordon, Killing when a pod is evicted or deleted; read with the official client, and with
`kubectl get events` and `kubectl describe`."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest
from kubernetes import client, watch

from kubesim.cluster import Cluster
from kubesim.scenario import load_scenario
from kubesim.seeding import seed
from tests.kubesim.test_kubectl import KUBECTL, kubectl
from tests.kubesim_process import Kubesim, kubesim_server

needs_kubectl = pytest.mark.skipif(KUBECTL is None, reason="no kubectl on this machine")


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Kubesim]:
    with kubesim_server(tmp_path_factory.mktemp("kubesim-events"), tls=True) as server:
        yield server


def core_events(cluster: Kubesim, namespace: str, selector: str) -> list[client.CoreV1Event]:
    return cluster.core().list_namespaced_event(namespace, field_selector=selector).items


def unschedulable_message(pod: client.V1Pod) -> str:
    condition = next(c for c in pod.status.conditions if c.type == "PodScheduled")
    assert (condition.status, condition.reason) == ("False", "Unschedulable")
    return str(condition.message)


def test_failed_scheduling_is_recorded_as_the_scheduler_records_it(cluster: Kubesim) -> None:
    pod = cluster.core().read_namespaced_pod("big-train", "ml-training")
    message = unschedulable_message(pod)
    # The scheduler records again whenever its reason changes (the node lifecycle controller
    # taints the down node after start-up): the event for the reason it gives now is one.
    recorded = core_events(
        cluster, "ml-training", f"involvedObject.uid={pod.metadata.uid},reason=FailedScheduling"
    )
    (event,) = [e for e in recorded if e.message == message]
    assert (event.type, event.message, event.action) == ("Warning", message, "Scheduling")
    assert event.reporting_component == "default-scheduler"
    assert event.reporting_instance.startswith("default-scheduler-")
    # Written through events.k8s.io: an eventTime, no source, no first/last timestamps.
    assert event.event_time is not None and event.first_timestamp is None
    assert event.source.component is None
    ref = event.involved_object
    assert (ref.kind, ref.name, ref.namespace, ref.api_version) == (
        "Pod",
        "big-train",
        "ml-training",
        "v1",
    )
    (v1,) = [
        e
        for e in client.EventsV1Api(cluster.api_client())
        .list_namespaced_event(
            "ml-training", field_selector="regarding.name=big-train,reason=FailedScheduling"
        )
        .items
        if e.note == message
    ]
    assert (v1.note, v1.reporting_controller, v1.action) == (
        message,
        "default-scheduler",
        "Scheduling",
    )
    assert v1.regarding.uid == pod.metadata.uid and v1.metadata.name == event.metadata.name


def test_a_pod_that_fits_nowhere_gets_its_event(cluster: Kubesim) -> None:
    cluster.core().create_namespaced_pod(
        "research",
        {
            "metadata": {"name": "too-big"},
            "spec": {
                "containers": [{"name": "main", "resources": {"limits": {"nvidia.com/gpu": "16"}}}]
            },
        },
    )
    message = unschedulable_message(cluster.core().read_namespaced_pod("too-big", "research"))
    assert message.startswith("0/25 nodes are available: ")
    (event,) = core_events(cluster, "research", "involvedObject.name=too-big")
    assert (event.reason, event.message) == ("FailedScheduling", message)


@needs_kubectl
def test_kubectl_describe_pod_shows_the_scheduling_failure(cluster: Kubesim) -> None:
    out = kubectl(cluster, "describe", "pod", "big-train", "-n", "ml-training").stdout
    events = out[out.index("Events:") :]
    line = next(ln for ln in events.splitlines() if "FailedScheduling" in ln)
    assert line.split()[0] == "Warning" and "default-scheduler" in line
    assert "0/25 nodes are available:" in line


@needs_kubectl
def test_cordon_and_uncordon_are_recorded_by_the_kubelet(cluster: Kubesim) -> None:
    node = "a100-reserve-003"
    kubectl(cluster, "cordon", node)
    lines = kubectl(
        cluster, "get", "events", "-n", "default", "--field-selector", f"involvedObject.name={node}"
    ).stdout.splitlines()
    assert lines[0].split() == ["LAST", "SEEN", "TYPE", "REASON", "OBJECT", "MESSAGE"]
    assert lines[1].split()[1:] == [
        "Normal",
        "NodeNotSchedulable",
        f"node/{node}",
        "Node",
        node,
        "status",
        "is",
        "now:",
        "NodeNotSchedulable",
    ]
    (event,) = core_events(cluster, "default", f"involvedObject.name={node}")
    # The kubelet names its node with the node's name as UID: kubectl describe node looks so.
    assert event.involved_object.uid == node and event.involved_object.namespace is None
    assert (event.source.component, event.source.host, event.count) == ("kubelet", node, 1)
    described = kubectl(cluster, "describe", "node", node).stdout
    assert f"Node {node} status is now: NodeNotSchedulable" in described
    kubectl(cluster, "uncordon", node)
    kubectl(cluster, "cordon", node)
    reasons = {
        e.reason: e.count for e in core_events(cluster, "default", f"involvedObject.name={node}")
    }
    # A repeat within ten minutes counts into the same event, as client-go aggregates.
    assert reasons == {"NodeNotSchedulable": 2, "NodeSchedulable": 1}
    wide = kubectl(
        cluster,
        "get",
        "events",
        "-n",
        "default",
        "-o",
        "wide",
        "--field-selector",
        f"involvedObject.name={node},reason=NodeNotSchedulable",
    ).stdout.splitlines()
    assert wide[0].split()[-2:] == ["COUNT", "NAME"] and wide[1].split()[-2] == "2"
    assert f"kubelet, {node}" in wide[1]
    kubectl(cluster, "uncordon", node)


def test_an_eviction_is_the_kubelet_killing_the_containers(cluster: Kubesim) -> None:
    pod = "notebook-a100-reserve-002"
    cluster.core().create_namespaced_pod_eviction(
        pod, "research", client.V1Eviction(metadata=client.V1ObjectMeta(name=pod))
    )
    (event,) = core_events(cluster, "research", f"involvedObject.name={pod}")
    assert (event.type, event.reason, event.message) == (
        "Normal",
        "Killing",
        "Stopping container main",
    )
    assert event.involved_object.field_path == "spec.containers{main}"
    assert (event.source.component, event.source.host) == ("kubelet", "a100-reserve-002")


@needs_kubectl
def test_kubectl_get_events_shows_kills_in_both_apis(cluster: Kubesim) -> None:
    # A grace period of a second: the Killing event comes at once either way.
    kubectl(
        cluster, "delete", "pod", "notebook-a100-reserve-001", "-n", "research", "--grace-period=1"
    )
    core = kubectl(cluster, "get", "events", "-n", "research").stdout
    line = next(ln for ln in core.splitlines() if "pod/notebook-a100-reserve-001" in ln)
    assert line.split()[1:] == [
        "Normal",
        "Killing",
        "pod/notebook-a100-reserve-001",
        "Stopping",
        "container",
        "main",
    ]
    v1 = kubectl(cluster, "get", "events.v1.events.k8s.io", "-n", "research", "-o", "name")
    assert any(
        n.startswith("event.events.k8s.io/notebook-a100-reserve-001.") for n in v1.stdout.split()
    )


def test_events_are_watched_in_both_apis(cluster: Kubesim) -> None:
    core = cluster.core()
    events_v1 = client.EventsV1Api(cluster.api_client())
    since = core.list_namespaced_event("default").metadata.resource_version
    core.patch_node("a100-reserve-004", {"spec": {"unschedulable": True}})
    seen = [
        (e["type"], e["object"].reason)
        for e in watch.Watch().stream(
            core.list_namespaced_event, "default", resource_version=since, timeout_seconds=1
        )
    ]
    assert ("ADDED", "NodeNotSchedulable") in seen
    stream = events_v1.list_namespaced_event(
        "default", watch=True, resource_version=since, timeout_seconds=1, _preload_content=False
    )
    seen_v1 = [json.loads(line) for line in stream.read().decode().splitlines()]
    assert ("ADDED", "NodeNotSchedulable", "a100-reserve-004") in {
        (e["type"], e["object"]["reason"], e["object"]["regarding"]["name"]) for e in seen_v1
    }
    core.patch_node("a100-reserve-004", {"spec": {"unschedulable": None}})


def test_kubelet_events_have_no_event_time_in_events_k8s_io(cluster: Kubesim) -> None:
    # As from a real API server: an event written through core/v1 converts with a null
    # eventTime, which the official client's EventsV1Event refuses (its field is required).
    events_v1 = client.EventsV1Api(cluster.api_client())
    raw = events_v1.list_namespaced_event("research", _preload_content=False)
    kills = [e for e in json.loads(raw.data)["items"] if e["reason"] == "Killing"]
    assert kills and all(e["eventTime"] is None for e in kills)
    assert all(e["deprecatedSource"]["component"] == "kubelet" for e in kills)
    with pytest.raises(ValueError, match="eventTime"):
        events_v1.list_namespaced_event("research")


def test_events_are_kept_within_their_limit() -> None:
    cluster = Cluster()
    seed(cluster, load_scenario("demo"))
    cluster.events.max_events = 3
    store = cluster.store
    for index in range(6):
        node = store.get("nodes", None, f"a100-reserve-00{index}").obj
        store.replace(
            "nodes", {**node, "spec": {**node["spec"], "unschedulable": True}}, expected_rv=None
        )
    kept = [e.obj["involvedObject"]["name"] for e in store.list("events", None)[1]]
    assert len(kept) == 3 and "a100-reserve-005" in kept
    assert len(store.list("eventsv1", None)[1]) == 3
