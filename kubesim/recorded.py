"""The portal's recording rules' per-node series, computed here from the exporter's samples, at
`/metrics/recorded`: what a Prometheus holding only the recorded series receives from each
cluster's own Prometheus (federation of `Hostname:.*`, or remote-write of the rules' output).

At 65,000 nodes no single Prometheus on one machine holds every GPU's raw series (8 GPUs and
25 counters a node: 13 million series); the recorded ones are 14 a node. A scale bench feeds
its Prometheus from this page, scraped with honor_labels as a federation job would be.

The figures follow deploy/prometheus/rules.yml at one instant (a test compares them with the
rules evaluated by a real Prometheus over this exporter's raw series):

- utilisation is a whole GPU's DCGM_FI_DEV_GPU_UTIL or a MIG instance's engine activity in
  percent: count, sum, average and maximum per node;
- framebuffer used, and used plus free, summed over what reports them; the hottest series;
- power, XIDs and hot GPUs count each GPU once, by its highest series;
- held but idle: the GPUs a pod holds whose utilisation is under 1 % (the rule asks it of the
  whole window; a simulated GPU's load does not change within one).
"""

from __future__ import annotations

import time
from collections import defaultdict
from typing import Any, Protocol

from kubesim.cluster import Cluster


class Series(Protocol):
    """The exporter's per-device samples (kubesim.dcgm.Exporter, which serves this page)."""

    cluster: Cluster

    def node_series(self, node: dict[str, Any], now: float) -> list[tuple[str, str, Any, bool]]: ...


UTIL = "DCGM_FI_DEV_GPU_UTIL"
ENGINE = "DCGM_FI_PROF_GR_ENGINE_ACTIVE"
HOT_CELSIUS = 85  # the rules file's threshold (its hot_celsius label)
IDLE_WINDOW = "1h"  # the rules file's window label
PER_GPU = ("DCGM_FI_DEV_POWER_USAGE", "DCGM_FI_DEV_XID_ERRORS", "DCGM_FI_DEV_GPU_TEMP")


def _node_figures(rows: list[tuple[str, str, dict[str, float], bool]]) -> dict[str, float]:
    utils = []
    fb_used = fb_total = 0.0
    temps: list[float] = []
    by_gpu: dict[str, dict[str, float]] = defaultdict(dict)
    held_idle = 0
    for head, tail, values, is_mig in rows:
        util = 100 * values[ENGINE] if is_mig else values[UTIL]
        utils.append(util)
        # A MIG instance reports its own framebuffer, and its GPU's temperature, power and
        # XIDs: each GPU counts once for those, by its highest series.
        fb_used += values["DCGM_FI_DEV_FB_USED"]
        fb_total += values["DCGM_FI_DEV_FB_USED"] + values["DCGM_FI_DEV_FB_FREE"]
        temps.append(values["DCGM_FI_DEV_GPU_TEMP"])
        figures = by_gpu[head.split('"', 2)[1]]  # the exporter's first label is gpu="N"
        for name in PER_GPU:
            figures[name] = max(figures.get(name, values[name]), values[name])
        if tail and util < 1:  # a pod holds it (its labels follow err_code), and it is idle
            held_idle += 1
    return {
        "Hostname:DCGM_FI_DEV_GPU_UTIL:count": len(utils),
        "Hostname:DCGM_FI_DEV_GPU_UTIL:sum": sum(utils),
        "Hostname:DCGM_FI_DEV_GPU_UTIL:avg": sum(utils) / len(utils),
        "Hostname:DCGM_FI_DEV_GPU_UTIL:max": max(utils),
        "Hostname:DCGM_FI_DEV_FB_USED:sum": fb_used,
        "Hostname:DCGM_FI_DEV_FB_TOTAL:sum": fb_total,
        "Hostname:DCGM_FI_DEV_GPU_TEMP:max": max(temps, default=0.0),
        "Hostname:DCGM_FI_DEV_POWER_USAGE:sum": sum(
            g["DCGM_FI_DEV_POWER_USAGE"] for g in by_gpu.values()
        ),
        "Hostname:DCGM_FI_DEV_XID_ERRORS:count_nonzero": sum(
            1 for g in by_gpu.values() if g["DCGM_FI_DEV_XID_ERRORS"] > 0
        ),
        "Hostname:DCGM_FI_DEV_GPU_TEMP:count_hot": sum(
            1 for g in by_gpu.values() if g["DCGM_FI_DEV_GPU_TEMP"] > HOT_CELSIUS
        ),
        "Hostname:DCGM_FI_DEV_GPU_UTIL:count_held_idle": held_idle,
    }


# The labels the rules put on a figure besides the node.
RULE_LABELS = {
    "Hostname:DCGM_FI_DEV_GPU_TEMP:count_hot": f',hot_celsius="{HOT_CELSIUS}"',
    "Hostname:DCGM_FI_DEV_GPU_UTIL:count_held_idle": f',window="{IDLE_WINDOW}"',
}


def render_recorded(exporter: Series) -> bytes:
    """Every node's recorded figures, and the rules' marker, in the exposition format."""
    now = time.time()
    cluster = exporter.cluster
    with cluster.store.lock:
        nodes = [e.obj for e in cluster.store.list("nodes", None)[1]]
        per_node = {
            node["metadata"]["name"]: [
                (head, tail, sample.values(), is_mig)
                for head, tail, sample, is_mig in exporter.node_series(node, now)
            ]
            for node in nodes
            if node["metadata"]["name"] not in cluster.exporter_disabled
        }
    lines: dict[str, list[str]] = defaultdict(list)
    for name, rows in per_node.items():
        if not rows:
            continue
        for record, value in _node_figures(rows).items():
            labels = f'Hostname="{name}"{RULE_LABELS.get(record, "")}'
            lines[record].append(f"{record}{{{labels}}} {float(value)!r}\n")
    out = ["# TYPE gpu_pool_portal:rules_loaded gauge\ngpu_pool_portal:rules_loaded 1\n"]
    for record, series in lines.items():
        out.append(f"# TYPE {record} gauge\n")
        out.extend(series)
    return "".join(out).encode()
