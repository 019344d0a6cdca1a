"""PromQL for the pages, batched over every node: a page costs a constant number of queries
whatever the number of nodes (pure: strings in, strings out)."""

from __future__ import annotations

import functools
import re
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass

UTIL = "DCGM_FI_DEV_GPU_UTIL"
# A MIG instance reports no DCGM_FI_DEV_GPU_UTIL: its utilisation is the fraction of time
# its graphics engine was active (0 to 1), a profiling counter dcgm-exporter reports per
# instance with GPU_I_ID and GPU_I_PROFILE. Wherever the portal reads utilisation it reads
# either, so a MIG node counts as its instances in percent.
ENGINE_ACTIVE = "DCGM_FI_PROF_GR_ENGINE_ACTIVE"
INSTANCE_LABEL = "GPU_I_ID"
ON_INSTANCES = f'{INSTANCE_LABEL}!=""'
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
    ENGINE_ACTIVE: "engine_active",  # pools.core.figures.ENGINE_FIELD
}


# dcgm-exporter names the node `Hostname`; newer releases renamed the label `hostname`.
# Either spelling finds the node without configuration (DCGM_NODE_LABEL still overrides).
_HOSTNAME_SPELLINGS = {"Hostname": "hostname", "hostname": "Hostname"}


@dataclass(frozen=True)
class MetricLabels:
    """Which Prometheus labels carry the node and the workload pod (deployment-specific)."""

    node: str = "Hostname"
    pod: str = "exported_pod"
    namespace: str = "exported_namespace"

    @property
    def node_alias(self) -> str | None:
        """The other spelling of the exporter's node label, also looked for."""
        return _HOSTNAME_SPELLINGS.get(self.node)


def _keyed_by_node(labels: MetricLabels, expr: str) -> str:
    """`expr` with the node in `labels.node`, whichever spelling the exporter used."""
    alias = labels.node_alias
    if alias is None:
        return expr
    return f'label_replace({expr}, "{labels.node}", "$1", "{alias}", "(.+)")'


def _on_nodes(labels: MetricLabels, metric: str, matcher: str) -> str:
    """`metric` restricted to nodes by `matcher` (a matcher on the node label), whichever
    spelling the exporter used: one selector, or two joined by `or`. Utilisation (UTIL)
    includes the MIG instances' (util_of)."""
    alias = labels.node_alias
    matchers = [matcher]
    if alias is not None:
        matchers.append(f"{alias}{matcher.removeprefix(labels.node)}")
    if metric == UTIL:
        parts = [f"{UTIL}{{{m}}}" for m in matchers]
        parts += [f"100 * {ENGINE_ACTIVE}{{{m}, {ON_INSTANCES}}}" for m in matchers]
        return f"({' or '.join(parts)})"
    selectors = [f"{metric}{{{m}}}" for m in matchers]
    return selectors[0] if len(selectors) == 1 else f"({' or '.join(selectors)})"


def util_of(selector: str = "") -> str:
    """Utilisation in percent of every device: each whole GPU's DCGM_FI_DEV_GPU_UTIL and each
    MIG instance's engine activity, `selector` (label matchers, without braces) on both.
    The instances carry GPU_I_ID, the whole GPUs do not: `or` keeps both."""
    instances = f"{selector}, {ON_INSTANCES}" if selector else ON_INSTANCES
    whole = f"{UTIL}{{{selector}}}" if selector else UTIL
    return f"({whole} or 100 * {ENGINE_ACTIVE}{{{instances}}})"


def node_figure_queries(
    labels: MetricLabels, *, hot_celsius: float, idle_window: str
) -> dict[str, str]:
    def per_node(aggregation: str, expr: str) -> str:
        return f"{aggregation} by ({labels.node}) ({_keyed_by_node(labels, expr)})"

    def per_gpu(aggregation: str, of_gpu: str, metric: str, test: str = "") -> str:
        by_gpu = f"{of_gpu} by ({labels.node}, {GPU_LABEL}) ({_keyed_by_node(labels, metric)})"
        return f"{aggregation} by ({labels.node}) ({by_gpu}{test})"

    return {
        "gpus_reporting": per_node("count", util_of()),
        "util": per_node("avg", util_of()),
        "fb_used": per_node("sum", FB_USED),
        "fb_total": per_node("sum", f"{FB_USED} + {FB_FREE}"),
        "temp_max": per_node("max", GPU_TEMP),
        # Power, XIDs and temperature belong to the GPU: a MIG instance may report its GPU's,
        # so each GPU counts once (its highest value), however many instances report it.
        "power": per_gpu("sum", "max", POWER),
        "xid_gpus": per_gpu("count", "max", XID, " > 0"),
        "hot_gpus": per_gpu("count", "max", GPU_TEMP, f" > {hot_celsius:g}"),
        # A pod holds the GPU, yet it did nothing for the whole window.
        "idle_held_gpus": per_node(
            "count",
            f'(max_over_time({UTIL}{{{labels.pod}!=""}}[{idle_window}]) or 100 * '
            f'max_over_time({ENGINE_ACTIVE}{{{labels.pod}!="", {ON_INSTANCES}}}[{idle_window}]))'
            " < 1",
        ),
    }


# The recording rules' own terms (deploy/prometheus/rules.yml): the node label they group
# by, the pod label their "held" means, and the series present whenever they are loaded.
RULES_NODE_LABEL = "Hostname"
RULES_POD_LABEL = "exported_pod"
RULES_LOADED = "gpu_pool_portal:rules_loaded"
RECORDED = {
    "gpus_reporting": "Hostname:DCGM_FI_DEV_GPU_UTIL:count",
    "util": "Hostname:DCGM_FI_DEV_GPU_UTIL:avg",
    "fb_used": "Hostname:DCGM_FI_DEV_FB_USED:sum",
    "fb_total": "Hostname:DCGM_FI_DEV_FB_TOTAL:sum",
    "temp_max": "Hostname:DCGM_FI_DEV_GPU_TEMP:max",
    "power": "Hostname:DCGM_FI_DEV_POWER_USAGE:sum",
    "xid_gpus": "Hostname:DCGM_FI_DEV_XID_ERRORS:count_nonzero",
    "hot_gpus": "Hostname:DCGM_FI_DEV_GPU_TEMP:count_hot",
    "idle_held_gpus": "Hostname:DCGM_FI_DEV_GPU_UTIL:count_held_idle",
}


UTIL_MAX_RECORDED = "Hostname:DCGM_FI_DEV_GPU_UTIL:max"


def recorded_figure_queries(
    labels: MetricLabels, *, hot_celsius: float, idle_window: str
) -> dict[str, str]:
    """The recorded series standing for node_figure_queries' figures, where the rules'
    terms are this deployment's (none when the node label differs). A threshold baked into
    a rule is selected by its label: a portal configured otherwise finds no series there
    and reads the raw expression (missing_recorded)."""
    if labels.node != RULES_NODE_LABEL:
        return {}
    recorded = dict(RECORDED)
    # The node's GPUs, or the marker alone when the rules are loaded and no GPU reports.
    recorded["gpus_reporting"] = f"{RECORDED['gpus_reporting']} or on () {RULES_LOADED}"
    recorded["hot_gpus"] = f'{RECORDED["hot_gpus"]}{{hot_celsius="{hot_celsius:g}"}}'
    recorded["idle_held_gpus"] = f'{RECORDED["idle_held_gpus"]}{{window="{idle_window}"}}'
    if labels.pod != RULES_POD_LABEL:
        del recorded["idle_held_gpus"]
    # Each answer with the node label alone: the series' name and the rules' own labels
    # would be a third of the bytes decoded at 15,000 nodes.
    return {name: _per_node(name, q) for name, q in recorded.items()}


# Counts the rules record for every node, zero on nearly all of them (GPUs with an XID,
# hot, or held but idle): only the nodes above zero are sent, as the raw expressions send
# them; a node absent from the answer counts zero. When no node is above zero the answer
# is the count of the recorded series, without a node label, so that "none above zero"
# is not mistaken for "no recorded series" (missing_recorded).
SPARSE_COUNTS = frozenset({"xid_gpus", "hot_gpus", "idle_held_gpus"})


def _per_node(name: str, recorded: str) -> str:
    per_node = f"max by ({RULES_NODE_LABEL}) ({recorded})"
    if name in SPARSE_COUNTS:
        return f"{per_node} > 0 or on () count({recorded})"
    return per_node


def missing_recorded(
    asked_recorded: Iterable[str], values: Mapping[str, Sequence[tuple[str | None, float]]]
) -> set[str]:
    """Which of the figures asked as recorded series must be asked raw, from each figure's
    (node, value) pairs: all of them when the rules are not loaded (gpus_reporting, with
    its marker, came back empty); otherwise those that came back empty while GPUs report
    (the counts are zero-filled per node)."""
    asked = set(asked_recorded)
    gpus = values.get("gpus_reporting", [])
    if "gpus_reporting" in asked and not gpus:
        return asked
    if not any(node for node, _ in gpus):
        return set()  # no GPU reports: every figure is rightly empty
    return {name for name in asked if not values.get(name)}


@functools.lru_cache(maxsize=65536)
def _regex_escape(name: str) -> str:
    return re.sub(r"([.\\+*?\[\]^$(){}=!<>|:-])", r"\\\1", name)


def node_matcher(labels: MetricLabels, names: Iterable[str]) -> str:
    """A label matcher for a set of nodes (one regex: the query stays one query)."""
    alternatives = "|".join(_regex_escape(n) for n in sorted(names))
    # PromQL strings need their backslashes doubled.
    return f'{labels.node}=~"{alternatives.replace(chr(92), chr(92) * 2)}"'


def per_gpu_query(labels: MetricLabels, node: str) -> str:
    names = "|".join((*PER_GPU_METRICS, ENGINE_ACTIVE))
    return _on_nodes(labels, "", f'{labels.node}="{node}", __name__=~"{names}"')


RECORDED_UTIL_SUM = "Hostname:DCGM_FI_DEV_GPU_UTIL:sum"


def utilisation_history_query(
    labels: MetricLabels, members: Members, *, recorded: bool = False
) -> str:
    """Average GPU utilisation over the members, each while it was one; from the per-node
    recorded sums and counts when `recorded` (one series a node, not one a GPU: the same
    GPU-weighted average)."""
    if recorded and labels.node == RULES_NODE_LABEL:
        total = _members_selector(labels, RECORDED_UTIL_SUM, members, recorded=True)
        count = _members_selector(labels, RECORDED["gpus_reporting"], members, recorded=True)
        return f"sum({total}) / sum({count})"
    return f"avg({_members_selector(labels, UTIL, members)})"


# DCGM's label for the GPU's index on its node.
GPU_LABEL = "gpu"
DEVICE = "device"  # series keyed by device_name: a GPU, or a MIG instance of it


def device_name(labels: Mapping[str, str]) -> str:
    """ "3" for GPU 3, "3 instance 7" for its MIG instance 7 (the charts say "GPU …")."""
    gpu = str(labels.get(GPU_LABEL, ""))
    instance = labels.get(INSTANCE_LABEL)
    return f"{gpu} instance {instance}" if instance else gpu


def node_history_queries(labels: MetricLabels, node: str) -> dict[str, str]:
    """One line per GPU of the node (by GPU_LABEL), as the DCGM dashboard draws them."""
    matcher = f'{labels.node}="{node}"'
    per_gpu = {
        "util": UTIL,
        "fb_used": FB_USED,
        "temp": GPU_TEMP,
        "power": POWER,
        "xid": XID,
    }
    # A MIG instance is a line of its own (GPU_I_ID); a whole GPU has no such label.
    queries = {
        name: f"max by ({GPU_LABEL}, {INSTANCE_LABEL}) ({_on_nodes(labels, metric, matcher)})"
        for name, metric in per_gpu.items()
    }
    queries["fb_used"] += " / 1024"  # GiB
    return queries


# --- the pool insights: one query per figure for every pool at once ---

DRIVER_LABEL = "DCGM_FI_DRIVER_VERSION"
POOL_TAG = "portal_pool"


def _tagged(expr: str, pool: str) -> str:
    """`expr` with a label naming the pool it was computed over, so the pools' aggregations
    joined by `or` stay one query and come back apart."""
    return f'label_replace({expr}, "{POOL_TAG}", "{pool}", "", "")'


# A pool's members over a window: each node with the spans it was in the pool (epoch
# seconds; None where a span reaches past the window's edge). See pools.core.membership.
Members = Mapping[str, Sequence[tuple[float | None, float | None]]]


def _during(spans: Sequence[tuple[float | None, float | None]]) -> str:
    """A vector with one sample at each step inside the spans (none outside): `and on ()`
    with it keeps a series only at those steps, evaluated by Prometheus itself."""
    parts = []
    for since, until in spans:
        bounds = (f" >= {since:.3f}" if since is not None else "") + (
            f" < {until:.3f}" if until is not None else ""
        )
        parts.append(f"vector(time()){bounds}")
    return " or ".join(parts)


def _members_selector(
    labels: MetricLabels, metric: str, members: Members, *, recorded: bool = False
) -> str:
    """`metric` on the pool's members, each only while it was a member: nodes in the pool
    the whole window in one matcher, the others grouped by their spans (a loan moves a few
    nodes at once) with the steps they belonged. One expression: the query count stays
    constant however many nodes moved. A recorded series has the rules' node label only."""

    def on(nodes: list[str]) -> str:
        matcher = node_matcher(labels, nodes)
        return f"{metric}{{{matcher}}}" if recorded else _on_nodes(labels, metric, matcher)

    along: list[str] = []
    by_spans: dict[tuple[tuple[float | None, float | None], ...], list[str]] = {}
    for node, spans in members.items():
        if all(s == (None, None) for s in spans):
            along.append(node)
        else:
            by_spans.setdefault(tuple(spans), []).append(node)
    along.sort()
    parts = []
    if along:
        parts.append(on(along))
    for spans, nodes in sorted(by_spans.items(), key=lambda kv: sorted(kv[1])):
        parts.append(f"({on(nodes)} and on () ({_during(spans)}))")
    return parts[0] if len(parts) == 1 else "(" + " or ".join(parts) + ")"


def _may_idle(members: Members, never_idle: Collection[str]) -> Members:
    return {node: spans for node, spans in members.items() if node not in never_idle}


def pool_utilisation_queries(
    labels: MetricLabels, pools: Mapping[str, Members], never_idle: Collection[str] = ()
) -> dict[str, str]:
    """Per pool, a step at a time: its average utilisation, and how many of its nodes had
    every GPU idle (below 1 %), over the nodes that were its members at that step. Pools
    without members are left out. A node in `never_idle` (NotReady: down, not idle) is not
    counted among the idle ones, though its GPUs still weigh in the average."""
    average, idle = [], []
    for pool, members in sorted(pools.items()):
        if not members:
            continue
        selected = _members_selector(labels, UTIL, members)
        average.append(_tagged(f"avg({selected})", pool))
        if may_idle := _may_idle(members, never_idle):
            candidates = _members_selector(labels, UTIL, may_idle)
            per_node = f"max by ({labels.node}) ({_keyed_by_node(labels, candidates)})"
            idle.append(_tagged(f"count({per_node} < 1)", pool))
    return {"average": " or ".join(average), "idle_nodes": " or ".join(idle) or "vector(0) < 0"}


def recorded_pool_utilisation_queries(
    pools: Mapping[str, Members], never_idle: Collection[str] = ()
) -> dict[str, str]:
    """pool_utilisation_queries from the recording rules' per-node series: the average
    weighted by each node's GPUs, and nodes whose busiest GPU is idle."""
    rules = MetricLabels(node=RULES_NODE_LABEL)
    average, idle = [], []
    for pool, members in sorted(pools.items()):
        if not members:
            continue
        util = _members_selector(rules, RECORDED["util"], members, recorded=True)
        count = _members_selector(rules, RECORDED["gpus_reporting"], members, recorded=True)
        average.append(_tagged(f"sum({util} * {count}) / sum({count})", pool))
        if may_idle := _may_idle(members, never_idle):
            most = _members_selector(rules, UTIL_MAX_RECORDED, may_idle, recorded=True)
            idle.append(_tagged(f"count({most} < 1)", pool))
    return {"average": " or ".join(average), "idle_nodes": " or ".join(idle) or "vector(0) < 0"}


def xid_query(labels: MetricLabels) -> str:
    """Each GPU's last XID error, one series a code, at the steps when it is not zero (only
    those come back). The exporter keeps a GPU's last XID until it restarts: a new error is
    a series that appears or changes. Per GPU, from the raw series: a per-node count (the
    recording rule's) misses a second error on a GPU that already had one."""
    return f"max by ({labels.node}, gpu, err_code) ({_keyed_by_node(labels, XID)}) > 0"


# Every counter the pages draw, by the name the readiness check gives it.
COUNTER_KINDS = {
    UTIL: "utilisation",
    ENGINE_ACTIVE: "utilisation",  # a MIG instance's (coverage_query asks it of them only)
    FB_USED: "framebuffer",
    GPU_TEMP: "temperature",
    POWER: "power",
    XID: "XID errors",
}


def coverage_query(labels: MetricLabels) -> str:
    """Each node's GPUs reporting each counter the pages draw: one query for every node
    and counter (an XID counter at 0 is a series too, unlike the figures' count of GPUs
    with an error), the counter in COUNTER_LABEL. A MIG instance's utilisation is its engine
    activity (counted as COUNTER_KINDS says), counted apart: joined to the instance's other
    series by `or`, it would be dropped as theirs, since `or` matches series without their
    names."""
    names = "|".join(name for name in COUNTER_KINDS if name != ENGINE_ACTIVE)

    def counted(selector: str) -> str:
        named = f'label_replace({selector}, "{COUNTER_LABEL}", "$1", "__name__", "(.+)")'
        return f"count by ({labels.node}, {COUNTER_LABEL}) ({_keyed_by_node(labels, named)})"

    whole = counted('{__name__=~"' + names + '"}')
    return f"{whole} or {counted(f'{ENGINE_ACTIVE}{{{ON_INSTANCES}}}')}"


COUNTER_LABEL = "counter"


def driver_query(labels: MetricLabels) -> str:
    """Each node's driver version, as the exporter labels its series."""
    return f"count by ({labels.node}, {DRIVER_LABEL}) ({_keyed_by_node(labels, util_of())})"


def framebuffer_peaks_query(labels: MetricLabels, days: int) -> str:
    """Each workload pod's peak framebuffer use (MiB) over the last `days`."""
    return (
        f"max by ({labels.namespace}, {labels.pod}) "
        f'(max_over_time({FB_USED}{{{labels.pod}!=""}}[{days}d]))'
    )


# --- reclaiming idle GPUs (pools.core.reclaim): per pod, not per node

# A subquery's steps sit on whole multiples of the step: one minute, so a pod idle for a
# few minutes already counts (at fleet scale this wants a recording rule; not yet).
IDLE_STEP_MINUTES = 1


def _utilisation(pod_label: str, window: str) -> tuple[str, str]:
    """The busiest value over `window`, per GPU series of a pod: whole GPUs and instances."""
    whole = f'max_over_time({UTIL}{{{pod_label}!=""}}[{window}])'
    instances = f'100 * max_over_time({ENGINE_ACTIVE}{{{pod_label}!="", {ON_INSTANCES}}}[{window}])'
    return whole, instances


def idle_pods_query(pod_label: str, namespace_label: str, hours: int, below: float) -> str:
    """Pods whose every GPU stayed under `below` % for `hours`: one series per pod."""
    whole, instances = _utilisation(pod_label, f"{hours}h")
    by = f"{namespace_label}, {pod_label}"
    return f"max by ({by}) ({whole} or {instances}) < {below:g}"


def idle_hours_query(pod_label: str, namespace_label: str, days: int, below: float) -> str:
    """Per pod, the hours of the last `days` its busiest GPU was under `below` %."""
    by = f"{namespace_label}, {pod_label}"
    now = f'({UTIL}{{{pod_label}!=""}} or 100 * {ENGINE_ACTIVE}{{{pod_label}!="", {ON_INSTANCES}}})'
    under = f"(max by ({by}) ({now}) < bool {below:g})"
    step = f"{IDLE_STEP_MINUTES}m"
    return f"sum_over_time({under}[{days}d:{step}]) * {IDLE_STEP_MINUTES / 60:g}"


def pods_reporting_query(pod_label: str, namespace_label: str, pods: list[str]) -> str:
    """Which of `pods` (by name) have GPU series in the last five minutes, whatever their
    value: a pod without any tells nothing about its work (its exporter down, its labels
    lost). Bounded by the names asked, never every pod of a fleet."""
    # Pod names hold [a-z0-9.-]: only the dot means something to the regular expression,
    # escaped once for RE2 and once for the PromQL string around it.
    names = "|".join(p.replace(".", "\\\\.") for p in sorted(set(pods)))
    selector = f'{pod_label}=~"{names}"'
    whole = f"max_over_time({UTIL}{{{selector}}}[5m])"
    instances = f"max_over_time({ENGINE_ACTIVE}{{{selector}, {ON_INSTANCES}}}[5m])"
    return f"count by ({namespace_label}, {pod_label}) ({whole} or {instances})"
