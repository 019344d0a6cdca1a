"""A real Prometheus scraping kubesim's dcgm-exporter, and PromQL answering from it."""

from __future__ import annotations

import json
import urllib.parse
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.kubesim_process import Kubesim, kubesim_server
from tests.servers import PrometheusServer, prometheus_server, wait_for

GPUS_PER_NODE = {"a100": 8, "h100": 8, "gpu-new": 4}


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Kubesim, PrometheusServer]]:
    with kubesim_server(tmp_path_factory.mktemp("kubesim")) as sim:
        sim.control("gpus", {"node": "a100-reserve-000", "gpu": 3, "util": 37})
        sim.control("gpus", {"node": "a100-reserve-001", "gpu": 0, "xid": 79})
        sim.control("exporter", {"node": "a100-reserve-002", "enabled": False})
        target = sim.metrics_url.removeprefix("http://")
        with prometheus_server(tmp_path_factory.mktemp("prom"), scrape_targets=[target]) as prom:
            wait_for(lambda: bool(query(prom, "up == 1")), timeout=30, what="first scrape")
            yield sim, prom


def query(prom: PrometheusServer, promql: str) -> list[dict]:  # type: ignore[type-arg]
    url = f"{prom.url}/api/v1/query?" + urllib.parse.urlencode({"query": promql})
    with urllib.request.urlopen(url, timeout=5) as response:
        body = json.loads(response.read())
    assert body["status"] == "success", body
    return body["data"]["result"]


def scalar(prom: PrometheusServer, promql: str) -> float:
    result = query(prom, promql)
    assert len(result) == 1, result
    return float(result[0]["value"][1])


def test_exporter_text_format_follows_dcgm_exporter(
    stack: tuple[Kubesim, PrometheusServer],
) -> None:
    sim, _ = stack
    with urllib.request.urlopen(f"{sim.metrics_url}/metrics/node/a100-train-000") as response:
        text = response.read().decode()
    assert "# HELP DCGM_FI_DEV_GPU_UTIL GPU utilization (in %).\n" in text
    assert "# TYPE DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION counter\n" in text
    line = next(ln for ln in text.splitlines() if ln.startswith("DCGM_FI_DEV_GPU_UTIL{"))
    labels = line[line.index("{") + 1 : line.index("}")]
    assert [part.split("=")[0] for part in labels.split('",')] == [
        "gpu",
        "UUID",
        "pci_bus_id",
        "device",
        "modelName",
        "Hostname",
        "DCGM_FI_DRIVER_VERSION",
        "container",
        "namespace",
        "pod",
    ]
    assert 'modelName="NVIDIA A100-SXM4-80GB"' in line
    assert 'pod="llm-pretrain-a100-train-000"' in line


def test_one_series_per_gpu_of_every_exporting_node(
    stack: tuple[Kubesim, PrometheusServer],
) -> None:
    sim, prom = stack
    nodes = sim.core().list_node().items
    expected = sum(
        int(n.status.allocatable["nvidia.com/gpu"])
        for n in nodes
        if n.metadata.name != "a100-reserve-002"
    )
    assert scalar(prom, "count(DCGM_FI_DEV_GPU_UTIL)") == expected
    hosts = {
        r["metric"]["Hostname"] for r in query(prom, "count by (Hostname) (DCGM_FI_DEV_GPU_UTIL)")
    }
    assert "a100-reserve-002" not in hosts  # the node whose exporter is missing
    assert len(hosts) == len(nodes) - 1


def test_workload_labels_arrive_as_exported_labels(stack: tuple[Kubesim, PrometheusServer]) -> None:
    _, prom = stack
    held = query(prom, 'DCGM_FI_DEV_GPU_UTIL{Hostname="a100-train-000"}')
    assert len(held) == 8
    assert {r["metric"]["exported_pod"] for r in held} == {"llm-pretrain-a100-train-000"}
    assert {r["metric"]["exported_namespace"] for r in held} == {"ml-training"}
    # `pod` is now the exporter's own pod, the pitfall a portal must not fall into.
    assert {r["metric"]["pod"] for r in held} == {"nvidia-dcgm-exporter-sim"}


def test_values_follow_the_workload(stack: tuple[Kubesim, PrometheusServer]) -> None:
    _, prom = stack
    training = scalar(prom, 'avg(DCGM_FI_DEV_GPU_UTIL{Hostname="a100-train-000"})')
    assert 85 <= training <= 100
    idle = scalar(prom, 'max(DCGM_FI_DEV_GPU_UTIL{Hostname="gpu-new-000"})')
    assert idle == 0
    assert scalar(prom, 'DCGM_FI_DEV_GPU_UTIL{Hostname="a100-reserve-000",gpu="3"}') == 37
    # Framebuffer: used + free + reserved is the GPU's memory, on every GPU.
    totals = query(prom, "DCGM_FI_DEV_FB_USED + DCGM_FI_DEV_FB_FREE + DCGM_FI_DEV_FB_RESERVED")
    by_host = {(r["metric"]["Hostname"], float(r["value"][1])) for r in totals}
    assert ("a100-train-000", 81920.0) in by_host
    assert ("h100-infer-000", 81559.0) in by_host
    assert ("gpu-new-000", 46068.0) in by_host
    hot = scalar(prom, 'max(DCGM_FI_DEV_GPU_TEMP{Hostname="a100-train-000"})')
    cold = scalar(prom, 'max(DCGM_FI_DEV_GPU_TEMP{Hostname="gpu-new-000"})')
    assert hot > cold


def test_injected_xid_is_exported_and_stays(stack: tuple[Kubesim, PrometheusServer]) -> None:
    _, prom = stack
    with_xid = query(prom, "DCGM_FI_DEV_XID_ERRORS > 0")
    assert [(r["metric"]["Hostname"], r["metric"]["gpu"], r["value"][1]) for r in with_xid] == [
        ("a100-reserve-001", "0", "79")
    ]


def test_gpus_follow_pods_as_they_come_and_go(tmp_path: Path) -> None:
    with kubesim_server(tmp_path) as sim:
        core = sim.core()
        node_metrics = f"{sim.metrics_url}/metrics/node/a100-reserve-004"
        assert b'pod="notebook-a100-reserve-004"' in urllib.request.urlopen(node_metrics).read()
        core.delete_namespaced_pod("notebook-a100-reserve-004", "research")
        # A terminating pod holds its GPU until its grace period ends.
        assert b"notebook-a100-reserve-004" in urllib.request.urlopen(node_metrics).read()
        sim.control("clock", {"advance": 30})
        text = urllib.request.urlopen(node_metrics).read().decode()
        assert "notebook-a100-reserve-004" not in text
        util = [ln for ln in text.splitlines() if ln.startswith("DCGM_FI_DEV_GPU_UTIL{")]
        assert len(util) == 8 and all(ln.endswith(" 0") for ln in util)
        core.create_namespaced_pod(
            "research",
            {
                "metadata": {"name": "trainer", "annotations": {"kubesim.io/load": "training"}},
                "spec": {
                    "nodeName": "a100-reserve-004",
                    "containers": [
                        {
                            "name": "main",
                            "image": "t:1",
                            "resources": {"limits": {"nvidia.com/gpu": "2"}},
                        }
                    ],
                },
            },
        )
        text = urllib.request.urlopen(node_metrics).read().decode()
        held = [
            ln
            for ln in text.splitlines()
            if ln.startswith("DCGM_FI_DEV_GPU_UTIL{") and 'pod="trainer"' in ln
        ]
        assert [ln.split('gpu="')[1].split('"')[0] for ln in held] == ["0", "1"]
        assert all(float(ln.rsplit(" ", 1)[1]) > 85 for ln in held)
