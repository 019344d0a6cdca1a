"""dcgm-exporter 4.x as kubesim simulates it, scraped by a real Prometheus: the default
counters and their value formatting, `err_code`/`err_msg` on XID errors, `pod_uid`, the
lower-case `hostname` label, MIG instances, and GPUs that stay with a pod until it is gone."""

from __future__ import annotations

import re
import urllib.request
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest
from kubernetes.client.exceptions import ApiException

from kubesim.cluster import Cluster
from kubesim.dcgm import Exporter
from kubesim.scenario import load_scenario
from kubesim.seeding import seed
from tests.kubesim.test_exporter_prometheus import query
from tests.kubesim_process import Kubesim, kubesim_server
from tests.servers import PrometheusServer, prometheus_server, wait_for

# The active rows of dcgm-exporter 4.x's etc/default-counters.csv, in the file's order.
DEFAULT_COUNTERS = [
    ("DCGM_FI_DEV_SM_CLOCK", "gauge"),
    ("DCGM_FI_DEV_MEM_CLOCK", "gauge"),
    ("DCGM_FI_DEV_MEMORY_TEMP", "gauge"),
    ("DCGM_FI_DEV_GPU_TEMP", "gauge"),
    ("DCGM_FI_DEV_POWER_USAGE", "gauge"),
    ("DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION", "counter"),
    ("DCGM_FI_DEV_PCIE_REPLAY_COUNTER", "counter"),
    ("DCGM_FI_DEV_GPU_UTIL", "gauge"),
    ("DCGM_FI_DEV_MEM_COPY_UTIL", "gauge"),
    ("DCGM_FI_DEV_ENC_UTIL", "gauge"),
    ("DCGM_FI_DEV_DEC_UTIL", "gauge"),
    ("DCGM_FI_DEV_XID_ERRORS", "gauge"),
    ("DCGM_FI_DEV_FB_FREE", "gauge"),
    ("DCGM_FI_DEV_FB_USED", "gauge"),
    ("DCGM_FI_DEV_FB_RESERVED", "gauge"),
    ("DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL", "counter"),
    ("DCGM_FI_DEV_VGPU_LICENSE_STATUS", "gauge"),
    ("DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS", "counter"),
    ("DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS", "counter"),
    ("DCGM_FI_DEV_ROW_REMAP_FAILURE", "gauge"),
    ("DCGM_FI_PROF_GR_ENGINE_ACTIVE", "gauge"),
    ("DCGM_FI_PROF_PIPE_TENSOR_ACTIVE", "gauge"),
    ("DCGM_FI_PROF_DRAM_ACTIVE", "gauge"),
    ("DCGM_FI_PROF_PCIE_TX_BYTES", "gauge"),
    ("DCGM_FI_PROF_PCIE_RX_BYTES", "gauge"),
]
DOUBLES = {
    "DCGM_FI_DEV_POWER_USAGE",
    "DCGM_FI_PROF_GR_ENGINE_ACTIVE",
    "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE",
    "DCGM_FI_PROF_DRAM_ACTIVE",
}


def scrape(sim: Kubesim, node: str) -> str:
    with urllib.request.urlopen(f"{sim.metrics_url}/metrics/node/{node}", timeout=10) as r:
        return r.read().decode()


def series(text: str, metric: str) -> list[tuple[dict[str, str], str]]:
    """(labels in order, value) for every sample of `metric` in exposition text."""
    found = []
    for line in text.splitlines():
        if line.startswith(metric + "{"):
            body, value = line[len(metric) + 1 :].rsplit("} ", 1)
            found.append((dict(re.findall(r'([A-Za-z_]+)="((?:[^"\\]|\\.)*)"', body)), value))
    return found


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Kubesim, PrometheusServer]]:
    extra = ["--kubernetes-enable-pod-uid", "--hostname-label", "hostname"]
    with kubesim_server(tmp_path_factory.mktemp("kubesim"), extra=extra) as sim:
        sim.control("gpus", {"node": "a100-reserve-001", "gpu": 0, "xid": 79})
        sim.control("gpus", {"node": "a100-reserve-001", "gpu": 1, "xid": 13})
        target = sim.metrics_url.removeprefix("http://")
        with prometheus_server(tmp_path_factory.mktemp("prom"), scrape_targets=[target]) as prom:
            wait_for(lambda: bool(query(prom, "up == 1")), timeout=30, what="first scrape")
            yield sim, prom


def test_the_default_counters_of_dcgm_exporter_4(
    stack: tuple[Kubesim, PrometheusServer],
) -> None:
    sim, prom = stack
    text = scrape(sim, "a100-train-000")
    families = re.findall(r"^# TYPE (\S+) (\S+)$", text, re.M)
    assert families == DEFAULT_COUNTERS
    # The driver version is a label-typed counter: on every series, never a series itself.
    assert "DCGM_FI_DRIVER_VERSION{" not in text
    for name, _ in DEFAULT_COUNTERS:
        samples = series(text, name)
        assert len(samples) == 8, name
        assert all(labels["DCGM_FI_DRIVER_VERSION"] == "550.54.15" for labels, _ in samples)
    names = query(prom, 'count by (__name__) ({__name__=~"DCGM_.+"})')
    assert len(names) == len(DEFAULT_COUNTERS)


def test_values_are_written_as_the_exporter_writes_them(
    stack: tuple[Kubesim, PrometheusServer],
) -> None:
    sim, _ = stack
    text = scrape(sim, "a100-train-000")
    for name, _ in DEFAULT_COUNTERS:
        for _, value in series(text, name):
            # DOUBLE fields through Go's %f (six decimals), INT64 fields through %d.
            pattern = r"-?\d+\.\d{6}" if name in DOUBLES else r"-?\d+"
            assert re.fullmatch(pattern, value), (name, value)


def test_each_xid_code_is_its_own_series_with_its_message(
    stack: tuple[Kubesim, PrometheusServer],
) -> None:
    sim, prom = stack

    def xids() -> dict[str, tuple[str, str, str]]:
        found = query(prom, 'DCGM_FI_DEV_XID_ERRORS{hostname="a100-reserve-001"}')
        return {
            r["metric"]["gpu"]: (r["metric"]["err_code"], r["metric"]["err_msg"], r["value"][1])
            for r in found
        }

    current = xids()
    assert current["0"] == ("79", "GPU has fallen off the bus", "79")
    assert current["1"] == ("13", "Graphics Engine Exception", "13")
    assert current["2"] == ("0", "No Error", "0")
    # The exporter's attributes follow its labels, in sorted order (a Go template's map range).
    held, free = (
        list(labels)[list(labels).index("DCGM_FI_DRIVER_VERSION") + 1 :]
        for labels, _ in series(scrape(sim, "a100-reserve-001"), "DCGM_FI_DEV_XID_ERRORS")[:2]
    )
    assert held == ["container", "err_code", "err_msg", "namespace", "pod", "pod_uid"]
    assert free == ["err_code", "err_msg"]

    sim.control("gpus", {"node": "a100-reserve-001", "gpu": 0, "xid": 48})
    wait_for(
        lambda: xids().get("0") == ("48", "Double Bit ECC Error", "48"),
        timeout=20,
        what="the new XID's series, and the old one gone stale",
    )
    assert len(query(prom, 'DCGM_FI_DEV_XID_ERRORS{hostname="a100-reserve-001",gpu="0"}')) == 1


def test_pod_uid_labels_the_gpus_a_pod_holds(stack: tuple[Kubesim, PrometheusServer]) -> None:
    sim, prom = stack
    pod = sim.core().read_namespaced_pod("llm-pretrain-a100-train-000", "ml-training")
    held = query(prom, 'DCGM_FI_DEV_FB_USED{hostname="a100-train-000"}')
    assert {r["metric"]["pod_uid"] for r in held} == {pod.metadata.uid}
    assert not query(prom, 'DCGM_FI_DEV_FB_USED{hostname="gpu-new-000",pod_uid!=""}')


def test_the_lower_case_hostname_label_newer_exporters_use(
    stack: tuple[Kubesim, PrometheusServer],
) -> None:
    sim, prom = stack
    assert not query(prom, 'DCGM_FI_DEV_GPU_UTIL{Hostname!=""}')
    hosts = query(prom, "count by (hostname) (DCGM_FI_DEV_GPU_UTIL)")
    assert len(hosts) == len(sim.core().list_node().items)
    labels = list(series(scrape(sim, "gpu-new-000"), "DCGM_FI_DEV_GPU_UTIL")[0][0])
    assert labels == [
        "gpu",
        "UUID",
        "pci_bus_id",
        "device",
        "modelName",
        "hostname",
        "DCGM_FI_DRIVER_VERSION",
    ]


@pytest.fixture(scope="module")
def mig_stack(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[tuple[Kubesim, PrometheusServer]]:
    with kubesim_server(tmp_path_factory.mktemp("mig"), scenario="mig") as sim:
        target = sim.metrics_url.removeprefix("http://")
        with prometheus_server(tmp_path_factory.mktemp("prom"), scrape_targets=[target]) as prom:
            wait_for(lambda: bool(query(prom, "up == 1")), timeout=30, what="first scrape")
            yield sim, prom


def test_mig_instances_are_series_of_their_own(
    mig_stack: tuple[Kubesim, PrometheusServer],
) -> None:
    sim, prom = mig_stack
    node = sim.core().read_node("a100-mig-000")
    assert node.status.allocatable["nvidia.com/gpu"] == "56"
    assert node.metadata.labels["nvidia.com/gpu.product"] == "NVIDIA-A100-SXM4-80GB-MIG-1g.10gb"
    instances = query(prom, 'DCGM_FI_DEV_FB_USED{Hostname="a100-mig-000"}')
    assert len(instances) == 56
    assert {r["metric"]["GPU_I_PROFILE"] for r in instances} == {"1g.10gb"}
    on_gpu0 = sorted(int(r["metric"]["GPU_I_ID"]) for r in instances if r["metric"]["gpu"] == "0")
    assert on_gpu0 == [7, 8, 9, 10, 11, 12, 13]
    labels = list(series(scrape(sim, "a100-mig-000"), "DCGM_FI_DEV_FB_USED")[0][0])
    assert labels[4:8] == ["modelName", "GPU_I_PROFILE", "GPU_I_ID", "Hostname"]
    held = {
        (r["metric"]["gpu"], r["metric"]["GPU_I_ID"]): r["metric"].get("exported_pod")
        for r in instances
    }
    assert held[("0", "7")] == "small-model-a100-mig-000-0"
    assert held[("0", "9")] == "small-model-a100-mig-000-2"
    assert held[("0", "10")] is None
    # Utilisation is not reported for MIG instances; the profiling ratios are.
    assert not query(prom, 'DCGM_FI_DEV_GPU_UTIL{Hostname="a100-mig-000"}')
    assert len(query(prom, 'DCGM_FI_PROF_GR_ENGINE_ACTIVE{Hostname="a100-mig-000"}')) == 56
    # A node of whole GPUs beside it carries neither label.
    whole = query(prom, 'DCGM_FI_DEV_GPU_UTIL{Hostname="a100-whole-000"}')
    assert len(whole) == 8 and all("GPU_I_ID" not in r["metric"] for r in whole)


# --- a pod keeps its GPUs (and their workload labels) until it is gone ---


def held_gpus(exporter: Exporter, node: str) -> dict[str, str]:
    text = exporter.render(node).decode()
    return {
        labels["gpu"]: labels.get("pod", "") for labels, _ in series(text, "DCGM_FI_DEV_FB_USED")
    }


def test_a_terminating_pod_keeps_its_gpus_until_it_is_gone() -> None:
    cluster = Cluster()
    seed(cluster, load_scenario("demo"))
    exporter = Exporter(cluster)
    node = "a100-infer-000"
    before = held_gpus(exporter, node)
    leaving = "chat-serving-a100-infer-000-0"
    assert [gpu for gpu, pod in before.items() if pod == leaving] == ["0", "1"]

    # What a graceful delete does first: the pod stays, marked with its deletion time.
    entry = cluster.store.get("pods", "ml-serving", leaving)
    now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    meta = {**entry.obj["metadata"], "deletionTimestamp": now, "deletionGracePeriodSeconds": 30}
    cluster.store.replace("pods", {**entry.obj, "metadata": meta}, expected_rv=None)
    assert held_gpus(exporter, node) == before

    cluster.store.delete("pods", "ml-serving", leaving)
    after = held_gpus(exporter, node)
    assert after["0"] == after["1"] == ""
    # The pods that stay keep their GPUs: the device manager does not renumber them.
    assert {g: p for g, p in after.items() if g not in ("0", "1")} == {
        g: p for g, p in before.items() if g not in ("0", "1")
    }
    # A newcomer takes the lowest free GPU.
    cluster.create_pod(
        {
            "metadata": {"name": "newcomer", "namespace": "ml-serving"},
            "spec": {
                "nodeName": node,
                "containers": [{"name": "main", "resources": {"limits": {"nvidia.com/gpu": "1"}}}],
            },
        }
    )
    assert held_gpus(exporter, node)["0"] == "newcomer"


def test_a_gracefully_deleted_pod_stays_on_its_gpus_over_the_api(tmp_path: Path) -> None:
    with kubesim_server(tmp_path) as sim:
        core = sim.core()
        core.delete_namespaced_pod("notebook-a100-reserve-004", "research", grace_period_seconds=30)
        try:
            pod = core.read_namespaced_pod("notebook-a100-reserve-004", "research")
        except ApiException as exc:
            if exc.status != 404:
                raise
            pytest.skip("this kubesim deletes a pod at once: no terminating pod to look at")
        assert pod.metadata.deletion_timestamp is not None
        text = scrape(sim, "a100-reserve-004")
        held = [labels for labels, _ in series(text, "DCGM_FI_DEV_FB_USED") if labels.get("pod")]
        assert [labels["pod"] for labels in held] == ["notebook-a100-reserve-004"]


def test_the_exporter_collects_the_fields_it_is_told_and_refuses_unknown_ones() -> None:
    # As dcgm-exporter's counters file (-f): only the chosen fields are exported.
    cluster = Cluster()
    seed(cluster, load_scenario("demo"))
    chosen = ["DCGM_FI_DEV_GPU_UTIL", "DCGM_FI_DEV_GPU_TEMP"]
    text = Exporter(cluster, counters=chosen).render("a100-infer-000").decode()
    assert sorted(set(re.findall(r"^(DCGM_\w+)\{", text, re.MULTILINE))) == sorted(chosen)
    everything = Exporter(cluster).render("a100-infer-000").decode()
    assert len(set(re.findall(r"^(DCGM_\w+)\{", everything, re.MULTILINE))) > 20
    with pytest.raises(ValueError, match="unknown DCGM counters: DCGM_FI_NOPE"):
        Exporter(cluster, counters=["DCGM_FI_NOPE"])


def test_energy_counts_each_gpus_own_power_draw_and_only_grows() -> None:
    """TOTAL_ENERGY grows at each GPU's POWER_USAGE (K15), and with the NVLink counter
    (a counter, K12) never goes down when a GPU's load changes."""
    cluster = Cluster()
    seed(cluster, load_scenario("demo"))
    exporter = Exporter(cluster)
    node = cluster.store.get("nodes", None, "a100-infer-000").obj
    start = exporter.boot + 86_400

    def by_gpu(now: float) -> dict[int, tuple[float, int, int]]:
        rows = exporter.node_series(node, now)
        return {
            gpu: (s.power, s.energy_mj, s.nvlink_total) for gpu, (_, _, s, _) in enumerate(rows)
        }

    first, second = by_gpu(start), by_gpu(start + 1)
    for gpu, (power, energy, _) in first.items():
        drawn = (second[gpu][1] - energy) / 1000  # joules in one second: watts
        assert abs(drawn - power) < 0.01 * power, gpu
    busy = [first[g] for g, (power, _, _) in first.items() if power > 100]
    idle = [first[g] for g, (power, _, _) in first.items() if power <= 100]
    assert busy and idle
    assert len({energy for _, energy, _ in busy}) == len(busy)  # no two alike
    assert min(energy for _, energy, _ in busy) > max(energy for _, energy, _ in idle)
    # The inference pod on GPUs 0 and 1 goes: their counters keep what they counted.
    cluster.store.delete("pods", "ml-serving", "chat-serving-a100-infer-000-0")
    third = by_gpu(start + 2)
    for gpu in (0, 1):
        assert third[gpu][1] >= second[gpu][1] and third[gpu][2] == second[gpu][2]
