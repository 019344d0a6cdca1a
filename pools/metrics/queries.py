"""PromQL for the pages, batched over every node: a page costs a constant number of queries
whatever the number of nodes (pure: strings in, strings out)."""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

UTIL = "DCGM_FI_DEV_GPU_UTIL"
FB_USED = "DCGM_FI_DEV_FB_USED"
FB_FREE = "DCGM_FI_DEV_FB_FREE"
GPU_TEMP = "DCGM_FI_DEV_GPU_TEMP"
POWER = "DCGM_FI_DEV_POWER_USAGE"
SM_CLOCK = "DCGM_FI_DEV_SM_CLOCK"
XID = "DCGM_FI_DEV_XID_ERRORS"
PER_GPU_METRICS = (UTIL, FB_USED, FB_FREE, GPU_TEMP, POWER, SM_CLOCK, XID)
# Which pools.core.figures.GpuRow field each per-GPU metric fills.
GPU_ROW_FIELDS = {
    UTIL: "util",
    FB_USED: "fb_used",
    FB_FREE: "fb_free",
    GPU_TEMP: "temp",
    POWER: "power",
    SM_CLOCK: "sm_clock",
    XID: "xid",
}


@dataclass(frozen=True)
class MetricLabels:
    """Which Prometheus labels carry the node and the workload pod (deployment-specific)."""

    node: str = "Hostname"
    pod: str = "exported_pod"
    namespace: str = "exported_namespace"


def node_figure_queries(
    labels: MetricLabels, *, hot_celsius: float, idle_window: str
) -> dict[str, str]:
    by = f"by ({labels.node})"
    return {
        "gpus_reporting": f"count {by} ({UTIL})",
        "util": f"avg {by} ({UTIL})",
        "fb_used": f"sum {by} ({FB_USED})",
        "fb_total": f"sum {by} ({FB_USED} + {FB_FREE})",
        "temp_max": f"max {by} ({GPU_TEMP})",
        "power": f"sum {by} ({POWER})",
        "xid_gpus": f"count {by} ({XID} > 0)",
        "hot_gpus": f"count {by} ({GPU_TEMP} > {hot_celsius:g})",
        # A pod holds the GPU, yet it did nothing for the whole window.
        "idle_held_gpus": (
            f'count {by} (max_over_time({UTIL}{{{labels.pod}!=""}}[{idle_window}]) < 1)'
        ),
    }


def _regex_escape(name: str) -> str:
    return re.sub(r"([.\\+*?\[\]^$(){}=!<>|:-])", r"\\\1", name)


def node_matcher(labels: MetricLabels, names: Iterable[str]) -> str:
    """A label matcher for a set of nodes (one regex: the query stays one query)."""
    alternatives = "|".join(_regex_escape(n) for n in sorted(names))
    # PromQL strings need their backslashes doubled.
    return f'{labels.node}=~"{alternatives.replace(chr(92), chr(92) * 2)}"'


def per_gpu_query(labels: MetricLabels, node: str) -> str:
    names = "|".join(PER_GPU_METRICS)
    return f'{{__name__=~"{names}", {labels.node}="{node}"}}'


def utilisation_history_query(labels: MetricLabels, nodes: Iterable[str]) -> str:
    return f"avg({UTIL}{{{node_matcher(labels, nodes)}}})"


def node_history_queries(labels: MetricLabels, node: str) -> dict[str, str]:
    selector = f'{{{labels.node}="{node}"}}'
    return {
        "util": f"avg({UTIL}{selector})",
        "fb_used": f"sum({FB_USED}{selector}) / 1024",  # GiB
    }
