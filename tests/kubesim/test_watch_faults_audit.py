"""Watch streams, fault injection and the audit log, seen through real clients."""

from __future__ import annotations

import threading
import time

import pytest
import urllib3
from kubernetes import client, watch
from kubernetes.client.exceptions import ApiException

from tests.kubesim_process import Kubesim


def test_watch_streams_added_then_modified_events(kubesim: Kubesim) -> None:
    core = kubesim.core()
    seen: list[tuple[str, str, str]] = []
    done = threading.Event()

    def follow() -> None:
        stream = watch.Watch()
        for event in stream.stream(core.list_node, label_selector="!gpu-pool", timeout_seconds=10):
            node = event["object"]
            seen.append(
                (event["type"], node.metadata.name, (node.metadata.labels or {}).get("team", ""))
            )
            if event["type"] == "MODIFIED":
                stream.stop()
        done.set()

    thread = threading.Thread(target=follow)
    thread.start()
    time.sleep(0.5)
    core.patch_node("gpu-new-000", {"metadata": {"labels": {"team": "vision"}}})
    assert done.wait(10)
    assert seen[:2] == [("ADDED", "gpu-new-000", ""), ("ADDED", "gpu-new-001", "")]
    assert seen[-1] == ("MODIFIED", "gpu-new-000", "vision")


def test_watch_resumes_from_a_resource_version(kubesim: Kubesim) -> None:
    core = kubesim.core()
    start = core.list_node().metadata.resource_version
    core.patch_node("gpu-new-000", {"metadata": {"labels": {"a": "1"}}})
    core.patch_node("gpu-new-001", {"metadata": {"labels": {"a": "2"}}})
    events = list(watch.Watch().stream(core.list_node, resource_version=start, timeout_seconds=1))
    assert [(e["type"], e["object"].metadata.name) for e in events] == [
        ("MODIFIED", "gpu-new-000"),
        ("MODIFIED", "gpu-new-001"),
    ]


def test_watch_from_a_too_old_resource_version_is_410_gone(kubesim_shared: Kubesim) -> None:
    core = kubesim_shared.core()
    with pytest.raises(ApiException) as caught:
        list(watch.Watch().stream(core.list_node, resource_version="1", timeout_seconds=1))
    assert caught.value.status == 410


def test_watch_sees_a_node_leave_its_selector_as_deleted(kubesim: Kubesim) -> None:
    core = kubesim.core()
    start = core.list_node().metadata.resource_version
    core.patch_node("gpu-new-000", {"metadata": {"labels": {"gpu-pool": "training"}}})
    events = list(
        watch.Watch().stream(
            core.list_node, label_selector="!gpu-pool", resource_version=start, timeout_seconds=1
        )
    )
    assert [(e["type"], e["object"].metadata.name) for e in events] == [("DELETED", "gpu-new-000")]


# --- fault injection ---


def test_injected_503_then_success(kubesim: Kubesim) -> None:
    core = kubesim.core()
    kubesim.control("faults", {"fail_next": [{"status": 503, "count": 2, "verb": "patch"}]})
    for _ in range(2):
        with pytest.raises(ApiException) as caught:
            core.patch_node("gpu-new-000", {"metadata": {"labels": {"a": "1"}}})
        assert caught.value.status == 503
        assert caught.value.headers["Retry-After"] == "1"
    core.patch_node("gpu-new-000", {"metadata": {"labels": {"a": "1"}}})
    assert core.read_node("gpu-new-000").metadata.labels["a"] == "1"


def test_injected_429_carries_retry_after(kubesim: Kubesim) -> None:
    kubesim.control("faults", {"fail_next": [{"status": 429, "count": 1, "verb": "patch"}]})
    with pytest.raises(ApiException) as caught:
        kubesim.core().patch_node("gpu-new-000", {"metadata": {"labels": {"a": "1"}}})
    # Priority and fairness's refusal: plain text, not a Status (K8).
    assert caught.value.status == 429
    assert caught.value.headers["Retry-After"] == "1"
    assert caught.value.headers["Content-Type"] == "text/plain; charset=utf-8"
    assert caught.value.body == "Too many requests, please try again later.\n"


def test_the_clients_own_retry_of_a_get_honours_retry_after(kubesim: Kubesim) -> None:
    # urllib3 (under the kubernetes client) retries idempotent requests answered 429 or 503
    # with Retry-After: the GET succeeds, and the audit log shows both attempts.
    kubesim.control("faults", {"fail_next": [{"status": 429, "count": 1, "verb": "list"}]})
    assert len(kubesim.core().list_node().items) == 25
    codes = [e["responseStatus"]["code"] for e in kubesim.audit_events() if e["verb"] == "list"]
    assert codes == [429, 200]


def test_a_share_of_requests_can_fail(kubesim: Kubesim) -> None:
    kubesim.control("faults", {"rates": {"500": 0.5}, "seed": 7})
    statuses = []
    for _ in range(40):
        try:
            kubesim.core().read_node("gpu-new-000")
            statuses.append(200)
        except ApiException as exc:
            statuses.append(exc.status)
    assert set(statuses) == {200, 500}
    kubesim.control("faults", {"reset": True})
    kubesim.core().read_node("gpu-new-000")


def test_a_dropped_connection(kubesim: Kubesim) -> None:
    kubesim.control("faults", {"fail_next": [{"status": "drop", "count": 1, "verb": "get"}]})
    configuration = client.Configuration()
    configuration.host = kubesim.url
    configuration.api_key = {"authorization": "Bearer kubesim-admin-token-for-tests"}
    configuration.retries = False
    core = client.CoreV1Api(client.ApiClient(configuration))
    with pytest.raises(urllib3.exceptions.ProtocolError):
        core.read_node("gpu-new-000")
    assert core.read_node("gpu-new-000").metadata.name == "gpu-new-000"


def test_a_concurrent_writer_makes_a_guarded_write_conflict(kubesim: Kubesim) -> None:
    core = kubesim.core()
    node = core.read_node("gpu-new-000")
    kubesim.control("faults", {"conflicts": {"gpu-new-000": 1}})
    with pytest.raises(ApiException) as caught:
        core.patch_node(
            "gpu-new-000",
            {"metadata": {"resourceVersion": node.metadata.resource_version, "labels": {"a": "1"}}},
        )
    assert caught.value.status == 409
    fresh = core.read_node("gpu-new-000")
    assert "kubesim.io/concurrent-writer" in fresh.metadata.annotations
    core.patch_node(
        "gpu-new-000",
        {"metadata": {"resourceVersion": fresh.metadata.resource_version, "labels": {"a": "1"}}},
    )
    assert core.read_node("gpu-new-000").metadata.labels["a"] == "1"


def test_latency_is_added(kubesim: Kubesim) -> None:
    from datetime import datetime

    kubesim.control("faults", {"latency_ms": 300})
    kubesim.core().read_node("gpu-new-000")
    kubesim.control("faults", {"reset": True})
    assert kubesim.control("faults", {}) == {
        "latency_ms": 0.0,
        "rates": {},
        "fail_next": [],
        "conflicts": {},
        "ready_before_write": {},
    }
    # The server's own audit record shows the delay it injected between receiving the
    # request and answering it (a property of the fault, not a speed measurement).
    (event,) = [e for e in kubesim.audit_events() if e["verb"] == "get"]
    received, answered = (
        datetime.fromisoformat(event[k].replace("Z", "+00:00"))
        for k in ("requestReceivedTimestamp", "stageTimestamp")
    )
    assert (answered - received).total_seconds() >= 0.3


# --- the audit log ---


def test_audit_log_records_each_request_in_the_real_format(kubesim: Kubesim) -> None:
    core = kubesim.core()
    core.list_node()
    core.read_node("gpu-new-000")
    core.patch_node("gpu-new-000", {"metadata": {"labels": {"a": "1"}}})
    with pytest.raises(ApiException):
        core.read_node("missing")
    events = [e for e in kubesim.audit_events() if e.get("objectRef", {}).get("resource")]
    assert [
        (e["verb"], e["objectRef"].get("name"), e["responseStatus"]["code"]) for e in events
    ] == [
        ("list", None, 200),
        ("get", "gpu-new-000", 200),
        ("patch", "gpu-new-000", 200),
        ("get", "missing", 404),
    ]
    patch = events[2]
    assert patch["kind"] == "Event" and patch["apiVersion"] == "audit.k8s.io/v1"
    assert patch["user"]["username"] == "kubesim-admin"
    assert patch["requestURI"] == "/api/v1/nodes/gpu-new-000"
    assert patch["objectRef"] == {"resource": "nodes", "apiVersion": "v1", "name": "gpu-new-000"}
    assert patch["requestReceivedTimestamp"].endswith("Z")
    assert kubesim.count("patch", name="gpu-new-000") == 1


def test_create_and_delete_nodes(kubesim: Kubesim) -> None:
    core = kubesim.core()
    created = core.create_node(
        client.V1Node(
            metadata=client.V1ObjectMeta(
                name="gpu-extra", labels={"nvidia.com/gpu.product": "NVIDIA-L4"}
            )
        )
    )
    with pytest.raises(ApiException) as caught:
        core.create_node(client.V1Node(metadata=client.V1ObjectMeta(name="gpu-extra")))
    assert caught.value.status == 409
    assert "AlreadyExists" in caught.value.body
    # The node registry answers a DELETE with a Status, not the object (only pods do).
    answer = core.delete_node("gpu-extra")
    assert answer == {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Success",
        "details": {"name": "gpu-extra", "kind": "nodes", "uid": created.metadata.uid},
    }
    with pytest.raises(ApiException):
        core.read_node("gpu-extra")
