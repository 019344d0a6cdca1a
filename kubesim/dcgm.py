"""A simulated NVIDIA dcgm-exporter 4.x: one series per GPU (or MIG instance) per node,
following the workload.

A MIG instance is a series of its own under either MIG strategy; a shared GPU
(time-slicing, MPS) is one series however many replicas it is advertised as.

Metric names, types, help texts and value formatting come from `kubesim.dcgm_counters`.
Labels are in the exporter's order: gpu, UUID, pci_bus_id, device, modelName, then
GPU_I_PROFILE and GPU_I_ID on a MIG instance, Hostname (or `hostname`, as exporters name it
since the label was renamed), DCGM_FI_DRIVER_VERSION, and then the exporter's attributes
in sorted order: container, err_code and err_msg (XID only), namespace, pod, pod_uid.
"""

from __future__ import annotations

import hashlib
import math
import threading
import time
from collections.abc import Collection
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from kubesim import daemonsets, mig, sharing
from kubesim.cluster import Cluster
from kubesim.dcgm_counters import COUNTERS, XID_COUNTER, format_value, xid_message
from kubesim.recorded import render_recorded
from kubesim.scheduling import node_gpus
from kubesim.store import Entry

DRIVER_VERSION = "550.54.15"
LOAD_ANNOTATION = "kubesim.io/load"  # training | inference | idle
HOSTNAME_LABELS = ("Hostname", "hostname")

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
    pcie_tx: int
    pcie_rx: int
    nvlink_total: int

    def values(self) -> dict[str, float]:
        return {
            "DCGM_FI_DEV_SM_CLOCK": self.sm_clock,
            "DCGM_FI_DEV_MEM_CLOCK": self.mem_clock,
            "DCGM_FI_DEV_MEMORY_TEMP": self.mem_temp,
            "DCGM_FI_DEV_GPU_TEMP": self.temp,
            "DCGM_FI_DEV_POWER_USAGE": self.power,
            "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION": self.energy_mj,
            "DCGM_FI_DEV_PCIE_REPLAY_COUNTER": 0,
            "DCGM_FI_DEV_GPU_UTIL": round(self.util),
            "DCGM_FI_DEV_MEM_COPY_UTIL": round(self.mem_copy),
            "DCGM_FI_DEV_ENC_UTIL": 0,
            "DCGM_FI_DEV_DEC_UTIL": 0,
            "DCGM_FI_DEV_XID_ERRORS": self.xid,
            "DCGM_FI_DEV_FB_FREE": self.fb_free,
            "DCGM_FI_DEV_FB_USED": self.fb_used,
            "DCGM_FI_DEV_FB_RESERVED": self.fb_reserved,
            "DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL": self.nvlink_total,
            "DCGM_FI_DEV_VGPU_LICENSE_STATUS": 0,
            "DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS": 0,
            "DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS": 0,
            "DCGM_FI_DEV_ROW_REMAP_FAILURE": 0,
            "DCGM_FI_PROF_GR_ENGINE_ACTIVE": self.gr_active,
            "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE": self.tensor_active,
            "DCGM_FI_PROF_DRAM_ACTIVE": self.dram_active,
            "DCGM_FI_PROF_PCIE_TX_BYTES": self.pcie_tx,
            "DCGM_FI_PROF_PCIE_RX_BYTES": self.pcie_rx,
        }


def _phase(*parts: object) -> float:
    digest = hashlib.sha256("/".join(map(str, parts)).encode()).digest()
    return int.from_bytes(digest[:4], "big") / 2**32


def gpu_uuid(node: str, index: int) -> str:
    h = hashlib.sha256(f"{node}/{index}".encode()).hexdigest()
    return f"GPU-{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:32]}"


def util_integral(
    load: str, phase: float, start: float, end: float, util_override: float | None
) -> float:
    """The integral of `utilisation` over [start, end] (%·s), in closed form."""
    if end <= start:
        return 0.0
    if util_override is not None:
        return max(0.0, min(100.0, util_override)) * (end - start)
    theta = phase * 6.28
    if load == "training":
        return 93 * (end - start) - 5 * 60 * (
            math.cos(end / 60 + theta) - math.cos(start / 60 + theta)
        )
    if load == "inference":
        return 45 * (end - start) - 30 * 300 * (
            math.cos(end / 300 + theta) - math.cos(start / 300 + theta)
        )
    return 0.0


def power_range(model: str) -> tuple[float, float]:
    """(idle, full) board power (W) of a GPU model; the draw is linear in utilisation."""
    tdp = TDP[next((f for f in TDP if f in model), "A100")]
    return tdp * 0.15, float(tdp)


def power_draw(model: str, util: float) -> float:
    """The board power (W) at `util` %: the live exporter and the backfilled history alike."""
    idle_power, tdp = power_range(model)
    return round(idle_power + (tdp - idle_power) * util / 100, 3)


def temperature(util: float) -> int:
    """The GPU's temperature (C) at `util` %."""
    return round(32 + util * 0.45)


@dataclass(frozen=True)
class Meter:
    """What a GPU's counters hold at `at`: the energy it used since boot (mJ) and its NVLink
    traffic. Each scrape adds the span since the last under the GPU's load then, so both
    only grow, and at the rate its own power draw and utilisation give."""

    at: float
    energy_mj: float
    nvlink: float


def meter_after(
    previous: Meter | None,
    load: str,
    model: str,
    phase: float,
    util_override: float | None,
    boot: float,
    now: float,
) -> Meter:
    """The meter at `now`; a GPU seen first counts from boot as if under its load now."""
    base = previous or Meter(boot, 0.0, 0.0)
    if now <= base.at:
        return base
    idle, full = power_range(model)
    used = util_integral(load, phase, base.at, now, util_override)
    joules = idle * (now - base.at) + (full - idle) * used / 100
    traffic = used * (4000 if load == "training" else 50)
    return Meter(now, base.energy_mj + joules * 1000, base.nvlink + traffic)


def utilisation(load: str, phase: float, now: float) -> float:
    """GPU utilisation (%) of a GPU under `load` at `now`; `phase` is the GPU's own offset."""
    if load == "training":
        return 93 + 5 * math.sin(now / 60 + phase * 6.28)
    if load == "inference":
        return 45 + 30 * math.sin(now / 300 + phase * 6.28)
    return 0.0  # idle, or held by a pod that does nothing


def reserved_mib(memory_mib: int) -> int:
    return max(1, round(memory_mib * 0.006))


def fb_used(load: str, usable: int, phase: float) -> int:
    """Framebuffer used (MiB) of a GPU under `load`."""
    if load == "training":
        return round(usable * (0.88 + 0.02 * phase))
    if load == "inference":
        return round(usable * (0.35 + 0.25 * phase))
    if load == "held":
        return round(usable * 0.05)
    return 0


def gpu_phase(node: str, index: int) -> float:
    return _phase(node, index)


def sample(
    load: str,
    memory_mib: int,
    model: str,
    node: str,
    index: int,
    now: float,
    util_override: float | None,
    xid: int | None,
    meter: Meter,
) -> GpuSample:
    phase = _phase(node, index)
    util = util_override if util_override is not None else utilisation(load, phase, now)
    util = max(0.0, min(100.0, util))
    reserved = reserved_mib(memory_mib)
    usable = memory_mib - reserved
    used = fb_used(load, usable, phase)
    power = power_draw(model, util)
    temp = temperature(util)
    pcie = int(util / 100 * (2.4e9 if load == "training" else 6e8))
    return GpuSample(
        util=util,
        fb_used=used,
        fb_free=usable - used,
        fb_reserved=reserved,
        temp=temp,
        mem_temp=temp + 6,
        power=power,
        energy_mj=int(meter.energy_mj),
        sm_clock=1410 if util > 1 else 210,
        mem_clock=1593,
        mem_copy=util * 0.6,
        xid=xid or 0,
        gr_active=util / 100,
        tensor_active=util / 100 * (0.6 if load == "training" else 0.25),
        dram_active=util / 100 * 0.5,
        pcie_tx=pcie,
        pcie_rx=pcie // 3,
        nvlink_total=int(meter.nvlink),
    )


def driver_version(labels: dict[str, str]) -> str:
    """The node's driver as NVML reports it, from GPU feature discovery's labels."""
    parts = [labels.get(f"nvidia.com/cuda.driver.{p}") for p in ("major", "minor", "rev")]
    if all(parts):
        return ".".join(str(p) for p in parts)
    return DRIVER_VERSION


def _load(pod: dict[str, Any] | None) -> str:
    """What a GPU does: idle when no pod holds it, else its pod's load annotation."""
    if pod is None:
        return "idle"
    annotations = pod["metadata"].get("annotations") or {}
    load = annotations.get(LOAD_ANNOTATION) or "inference"
    # Devices are allocated at admission: a pod whose container has not started (an image
    # still failing to pull) holds its GPUs and uses none of them.
    return "held" if load == "idle" or not _running(pod) else load


def _running(pod: dict[str, Any]) -> bool:
    statuses = (pod.get("status") or {}).get("containerStatuses") or []
    return not statuses or any("running" in (s.get("state") or {}) for s in statuses)


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def exporter_pod_name(node: str) -> str:
    """The first dcgm-exporter DaemonSet pod on `node` (as the DaemonSet controller names it)."""
    return f"{daemonsets.EXPORTER}-{daemonsets.name_suffix(f'{daemonsets.EXPORTER}/{node}/0')}"


@dataclass(frozen=True)
class Device:
    """What the exporter reports on: a whole GPU, or one MIG instance of it."""

    gpu: int
    profile: str = ""
    instance_id: int = 0


def node_devices(node: dict[str, Any]) -> list[Device]:
    labels = node["metadata"].get("labels") or {}
    layout = mig.layout_of(labels)
    count = node_gpus(node)
    if not count and layout is None:
        # GPUs handed out through DRA are advertised as no resource; dcgm-exporter still
        # reports every GPU the driver sees (GFD's count of them).
        count = _int(labels.get(mig.COUNT_LABEL))
    if layout is None:
        return [Device(index) for index in range(count // replicas_of(labels))]
    ids = layout.instance_ids
    return [Device(slot // len(ids), layout.profile, ids[slot % len(ids)]) for slot in range(count)]


def _int(value: object) -> int:
    try:
        return max(int(str(value)), 0)
    except ValueError:
        return 0


def replicas_of(labels: dict[str, str]) -> int:
    """The devices a GPU is advertised as: its replicas when shared, else one."""
    shared = sharing.sharing_of(labels)
    return shared.replicas if shared is not None else 1


class Exporter:
    def __init__(
        self,
        cluster: Cluster,
        *,
        hostname_is_pod: bool = False,
        hostname_label: str = "Hostname",
        pod_uid: bool = False,
        counters: Collection[str] | None = None,
    ) -> None:
        if hostname_label not in HOSTNAME_LABELS:
            raise ValueError(f"hostname_label must be one of {', '.join(HOSTNAME_LABELS)}")
        unknown = set(counters or ()) - {c.name for c in COUNTERS}
        if unknown:
            raise ValueError(f"unknown DCGM counters: {', '.join(sorted(unknown))}")
        # The fields collected, as dcgm-exporter's counters file (-f) chooses them: all the
        # default ones unless told.
        self.counters = [c for c in COUNTERS if counters is None or c.name in counters]
        self.cluster = cluster
        self.boot = time.time() - 86_400
        # Without the node name passed in (NODE_NAME), dcgm-exporter reports its own pod's
        # name as Hostname: the portal must then take the node from another label.
        self.hostname_is_pod = hostname_is_pod
        self.hostname_label = hostname_label
        self.pod_uid = pod_uid  # DCGM_EXPORTER_KUBERNETES_ENABLE_POD_UID
        # Per (node, GPU slot): its counters at the last scrape (pages render in parallel).
        self._meters: dict[tuple[str, int], Meter] = {}
        self._meters_lock = threading.Lock()

    def holders(self, name: str, devices: int, replicas: int = 1) -> list[Entry | None]:
        """The pod each device is labelled with (None: no pod holds it).

        A shared GPU's replicas are devices of their own to the kubelet; the device plugin
        spreads them over the GPUs, so replica slot s is on GPU s mod `devices`.
        dcgm-exporter maps each replica back to its GPU and keeps one pod per GPU (the last
        it reads, unless --kubernetes-virtual-gpus): kubesim names the pod on the GPU's
        lowest replica slot."""
        slots = self.cluster.gpu_holders(name, devices * replicas)
        if replicas == 1:
            return slots
        return [
            next((pod for pod in slots[gpu::devices] if pod is not None), None)
            for gpu in range(devices)
        ]

    def exporter_pod(self, node: str) -> str:
        controller = self.cluster.daemonsets
        found = controller.pod_name(node, daemonsets.EXPORTER) if controller else None
        return found or exporter_pod_name(node)

    def _identity(self, node: str, model_name: str, device: Device) -> str:
        g = device.gpu
        text = (
            f'gpu="{g}",UUID="{gpu_uuid(node, g)}",'
            f'pci_bus_id="00000000:{0x07 + g * 0x10:02X}:00.0",device="nvidia{g}",'
            f'modelName="{_escape(model_name)}"'
        )
        if device.profile:
            text += f',GPU_I_PROFILE="{device.profile}",GPU_I_ID="{device.instance_id}"'
        hostname = self.exporter_pod(node) if self.hostname_is_pod else node
        return text + f',{self.hostname_label}="{_escape(hostname)}"'

    def node_series(
        self, node: dict[str, Any], now: float
    ) -> list[tuple[str, str, GpuSample, bool]]:
        """(labels before err_code, labels after it, the sample, is a MIG instance) a device."""
        name = node["metadata"]["name"]
        labels = node["metadata"].get("labels") or {}
        devices = node_devices(node)
        layout = mig.layout_of(labels)
        memory = layout.memory_mib if layout else int(labels.get("nvidia.com/gpu.memory", "81920"))
        model = mig.parent_model(labels.get("nvidia.com/gpu.product", "NVIDIA-A100-SXM4-80GB"))
        model_name = model.replace("-", " ", 1)  # GFD's product label, back to NVML's name
        rows = []
        holders = self.holders(name, len(devices), replicas_of(labels))
        for slot, (device, entry) in enumerate(zip(devices, holders, strict=True)):
            pod = entry.obj if entry is not None else None
            load = _load(pod)
            override = self.cluster.gpu_overrides.get((name, slot))
            util_override = override.util if override else None
            with self._meters_lock:
                meter = self._meters[(name, slot)] = meter_after(
                    self._meters.get((name, slot)),
                    load,
                    model,
                    gpu_phase(name, slot),
                    util_override,
                    self.boot,
                    now,
                )
            s = sample(
                load,
                memory,
                model,
                name,
                slot,
                now,
                util_override,
                override.xid if override else None,
                meter,
            )
            head = self._identity(name, model_name, device)
            head += f',DCGM_FI_DRIVER_VERSION="{driver_version(labels)}"'
            container, tail = self._pod_labels(pod) if pod is not None else ("", "")
            rows.append((head + container, tail, s, bool(device.profile)))
        return rows

    def _pod_labels(self, pod: dict[str, Any]) -> tuple[str, str]:
        """The labels of the pod holding a GPU: its container's before err_code, its
        namespace, name (and uid) after."""
        meta = pod["metadata"]
        container = ((pod.get("spec") or {}).get("containers") or [{}])[0].get("name", "")
        tail = f',namespace="{_escape(meta.get("namespace", ""))}",pod="{_escape(meta["name"])}"'
        if self.pod_uid:
            tail += f',pod_uid="{meta.get("uid", "")}"'
        return f',container="{_escape(container)}"', tail

    def render(self, only_node: str | None = None) -> bytes:
        now = time.time()
        store = self.cluster.store
        with store.lock:
            if only_node is None:
                nodes = [e.obj for e in store.list("nodes", None)[1]]
            else:  # one node's page looks that node up: 15,000 targets scrape in turn
                found = store.objects["nodes"].get(only_node)
                nodes = [found.obj] if found else []
            per_node = [
                row
                for node in nodes
                if node["metadata"]["name"] not in self.cluster.exporter_disabled
                for row in self.node_series(node, now)
            ]
        samples = [(head, tail, s.values(), is_mig) for head, tail, s, is_mig in per_node]
        out: list[str] = []
        for counter in self.counters:
            out.append(
                f"# HELP {counter.name} {counter.help}\n# TYPE {counter.name} {counter.kind}\n"
            )
            for head, tail, values, is_mig in samples:
                if is_mig and not counter.mig:
                    continue
                value = values[counter.name]
                if counter.name == XID_COUNTER:
                    code = int(value)
                    labels = f'{head},err_code="{code}",err_msg="{xid_message(code)}"{tail}'
                else:
                    labels = head + tail
                out.append(f"{counter.name}{{{labels}}} {format_value(counter, value)}\n")
        return "".join(out).encode()


METRICS_CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"


def exporter_page(exporter: Exporter, path: str) -> bytes | None:
    """The page at `path` (`/metrics`, one node's at `/metrics/node/NAME`, or the recording
    rules' per-node series at `/metrics/recorded`), or None."""
    path = path.split("?")[0]
    if path == "/metrics":
        return exporter.render()
    if path == "/metrics/recorded":
        return render_recorded(exporter)
    if path.startswith("/metrics/node/"):
        return exporter.render(path.rsplit("/", 1)[1])
    return None


def make_exporter_server(exporter: Exporter, host: str, port: int) -> ThreadingHTTPServer:
    class ExporterHandler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        disable_nagle_algorithm = True

        def log_message(self, format: str, *args: Any) -> None:
            pass

        def do_GET(self) -> None:
            body = exporter_page(exporter, self.path)
            if body is None:
                self.send_response(404)
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            self.send_response(200)
            self.send_header("Content-Type", METRICS_CONTENT_TYPE)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    server = ThreadingHTTPServer((host, port), ExporterHandler)
    server.daemon_threads = True
    return server


def write_targets_file(
    path: Any, nodes: list[str], address: str, pod_names: dict[str, str] | None = None
) -> None:
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
                "pod": (pod_names or {}).get(node) or exporter_pod_name(node),
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
