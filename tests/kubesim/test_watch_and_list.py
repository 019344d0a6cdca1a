"""Watch and list details (issue 12.10): bookmarks, initial events, Table rows on watch,
includeObject, resourceVersion semantics, remainingItemCount."""

from __future__ import annotations

import json
import os
import subprocess
import threading
import time
from typing import Any

import pytest
from kubernetes import watch

from tests.kubesim.conftest import KUBECTL, http, needs_kubectl
from tests.kubesim_process import Kubesim
from tests.servers import wait_for

TABLE = "application/json;as=Table;v=v1;g=meta.k8s.io"


def events(sim: Kubesim, query: str, accept: str = "application/json") -> list[dict[str, Any]]:
    answer = http(sim, "GET", f"/api/v1/nodes?watch=true&{query}", accept=accept, timeout=30)
    return [json.loads(line) for line in answer.body.splitlines() if line]


def test_bookmarks_come_before_the_watch_times_out(kubesim_shared: Kubesim) -> None:
    rv = kubesim_shared.core().list_node().metadata.resource_version
    got = events(kubesim_shared, f"resourceVersion={rv}&allowWatchBookmarks=true&timeoutSeconds=3")
    # Nothing changed: one bookmark, two seconds before the timeout, at the current version.
    assert got == [
        {
            "type": "BOOKMARK",
            "object": {
                "kind": "Node",
                "apiVersion": "v1",
                "metadata": {"resourceVersion": rv, "creationTimestamp": None},
                "spec": {},
                "status": {
                    "daemonEndpoints": {"kubeletEndpoint": {"Port": 0}},
                    "nodeInfo": {
                        "machineID": "",
                        "systemUUID": "",
                        "bootID": "",
                        "kernelVersion": "",
                        "osImage": "",
                        "containerRuntimeVersion": "",
                        "kubeletVersion": "",
                        "kubeProxyVersion": "",
                        "operatingSystem": "",
                        "architecture": "",
                    },
                },
            },
        }
    ]
    # Without allowWatchBookmarks there is none.
    assert events(kubesim_shared, f"resourceVersion={rv}&timeoutSeconds=3") == []


def test_send_initial_events_ends_with_the_annotated_bookmark(kubesim_shared: Kubesim) -> None:
    got = events(
        kubesim_shared,
        "sendInitialEvents=true&resourceVersionMatch=NotOlderThan&allowWatchBookmarks=true"
        "&timeoutSeconds=1",
    )
    assert [e["type"] for e in got[:25]] == ["ADDED"] * 25
    end = got[25]
    assert end["type"] == "BOOKMARK"
    assert end["object"]["metadata"]["annotations"] == {"k8s.io/initial-events-end": "true"}
    listed = kubesim_shared.core().list_node().metadata.resource_version
    assert end["object"]["metadata"]["resourceVersion"] == listed


def test_send_initial_events_needs_not_older_than(kubesim_shared: Kubesim) -> None:
    answer = http(kubesim_shared, "GET", "/api/v1/nodes?watch=true&sendInitialEvents=true")
    assert answer.status == 422
    assert answer.json()["message"] == (
        'ListOptions.meta.k8s.io "" is invalid: resourceVersionMatch: Forbidden: '
        "sendInitialEvents requires setting resourceVersionMatch to NotOlderThan"
    )
    listed = http(kubesim_shared, "GET", "/api/v1/nodes?sendInitialEvents=true")
    assert listed.status == 422
    assert listed.json()["message"].endswith(
        "sendInitialEvents: Forbidden: sendInitialEvents is forbidden for list"
    )


def test_the_official_client_watches_with_bookmarks(kubesim_shared: Kubesim) -> None:
    core = kubesim_shared.core()
    rv = core.list_node().metadata.resource_version
    seen = [
        e["type"]
        for e in watch.Watch().stream(
            core.list_node, resource_version=rv, allow_watch_bookmarks=True, timeout_seconds=3
        )
    ]
    assert seen == ["BOOKMARK"]


def test_table_rows_on_watch_carry_headers_once(kubesim: Kubesim) -> None:
    rv = kubesim.core().list_node().metadata.resource_version

    def touch() -> None:
        time.sleep(0.5)
        for value in ("1", "2"):
            kubesim.core().patch_node("gpu-new-000", {"metadata": {"labels": {"n": value}}})

    threading.Thread(target=touch).start()
    got = events(kubesim, f"resourceVersion={rv}&timeoutSeconds=2&includeObject=None", TABLE)
    assert [e["type"] for e in got] == ["MODIFIED", "MODIFIED"]
    first, second = (e["object"] for e in got)
    assert first["kind"] == "Table" and first["columnDefinitions"][0]["name"] == "Name"
    assert second["columnDefinitions"] is None
    assert second["rows"][0]["cells"][0] == "gpu-new-000"
    assert second["rows"][0]["object"] is None


def test_an_object_leaving_the_selector_is_deleted_as_it_was(kubesim: Kubesim) -> None:
    """The watch cache's DELETED for an object that no longer matches carries the object
    as it last matched, at the change's resourceVersion (the real server's; K9)."""
    core = kubesim.core()
    rv = core.list_node(label_selector="gpu-pool=mixed").metadata.resource_version
    left = core.patch_node("a100-reserve-000", {"metadata": {"labels": {"gpu-pool": "other"}}})
    back = core.patch_node("a100-reserve-000", {"metadata": {"labels": {"gpu-pool": "mixed"}}})
    got = events(kubesim, f"labelSelector=gpu-pool%3Dmixed&resourceVersion={rv}&timeoutSeconds=1")
    seen = [
        (e["type"], e["object"]["metadata"]["labels"]["gpu-pool"], e["object"]["metadata"])
        for e in got
    ]
    assert [(kind, pool, meta["resourceVersion"]) for kind, pool, meta in seen] == [
        ("DELETED", "mixed", left.metadata.resource_version),
        ("ADDED", "mixed", back.metadata.resource_version),
    ]


@pytest.mark.parametrize(
    ("include", "object_kind"), [("", "PartialObjectMetadata"), ("Object", "Node"), ("None", None)]
)
def test_include_object_on_tables(
    kubesim_shared: Kubesim, include: str, object_kind: str | None
) -> None:
    table = http(
        kubesim_shared, "GET", f"/api/v1/nodes?limit=1&includeObject={include}", accept=TABLE
    ).json()
    row_object = table["rows"][0]["object"]
    assert (row_object or {}).get("kind") == object_kind
    bad = http(kubesim_shared, "GET", "/api/v1/nodes?includeObject=All", accept=TABLE)
    assert bad.status == 400
    assert bad.json()["message"] == (
        'Unable to convert to Table as requested: includeObject: Invalid value: "All": '
        "must be 'Metadata', 'Object', 'None', or empty"
    )


def test_an_exact_list_reads_the_past(kubesim: Kubesim) -> None:
    core = kubesim.core()
    before = core.list_node().metadata.resource_version
    core.patch_node("gpu-new-000", {"metadata": {"labels": {"gpu-pool": "training"}}})
    past = core.list_node(resource_version=before, resource_version_match="Exact")
    node = next(n for n in past.items if n.metadata.name == "gpu-new-000")
    assert "gpu-pool" not in (node.metadata.labels or {})
    assert past.metadata.resource_version == before
    now = core.list_node(resource_version=before, resource_version_match="NotOlderThan")
    node = next(n for n in now.items if n.metadata.name == "gpu-new-000")
    assert node.metadata.labels["gpu-pool"] == "training"


def test_a_list_from_the_future_times_out_with_504(kubesim_shared: Kubesim) -> None:
    current = int(kubesim_shared.core().list_node().metadata.resource_version)
    answer = http(kubesim_shared, "GET", f"/api/v1/nodes?resourceVersion={current + 100}")
    assert answer.status == 504
    assert answer.headers["Retry-After"] == "1"
    assert answer.json()["message"] == (
        f"Timeout: Too large resource version: {current + 100}, current: {current}"
    )
    assert answer.json()["details"]["causes"] == [
        {"reason": "ResourceVersionTooLarge", "message": "Too large resource version"}
    ]


def test_limit_and_remaining_item_count_as_real(kubesim_shared: Kubesim) -> None:
    core = kubesim_shared.core()
    page = core.list_node(limit=10)
    assert page.metadata.remaining_item_count == 15 and page.metadata._continue
    # With a selector etcd cannot count what is left: no remainingItemCount.
    selected = core.list_node(limit=2, label_selector="gpu-pool")
    assert selected.metadata._continue and selected.metadata.remaining_item_count is None
    # resourceVersion=0 is served from the watch cache, which ignores limit.
    cached = core.list_node(limit=10, resource_version="0")
    assert len(cached.items) == 25 and cached.metadata._continue is None


@needs_kubectl
def test_kubectl_get_watch_prints_one_header(tls_kubesim: Kubesim) -> None:
    env = {**os.environ, "KUBECONFIG": str(tls_kubesim.kubeconfig)}
    process = subprocess.Popen(
        [KUBECTL or "kubectl", "get", "nodes", "-w", "--request-timeout=0"],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    lines: list[str] = []
    reader = threading.Thread(target=lambda: lines.extend(iter(process.stdout.readline, "")))  # type: ignore[union-attr]
    reader.start()
    try:
        # The list first; then two changes, watched from the list's resourceVersion.
        wait_for(lambda: len(lines) >= 26, timeout=20, what="the list")
        for value in ("1", "2"):
            tls_kubesim.core().patch_node("gpu-new-001", {"metadata": {"labels": {"n": value}}})
        wait_for(lambda: len(lines) >= 28, timeout=20, what="two watched rows")
    finally:
        process.terminate()
        process.wait(timeout=10)
        reader.join(timeout=10)
    assert sum(1 for line in lines if line.startswith("NAME")) == 1
    assert len(lines) == 1 + 25 + 2
    assert lines[-1].split()[0] == "gpu-new-001"
