"""A simulated NVIDIA dcgm-exporter: one series per GPU per node, following the workload.

Metric names, types, help texts and label order follow dcgm-exporter 3.3.x
(`etc/default-counters.csv` and `etc/dcp-metrics-included.csv`); labels are
gpu, UUID, pci_bus_id, device, modelName, Hostname, DCGM_FI_DRIVER_VERSION, and
container, namespace, pod on GPUs that a pod holds.
"""

from __future__ import annotations

import hashlib
import math
import threading
import time
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from kubesim.cluster import Cluster
from kubesim.scheduling import gpu_request, node_gpus

DRIVER_VERSION = "550.54.15"
LOAD_ANNOTATION = "kubesim.io/load"  # training | inference | idle

METRICS: list[tuple[str, str, str]] = [
    ("DCGM_FI_DEV_SM_CLOCK", "gauge", "SM clock frequency (in MHz)."),
    ("DCGM_FI_DEV_MEM_CLOCK", "gauge", "Memory clock frequency (in MHz)."),
    ("DCGM_FI_DEV_MEMORY_TEMP", "gauge", "Memory temperature (in C)."),
    ("DCGM_FI_DEV_GPU_TEMP", "gauge", "GPU temperature (in C)."),
    ("DCGM_FI_DEV_POWER_USAGE", "gauge", "Power draw (in W)."),
    (
        "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION",
        "counter",
        "Total energy consumption since boot (in mJ).",
    ),
    ("DCGM_FI_DEV_GPU_UTIL", "gauge", "GPU utilization (in %)."),
    ("DCGM_FI_DEV_MEM_COPY_UTIL", "gauge", "Memory utilization (in %)."),
    ("DCGM_FI_DEV_XID_ERRORS", "gauge", "Value of the last XID error encountered."),
    ("DCGM_FI_DEV_FB_FREE", "gauge", "Framebuffer memory free (in MiB)."),
    ("DCGM_FI_DEV_FB_USED", "gauge", "Framebuffer memory used (in MiB)."),
    ("DCGM_FI_DEV_FB_RESERVED", "gauge", "Framebuffer memory reserved (in MiB)."),
    ("DCGM_FI_PROF_GR_ENGINE_ACTIVE", "gauge", "Ratio of time the graphics engine is active."),
    (
        "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE",
        "gauge",
        "Ratio of cycles the tensor (HMMA) pipe is active.",
    ),
    (
        "DCGM_FI_PROF_DRAM_ACTIVE",
        "gauge",
        "Ratio of cycles the device memory interface is active sending or receiving data.",
    ),
]

# Board power (W) by GPU family, for a plausible power curve.
TDP = {"H100": 700, "A100": 400, "L40S": 350, "A10": 150, "L4": 72, "T4": 70}


@dataclass(frozen=True)
class GpuSample:
    util: float
    fb_used: int
    fb_free: int
    fb_reserved: int
    temp: int
    mem_temp: int
    power: float
    energy_mj: int
    sm_clock: int
    mem_clock: int
    mem_copy: float
    xid: int
    gr_active: float
    tensor_active: float
    dram_active: float


def _phase(*parts: object) -> float:
    digest = hashlib.sha256("/".join(map(str, parts)).encode()).digest()
    return int.from_bytes(digest[:4], "big") / 2**32


def gpu_uuid(node: str, index: int) -> str:
    h = hashlib.sha256(f"{node}/{index}".encode()).hexdigest()
    return f"GPU-{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:32]}"


def sample(
    load: str,
    memory_mib: int,
    model: str,
    node: str,
    index: int,
    now: float,
    util_override: float | None,
    xid: int | None,
    boot: float,
) -> GpuSample:
    phase = _phase(node, index)
    if util_override is not None:
        util = util_override
    elif load == "training":
        util = 93 + 5 * math.sin(now / 60 + phase * 6.28)
    elif load == "inference":
        util = 45 + 30 * math.sin(now / 300 + phase * 6.28)
    else:  # idle, or held by a pod that does nothing
        util = 0.0
    util = round(max(0.0, min(100.0, util)), 1)
    reserved = max(1, round(memory_mib * 0.006))
    usable = memory_mib - reserved
    if load == "training":
        used = round(usable * (0.88 + 0.02 * phase))
    elif load == "inference":
        used = round(usable * (0.35 + 0.25 * phase))
    elif load == "held":
        used = round(usable * 0.05)
    else:
        used = 0
    family = next((f for f in TDP if f in model), "A100")
    tdp = TDP[family]
    idle_power = tdp * 0.15
    power = round(idle_power + (tdp - idle_power) * util / 100, 1)
    temp = round(32 + util * 0.45)
    energy = int((now - boot) * (idle_power + (tdp - idle_power) * 0.5) * 1000)
    return GpuSample(
        util=util,
        fb_used=used,
        fb_free=usable - used,
        fb_reserved=reserved,
        temp=temp,
        mem_temp=temp + 6,
        power=power,
        energy_mj=energy,
        sm_clock=1410 if util > 1 else 210,
        mem_clock=1593,
        mem_copy=round(util * 0.6, 1),
        xid=xid or 0,
        gr_active=round(util / 100, 4),
        tensor_active=round(util / 100 * (0.6 if load == "training" else 0.25), 4),
        dram_active=round(util / 100 * 0.5, 4),
    )


def _values(s: GpuSample) -> list[float | int]:
    return [
        s.sm_clock,
        s.mem_clock,
        s.mem_temp,
        s.temp,
        s.power,
        s.energy_mj,
        s.util,
        s.mem_copy,
        s.xid,
        s.fb_free,
        s.fb_used,
        s.fb_reserved,
        s.gr_active,
        s.tensor_active,
        s.dram_active,
    ]


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def exporter_pod_name(node: str) -> str:
    """The dcgm-exporter DaemonSet pod on `node` (a stable, made-up suffix)."""
    return f"nvidia-dcgm-exporter-{hashlib.sha256(node.encode()).hexdigest()[:5]}"


class Exporter:
    def __init__(self, cluster: Cluster, *, hostname_is_pod: bool = False) -> None:
        self.cluster = cluster
        self.boot = time.time() - 86_400
        # Without the node name passed in (NODE_NAME), dcgm-exporter reports its own pod's
        # name as Hostname: the portal must then take the node from another label.
        self.hostname_is_pod = hostname_is_pod

    def node_series(self, node: dict[str, Any], now: float) -> list[tuple[str, list[float | int]]]:
        name = node["metadata"]["name"]
        labels = node["metadata"].get("labels") or {}
        count = node_gpus(node)
        memory = int(labels.get("nvidia.com/gpu.memory", "81920"))
        model = labels.get("nvidia.com/gpu.product", "NVIDIA-A100-SXM4-80GB")
        model_name = model.replace("-", " ", 1)  # GFD's product label, back to NVML's name
        holders: list[tuple[dict[str, Any], str]] = []
        for entry in self.cluster.pods_on_node.get(name, {}).values():
            pod = entry.obj
            load = (pod["metadata"].get("annotations") or {}).get(LOAD_ANNOTATION) or "inference"
            holders += [(pod, load)] * gpu_request(pod)
        hostname = exporter_pod_name(name) if self.hostname_is_pod else name
        rows = []
        for index in range(count):
            pod, load = holders[index] if index < len(holders) else (None, "idle")
            if pod is not None and load == "idle":
                load = "held"
            override = self.cluster.gpu_overrides.get((name, index))
            s = sample(
                load,
                memory,
                model,
                name,
                index,
                now,
                override.util if override else None,
                override.xid if override else None,
                self.boot,
            )
            label_text = (
                f'gpu="{index}",UUID="{gpu_uuid(name, index)}",'
                f'pci_bus_id="00000000:{0x07 + index * 0x10:02X}:00.0",device="nvidia{index}",'
                f'modelName="{_escape(model_name)}",Hostname="{_escape(hostname)}",'
                f'DCGM_FI_DRIVER_VERSION="{DRIVER_VERSION}"'
            )
            if pod is not None:
                container = ((pod.get("spec") or {}).get("containers") or [{}])[0].get("name", "")
                label_text += (
                    f',container="{_escape(container)}",'
                    f'namespace="{_escape(pod["metadata"].get("namespace", ""))}",'
                    f'pod="{_escape(pod["metadata"]["name"])}"'
                )
            rows.append((label_text, _values(s)))
        return rows

    def render(self, only_node: str | None = None) -> bytes:
        now = time.time()
        with self.cluster.store.lock:
            nodes = [e.obj for e in self.cluster.store.list("nodes", None)[1]]
            per_node = [
                row
                for node in nodes
                if node["metadata"]["name"] not in self.cluster.exporter_disabled
                and (only_node is None or node["metadata"]["name"] == only_node)
                for row in self.node_series(node, now)
            ]
        out: list[str] = []
        for position, (metric, kind, help_text) in enumerate(METRICS):
            out.append(f"# HELP {metric} {help_text}\n# TYPE {metric} {kind}\n")
            out.extend(f"{metric}{{{labels}}} {values[position]}\n" for labels, values in per_node)
        return "".join(out).encode()


def make_exporter_server(exporter: Exporter, host: str, port: int) -> ThreadingHTTPServer:
    class ExporterHandler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        disable_nagle_algorithm = True

        def log_message(self, format: str, *args: Any) -> None:
            pass

        def do_GET(self) -> None:
            path = self.path.split("?")[0]
            if path == "/metrics":
                body = exporter.render()
            elif path.startswith("/metrics/node/"):
                body = exporter.render(path.rsplit("/", 1)[1])
            else:
                self.send_response(404)
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            self.send_response(200)
            self.send_header("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    server = ThreadingHTTPServer((host, port), ExporterHandler)
    server.daemon_threads = True
    return server


def write_targets_file(path: Any, nodes: list[str], address: str) -> None:
    """Prometheus file_sd targets, one per node, as a DaemonSet's exporters are scraped:
    each with its node in `kubernetes_node` and the exporter pod's own labels."""
    import json
    from pathlib import Path

    targets = [
        {
            "targets": [address],
            "labels": {
                "__metrics_path__": f"/metrics/node/{node}",
                "kubernetes_node": node,
                "namespace": "gpu-operator",
                "pod": exporter_pod_name(node),
                "container": "nvidia-dcgm-exporter",
            },
        }
        for node in nodes
    ]
    target = Path(path)
    tmp = target.with_suffix(".tmp")
    tmp.write_text(json.dumps(targets, indent=1))
    tmp.replace(target)


def serve_forever_in_thread(server: ThreadingHTTPServer) -> threading.Thread:
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    return thread
