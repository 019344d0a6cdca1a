"""DCGM samples for a cluster's past, as OpenMetrics text for `promtool tsdb
create-blocks-from openmetrics`: what Prometheus would have scraped from kubesim's exporter
while the workload model's history ran.

For every GPU, one sample every `step` seconds of `DCGM_FI_DEV_GPU_UTIL`,
`DCGM_FI_DEV_FB_USED`, `DCGM_FI_DEV_GPU_TEMP` and `DCGM_FI_DEV_POWER_USAGE`, computed as
the live exporter computes them (`kubesim.dcgm`) from the pod that held the GPU then
(`WorkloadRunner.records`, and the scenario's own pods, there all along);
`DCGM_FI_DEV_XID_ERRORS` for the GPUs that faulted (0 before, the XID from then on,
each code its own series through `err_code`/`err_msg`, as the exporter reports it). The
labels are the exporter's plus what the scrape adds (`target_labels`: job, instance and the
exporter pod's namespace/pod/container), the workload's own as `exported_*`: the backfilled
series are the same series the live scrape continues.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from kubesim import dcgm, mig
from kubesim.dcgm_counters import xid_message
from kubesim.scheduling import node_gpus
from kubesim.store import key_of
from kubesim.workload_runner import WorkloadRunner


@dataclass(frozen=True)
class Holding:
    start: float
    end: float
    labels: str  # the exported_* labels of the pod holding the GPU
    load: str


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def _pod_labels(namespace: str, name: str, container: str = "main") -> str:
    return (
        f',exported_container="{_escape(container)}",exported_namespace="{_escape(namespace)}"'
        f',exported_pod="{_escape(name)}"'
    )


def holdings(
    runner: WorkloadRunner, start: float, end: float
) -> dict[tuple[str, int], list[Holding]]:
    """(node, GPU slot) -> the pods that held it, in time order."""
    held: dict[tuple[str, int], list[Holding]] = {}
    for record in runner.records.values():
        if not record.node or record.scheduled is None:
            continue
        began = record.started if record.started is not None else record.scheduled
        finished = record.finished if record.finished is not None else end
        load = record.load if record.started is not None else "held"
        load = "held" if load == "idle" else load
        labels = _pod_labels(record.namespace, record.name)
        for slot in record.slots:
            held.setdefault((record.node, slot), []).append(
                Holding(max(began, start), min(finished, end), labels, load)
            )
    # The scenario's own pods hold their GPUs all along (on the slots the exporter gives
    # them: asking assigns them on nodes no one has asked about yet).
    cluster = runner.cluster
    for node, found_node in cluster.store.objects["nodes"].items():
        for slot, found in enumerate(cluster.gpu_holders(node, node_gpus(found_node.obj))):
            if found is None:
                continue
            meta = found.obj["metadata"]
            if key_of(meta["namespace"], meta["name"]) in runner.records:
                continue
            load = (meta.get("annotations") or {}).get(dcgm.LOAD_ANNOTATION) or "inference"
            container = found.obj["spec"]["containers"][0].get("name", "")
            labels = _pod_labels(meta["namespace"], meta["name"], container)
            load = "held" if load == "idle" else load
            held.setdefault((node, slot), []).append(Holding(start, end, labels, load))
    for spans in held.values():
        spans.sort(key=lambda h: h.start)
    return held


def _times(start: float, end: float, step: int) -> range:
    return range(math.ceil(start / step) * step, int(end), step)


def _walk(spans: list[Holding], times: range) -> Iterator[tuple[int, Holding | None]]:
    index = 0
    for t in times:
        while index < len(spans) and spans[index].end <= t:
            index += 1
        current = spans[index] if index < len(spans) and spans[index].start <= t else None
        yield t, current


# node, slot, labels, framebuffer MiB, is a MIG instance, GPU model
Gpu = tuple[str, int, str, int, bool, str]
FILE_METRICS = {
    "gpu_util.om": "DCGM_FI_DEV_GPU_UTIL",
    "fb_used.om": "DCGM_FI_DEV_FB_USED",
    "gpu_temp.om": "DCGM_FI_DEV_GPU_TEMP",
    "power_usage.om": "DCGM_FI_DEV_POWER_USAGE",
    "xid_errors.om": "DCGM_FI_DEV_XID_ERRORS",
    # A MIG instance's utilisation: DCGM reports no GPU_UTIL for it, only engine activity.
    "gr_engine_active.om": "DCGM_FI_PROF_GR_ENGINE_ACTIVE",
}
FILES = tuple(FILE_METRICS)
COMPLETE = "complete"  # written last: the files are whole


def _gpus(runner: WorkloadRunner, exporter: dcgm.Exporter, scrape: str) -> list[Gpu]:
    gpus = []
    nodes = runner.cluster.store.objects["nodes"]
    for name in sorted(nodes):
        node = nodes[name].obj
        labels = node["metadata"].get("labels") or {}
        layout = mig.layout_of(labels)
        memory = layout.memory_mib if layout else int(labels.get("nvidia.com/gpu.memory", "81920"))
        model = mig.parent_model(labels.get("nvidia.com/gpu.product", "NVIDIA-A100-SXM4-80GB"))
        driver = dcgm.driver_version(labels)
        for slot, device in enumerate(dcgm.node_devices(node)):
            head = exporter._identity(name, model.replace("-", " ", 1), device)
            head += f',DCGM_FI_DRIVER_VERSION="{driver}"' + scrape
            gpus.append((name, slot, head, memory, bool(device.profile), model))
    return gpus


@dataclass(frozen=True)
class Snapshot:
    """What the samples are computed from, taken at once under the store's lock: writing
    them may then take its time while the cluster goes on."""

    gpus: list[Gpu]
    held: dict[tuple[str, int], list[Holding]]
    xids: dict[tuple[str, int], list[tuple[float, int]]]
    times: range
    counters: frozenset[str]  # the fields the exporter collects (its counters file)


def snapshot(
    runner: WorkloadRunner,
    exporter: dcgm.Exporter,
    *,
    start: float,
    end: float,
    step: int,
    target_labels: dict[str, str],
) -> Snapshot:
    xids: dict[tuple[str, int], list[tuple[float, int]]] = {}
    for x in runner.xids:
        xids.setdefault((x.node, x.slot), []).append((x.at, x.xid))
    scrape = "".join(f',{k}="{_escape(v)}"' for k, v in sorted(target_labels.items()))
    return Snapshot(
        _gpus(runner, exporter, scrape),
        holdings(runner, start, end),
        xids,
        _times(start, end, step),
        frozenset(c.name for c in exporter.counters),
    )


def write_files(directory: Path, taken: Snapshot) -> dict[str, int]:
    """One OpenMetrics file a metric in `directory` (promtool can read them side by side),
    then `complete` (JSON: the samples written to each file, and the history's start and
    end in seconds); the samples written to each."""
    directory.mkdir(parents=True, exist_ok=True)
    writers = {
        "gpu_util.om": lambda out: _write_util(out, taken.gpus, taken.held, taken.times),
        "fb_used.om": lambda out: _write_fb(out, taken.gpus, taken.held, taken.times),
        "gpu_temp.om": lambda out: _write_by_util(out, TEMP, taken.gpus, taken.held, taken.times),
        "power_usage.om": lambda out: _write_by_util(
            out, POWER, taken.gpus, taken.held, taken.times
        ),
        "xid_errors.om": lambda out: _write_xids(out, taken.gpus, taken.xids, taken.times),
        "gr_engine_active.om": lambda out: _write_by_util(
            out, ENGINE_ACTIVE, taken.gpus, taken.held, taken.times
        ),
    }
    written = {}
    for name, write in writers.items():
        if FILE_METRICS[name] not in taken.counters:
            continue  # a field the exporter does not collect has no history either
        tmp = directory / f".{name}.tmp"
        with tmp.open("w") as out:
            count = write(out)
            out.write("# EOF\n")
        if not count:  # no device has it (engine activity without a MIG instance)
            tmp.unlink()
            continue
        written[name] = count
        tmp.replace(directory / name)
    times = taken.times
    summary = {"samples": written, "start": times.start, "end": times.stop}
    (directory / COMPLETE).write_text(json.dumps(summary))
    return written


def _write_util(
    out: IO[str], gpus: list[Gpu], held: dict[tuple[str, int], list[Holding]], times: range
) -> int:
    return _write_by_util(out, UTIL, gpus, held, times)


@dataclass(frozen=True)
class UtilGauge:
    """A gauge the exporter derives from a GPU's utilisation (kubesim.dcgm's sample)."""

    name: str
    help: str
    value: Callable[[str, float], float]  # (model, utilisation %) -> the gauge
    mig: bool = True  # reported for MIG instances too (DCGM has no utilisation for them)
    whole: bool = True  # written for whole GPUs (the history keeps what the portal reads)


UTIL = UtilGauge(
    "DCGM_FI_DEV_GPU_UTIL", "GPU utilization (in %).", lambda _m, u: round(u), mig=False
)
TEMP = UtilGauge(
    "DCGM_FI_DEV_GPU_TEMP", "GPU temperature (in C).", lambda _m, u: dcgm.temperature(u)
)
POWER = UtilGauge("DCGM_FI_DEV_POWER_USAGE", "Power draw (in W).", dcgm.power_draw)
# The live exporter reports it for every device; the history only for MIG instances, whose
# utilisation it is (a whole GPU's is GPU_UTIL): a month of it for every GPU would add a
# third to what Prometheus imports.
ENGINE_ACTIVE = UtilGauge(
    "DCGM_FI_PROF_GR_ENGINE_ACTIVE",
    "Ratio of time the graphics engine is active.",
    lambda _m, u: round(u / 100, 4),
    whole=False,
)


def _utilisation(
    gpu: Gpu, held: dict[tuple[str, int], list[Holding]], times: range
) -> Iterator[tuple[int, float, str]]:
    """(time, utilisation %, the holding pod's labels) a step, as the live exporter has it."""
    name, slot = gpu[0], gpu[1]
    phase = dcgm.gpu_phase(name, slot)
    for t, holding in _walk(held.get((name, slot), []), times):
        load, pod = (holding.load, holding.labels) if holding else ("idle", "")
        yield t, max(0.0, min(100.0, dcgm.utilisation(load, phase, t))), pod


def _write_by_util(
    out: IO[str],
    gauge: UtilGauge,
    gpus: list[Gpu],
    held: dict[tuple[str, int], list[Holding]],
    times: range,
) -> int:
    out.write(f"# HELP {gauge.name} {gauge.help}\n")
    out.write(f"# TYPE {gauge.name} gauge\n")
    written = 0
    for gpu in gpus:
        _name, _slot, head, _memory, is_mig, model = gpu
        if (is_mig and not gauge.mig) or (not is_mig and not gauge.whole):
            continue
        lines = [
            f"{gauge.name}{{{head}{pod}}} {gauge.value(model, util)} {t}\n"
            for t, util, pod in _utilisation(gpu, held, times)
        ]
        out.writelines(lines)
        written += len(lines)
    return written


def _write_fb(
    out: IO[str], gpus: list[Gpu], held: dict[tuple[str, int], list[Holding]], times: range
) -> int:
    out.write("# HELP DCGM_FI_DEV_FB_USED Framebuffer memory used (in MiB).\n")
    out.write("# TYPE DCGM_FI_DEV_FB_USED gauge\n")
    written = 0
    for name, slot, head, memory, _is_mig, _model in gpus:
        phase = dcgm.gpu_phase(name, slot)
        usable = memory - dcgm.reserved_mib(memory)
        lines = []
        for t, holding in _walk(held.get((name, slot), []), times):
            load, pod = (holding.load, holding.labels) if holding else ("idle", "")
            used = dcgm.fb_used(load, usable, phase)
            lines.append(f"DCGM_FI_DEV_FB_USED{{{head}{pod}}} {used} {t}\n")
        out.writelines(lines)
        written += len(lines)
    return written


def _write_xids(
    out: IO[str],
    gpus: list[Gpu],
    xids: dict[tuple[str, int], list[tuple[float, int]]],
    times: range,
) -> int:
    out.write("# HELP DCGM_FI_DEV_XID_ERRORS Value of the last XID error encountered.\n")
    out.write("# TYPE DCGM_FI_DEV_XID_ERRORS gauge\n")
    written = 0
    for name, slot, head, _memory, _is_mig, _model in gpus:
        faults = sorted(xids.get((name, slot), []))
        if not faults:
            continue
        # One series per code: each code's samples together, in time order.
        series: dict[int, list[int]] = {}
        index, code = 0, 0
        for t in times:
            while index < len(faults) and faults[index][0] <= t:
                code = faults[index][1]
                index += 1
            series.setdefault(code, []).append(t)
        for code, stamps in series.items():
            labels = f'{head},err_code="{code}",err_msg="{xid_message(code)}"'
            out.writelines(f"DCGM_FI_DEV_XID_ERRORS{{{labels}}} {code} {t}\n" for t in stamps)
            written += len(stamps)
    return written
