"""What a move does besides relabelling: the pods on its nodes, the pending queue, and the
gang capacity of every pool it touches (a selector: it reads, it writes nothing).

The cluster after the move is the inventory's cluster with each moved node given the labels
and taints the plan computed for it; with drain-first its GPU pods are gone, and with a
destination taint of effect NoExecute so are the pods that do not tolerate it. Pending pods
are then placed, oldest first, on the moved nodes by the fit core, each taking its room
before the next is tried (the scheduler binds one pod at a time).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field, replace

from pools.core.devices import WHOLE
from pools.core.figures import UnitFigures, unit_figures
from pools.core.fit.check import evaluate_pod
from pools.core.fit.cluster import ClusterSnapshot, FitNode, NodePod, PoolCapacity
from pools.core.fit.pods import PodShape
from pools.core.fit.scheduling import untolerated_taint
from pools.core.fit.workloads import pod_shape
from pools.core.insights.queueing import GANG_OWNERS  # pods that start and stop together
from pools.core.insights.records import InsightNode
from pools.core.insights.replacement import node_traits
from pools.core.taints import NO_EXECUTE, Taint
from pools.core.wording import counted
from pools.fit.cluster import OTHER_PODS, FitCluster, fit_cluster, gpu_node_pod
from pools.fit.pending import wants_pool
from pools.fit.service import pod_manifest
from pools.fleet.selectors import pools_node_rows
from pools.models import GpuPod, MoveRequest, Node
from pools.moves.plan import MovePlan, PlannedNode

EVICTED = "evicted"
LEFT = "left running"


@dataclass(frozen=True)
class PodFate:
    pod: str  # namespace/name
    gpus: int  # whole GPUs
    fate: str  # EVICTED or LEFT
    why: str = ""
    asks: str = ""  # every GPU unit it holds, as the pages say it: "1 MIG 1g.10gb"


@dataclass(frozen=True)
class PoolChange:
    pool: str
    role: str  # "source" or "destination"
    before: PoolCapacity
    after: PoolCapacity


@dataclass(frozen=True)
class UnitChange:
    """One kind of unit other than whole GPUs (MIG instances of a profile, shared GPUs, DRA
    devices) in a pool the move changes, before and after it."""

    pool: str
    role: str  # "source" or "destination"
    before: UnitFigures
    after: UnitFigures

    @property
    def kind(self) -> str:
        return self.before.label or self.after.label

    def as_dict(self) -> dict[str, object]:
        return {
            "pool": self.pool,
            "role": self.role,
            "kind": self.kind,
            "before": self.before.as_dict(),
            "after": self.after.as_dict(),
        }


@dataclass(frozen=True)
class MoveImpact:
    pods: dict[str, list[PodFate]]  # per moved node
    would_start: list[str]  # Pending pods (namespace/name) the move lets start in the destination
    pools: list[PoolChange]
    warnings: list[str] = field(default_factory=list)
    units: list[UnitChange] = field(default_factory=list)

    def as_dict(self) -> dict[str, object]:
        return {
            "pods": {
                node: [
                    {"pod": f.pod, "gpus": f.gpus, "asks": f.asks, "fate": f.fate, "why": f.why}
                    for f in fates
                ]
                for node, fates in self.pods.items()
            },
            "would_start": self.would_start,
            "pools": [
                {
                    "pool": c.pool,
                    "role": c.role,
                    "before": c.before.as_dict(),
                    "after": c.after.as_dict(),
                }
                for c in self.pools
            ],
            "warnings": self.warnings,
            "units": [u.as_dict() for u in self.units],
        }


def move_impact(plan: MovePlan, *, drain_policy: str) -> MoveImpact:
    cluster = fit_cluster()
    names = [p.node.name for p in plan.nodes]
    pods_on = defaultdict(list)
    for pod in GpuPod.objects.live().filter(node_name__in=names).order_by("namespace", "name"):
        pods_on[pod.node_name].append(pod)
    fates = {p.node.name: _fates(p, pods_on[p.node.name], drain_policy) for p in plan.nodes}
    after = cluster.snapshot.with_nodes(
        [
            _after(cluster, p, plan.destination.name, fates[p.node.name], pods_on[p.node.name])
            for p in plan.nodes
        ]
    )
    pending = list(GpuPod.objects.pending().order_by("created_at", "namespace", "name"))
    started = _would_start(cluster, after, names, pending)
    sources = sorted({p.node.pool_label for p in plan.nodes} - {plan.destination.name})
    changes = [
        PoolChange(name, role, cluster.snapshot.pool_capacity(name), after.pool_capacity(name))
        for name, role in [
            *((s, "source") for s in sources if s),
            (plan.destination.name, "destination"),
        ]
    ]
    warnings = _queue_warning(cluster, plan.destination.name, pending, started)
    warnings += _gang_warnings(after, sources, fates)
    warnings += _mix_warnings(plan)
    warnings += _layout_warnings(plan)
    roles = [*((s, "source") for s in sources if s), (plan.destination.name, "destination")]
    return MoveImpact(fates, started, changes, warnings, _unit_changes(plan, roles))


def _unit_changes(plan: MovePlan, roles: Sequence[tuple[str, str]]) -> list[UnitChange]:
    """What the move changes of each kind of unit in its source and destination pools: the
    moved nodes' units leave their pool for the destination (one query, only when a moved
    node has units of another kind than whole GPUs: else nothing of them changes)."""
    if not any(u.kind.kind != WHOLE for p in plan.nodes for u in p.node.device_set().units):
        return []
    moved = {p.node.name for p in plan.nodes}
    rows = pools_node_rows([pool for pool, _ in roles], names=moved)
    changes = []
    for pool, role in roles:
        before = [r for r in rows if r.pool == pool]
        if role == "destination":
            after = [*before, *(r for r in rows if r.name in moved and r.pool != pool)]
        else:
            after = [r for r in before if r.name not in moved]
        was = {u.label: u for u in unit_figures(before)}
        now = {u.label: u for u in unit_figures(after)}
        for label in sorted(was.keys() | now.keys()):
            empty = UnitFigures(label)
            changes.append(UnitChange(pool, role, was.get(label, empty), now.get(label, empty)))
    return [c for c in changes if c.before != c.after]


NAMED_PODS = 5  # pods a layout warning names before it counts the rest


def _layout_warnings(plan: MovePlan) -> list[str]:
    """Moved nodes that offer their GPUs as MIG instances or shared replicas, into a pool
    whose workloads run on whole GPUs: a pod asking for nvidia.com/gpu gets a slice of a
    GPU there (MIG single strategy, sharing) or does not land at all (mixed strategy). The
    pods named are the destination's live GPU pods on its nodes of whole GPUs."""
    split = {}
    for p in plan.nodes:
        kinds = sorted({u.kind.label for u in p.node.device_set().units if u.kind.kind != WHOLE})
        if kinds:
            split[p.node.name] = kinds
    if not split:
        return []
    whole_nodes = (
        Node.objects.present()
        .filter(pool=plan.destination, devices={}, gpu_allocatable__gt=0)
        .exclude(name__in=split)
        .values_list("name", flat=True)
    )
    pods = [
        f"{ns}/{name}"
        for ns, name in GpuPod.objects.live()
        .filter(node_name__in=whole_nodes, gpus__gt=0)
        .order_by("namespace", "name")
        .values_list("namespace", "name")
    ]
    if not pods:
        return []
    named = ", ".join(pods[:NAMED_PODS])
    more = f" and {len(pods) - NAMED_PODS} more" if len(pods) > NAMED_PODS else ""
    offered = "; ".join(f"{node}: {', '.join(kinds)}" for node, kinds in sorted(split.items()))
    return [
        f"{plan.destination.name}'s workloads run on whole GPUs ({named}{more}), and the moved "
        f"nodes offer slices or shares instead ({offered}). A pod asking for nvidia.com/gpu "
        "gets a MIG instance or a shared GPU there, or does not land at all; state the "
        "layouts the pool accepts (accepted GPU layouts) to refuse such nodes."
    ]


# What a node's GPU and driver are read from: GPU Feature Discovery's labels (the same
# traits the replacement difficulty compares), so the warning needs no Prometheus.
MIXED_TRAITS = {"gpu_model": "GPU model", "driver": "driver version"}


def _mix_warnings(plan: MovePlan) -> list[str]:
    """The moved nodes bring a GPU model or a driver the destination's nodes do not have:
    a job asking for any GPU may land on either, a job pinned to one model finds fewer
    nodes, and capacity lent between pools only helps where node specs match. Said whatever
    the destination accepts (a pool that lists accepted models refuses others outright)."""
    moved = {p.node.name for p in plan.nodes}
    staying = (
        Node.objects.present()
        .filter(pool=plan.destination)
        .exclude(name__in=moved)
        .only("name", "gpu_model", "labels")
    )
    there = [_traits(n) for n in staying]
    if not there:
        return []  # an empty pool takes whatever comes first
    warnings = []
    for trait, title in MIXED_TRAITS.items():
        have = {t[trait] for t in there if t[trait]}
        bringing: dict[str, list[str]] = defaultdict(list)
        for p in plan.nodes:
            value = _traits(p.node)[trait]
            if value and have and value not in have:
                bringing[value].append(p.node.name)
        for value, names in sorted(bringing.items()):
            warnings.append(
                f"{plan.destination.name} would mix {title}s: {', '.join(names)} "
                f"{'brings' if len(names) == 1 else 'bring'} {value}, its nodes have "
                f"{', '.join(sorted(have))}. Jobs asking for any GPU land on either, and "
                "capacity moves between pools only help where node specs match."
            )
    return warnings


def _traits(node: Node) -> dict[str, str]:
    return node_traits(InsightNode(node.name, None, 0, node.gpu_model, node.labels or {}))


def _fates(planned: PlannedNode, pods: Sequence[GpuPod], drain_policy: str) -> list[PodFate]:
    no_execute = [
        Taint(t.key, t.value, t.effect) for t in planned.desired.taints if t.effect == NO_EXECUTE
    ]
    result = []
    for pod in pods:
        name = f"{pod.namespace}/{pod.name}"
        if drain_policy == MoveRequest.DrainPolicy.DRAIN_FIRST and pod.units:
            why = "drain-first evicts GPU pods"
            result.append(PodFate(name, pod.gpus, EVICTED, why, pod.asks))
            continue
        taint = untolerated_taint(no_execute, pod_shape(pod_manifest(pod)).tolerations)
        if taint is not None:
            why = f"does not tolerate the taint {taint}"
            result.append(PodFate(name, pod.gpus, EVICTED, why, pod.asks))
        else:
            result.append(PodFate(name, pod.gpus, LEFT, asks=pod.asks))
    return result


def _after(
    cluster: FitCluster,
    planned: PlannedNode,
    destination: str,
    fates: list[PodFate],
    pods: Sequence[GpuPod],
) -> FitNode:
    """The node in the destination: its new labels and taints, its GPU pods one by one less
    those evicted, and what its other pods hold."""
    node = cluster.snapshot.nodes[cluster.snapshot.index[planned.node.name]]
    evicted = {f.pod for f in fates if f.fate == EVICTED}
    return replace(
        node,
        pool=destination,
        labels=dict(planned.desired.labels),
        taints=tuple(Taint(t.key, t.value, t.effect) for t in planned.desired.taints),
        pods=(
            *(p for p in node.pods if p.name == OTHER_PODS),
            *(gpu_node_pod(p) for p in pods if str(p) not in evicted),
        ),
    )


def _would_start(
    cluster: FitCluster, after: ClusterSnapshot, moved: Sequence[str], pending: Sequence[GpuPod]
) -> list[str]:
    """Pending pods that fit nowhere now and fit on a moved node after, placed one by one."""
    nodes = {name: after.nodes[after.index[name]] for name in moved}
    started: list[str] = []
    before: dict[PodShape, bool] = {}
    for pod in pending:
        shape = pod_shape(pod_manifest(pod))
        if shape not in before:
            before[shape] = evaluate_pod(
                shape, cluster.snapshot, priority_classes=cluster.priority_classes
            ).fits
        if before[shape]:
            continue  # it has room now: the move is not what it waits for
        small = ClusterSnapshot(list(nodes.values()), list(after.pools.values()))
        verdict = evaluate_pod(shape, small, priority_classes=cluster.priority_classes)
        if verdict.nodes_fit:
            target = nodes[verdict.nodes_fit[0]]
            taken = NodePod(shape.requests, 0, f"{pod.namespace}/{pod.name}")
            nodes[target.name] = replace(target, pods=(*target.pods, taken))
            started.append(f"{pod.namespace}/{pod.name}")
    return started


def _queue_warning(
    cluster: FitCluster, destination: str, pending: Sequence[GpuPod], started: Sequence[str]
) -> list[str]:
    waiting = [p for p in pending if wants_pool(p, destination, cluster.pool_key)]
    if waiting and not any(f"{p.namespace}/{p.name}" in started for p in waiting):
        return [
            f"{destination}'s pending queue would not shrink: none of its "
            f"{counted(len(waiting), 'pending pod')} would start on the moved nodes."
        ]
    return []


def _gang_warnings(
    after: ClusterSnapshot, sources: Sequence[str], fates: dict[str, list[PodFate]]
) -> list[str]:
    """A source left with fewer usable GPUs than one of its running gangs holds, or a gang
    that loses pods to the move and could not start again in what its source keeps."""
    evicted = {f.pod for node in fates.values() for f in node if f.fate == EVICTED}
    gangs: dict[tuple[str, str], list[tuple[str, str, int]]] = defaultdict(list)
    rows = GpuPod.objects.live().filter(pool_label__in=sources, owner_kind__in=GANG_OWNERS)
    for pool, ns, kind, owner, name, node, gpus in rows.values_list(
        "pool_label", "namespace", "owner_kind", "owner_name", "name", "node_name", "gpus"
    ):
        gangs[(pool, f"{kind} {ns}/{owner}")].append((f"{ns}/{name}", node, gpus))
    warnings = []
    for (pool, gang), pods in sorted(gangs.items()):
        if len(pods) < 2:
            continue  # one pod is not a gang
        needed = sum(gpus for _, _, gpus in pods)
        capacity = after.pool_capacity(pool)
        if capacity.gpus < needed:
            warnings.append(
                f"{pool} would fall below what its running gang {gang} needs: the gang holds "
                f"{needed} GPUs, the pool would have {capacity.gpus}."
            )
            continue
        kept = sum(g for name, node, g in pods if name not in evicted and node not in fates)
        if any(name in evicted for name, _, _ in pods) and capacity.free_gpus + kept < needed:
            warnings.append(
                f"{gang} loses pods to the move and needs {needed} GPUs to start again; {pool} "
                f"would have {capacity.free_gpus + kept}."
            )
    return warnings
