"""The default scheduler's filters, node by node, with its own reason strings (pure).

The default profile runs its filter plugins in this order and a node fails on the first one
that rejects it (`RunFilterPlugins`), so each node contributes one plugin's reasons:

1. NodeUnschedulable — `node(s) were unschedulable`, unless the pod tolerates
   `node.kubernetes.io/unschedulable:NoSchedule`.
2. TaintToleration — the first NoSchedule/NoExecute taint no toleration covers:
   `node(s) had untolerated taint {key: value}`. Kubernetes releases from late 2025 (1.35, and
   the 1.32-1.34 patch releases that took kubernetes#134740) no longer name the taint in pod
   status and say `node(s) had untolerated taint(s)`; `name_taints=False` gives that wording.
3. NodeAffinity — `node(s) didn't match Pod's node affinity/selector`. Its PreFilter already
   narrows the nodes when every required term pins `metadata.name In [...]`: the others are
   `node(s) didn't satisfy plugin(s) [NodeAffinity]`, and no node at all is `pod affinity terms
   conflict`.
4. NodeResourcesFit — every shortage, not just the first: `Too many pods` (pods on the node
   + 1 > allocatable pods), then, unless the pod requests nothing, `Insufficient cpu`,
   `Insufficient memory`, `Insufficient <extended resource>` against allocatable minus the
   requests of the node's non-terminated pods.

The first three, and a request larger than the node's whole allocatable, are "unresolvable":
preemption cannot help there. Other shortages may be solved by evicting lower-priority pods
(DefaultPreemption): a node with no lower-priority pod says `No preemption victims found for
incoming pod`; one where evicting all of them is still not enough repeats its shortage.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from pools.core.dra.inventory import DeviceId
from pools.core.fit.claims import ClaimFilter, claim_need
from pools.core.fit.cluster import ClusterSnapshot
from pools.core.fit.pods import PREEMPT_NEVER, PodShape
from pools.core.fit.resources import GPU, Resources
from pools.core.fit.scheduling import UNSCHEDULABLE_TAINT, tolerated, untolerated_taint
from pools.core.taints import Taint

UNSCHEDULABLE = "node(s) were unschedulable"
UNTOLERATED_TAINTS = "node(s) had untolerated taint(s)"
AFFINITY = "node(s) didn't match Pod's node affinity/selector"
NOT_PINNED = "node(s) didn't satisfy plugin(s) [NodeAffinity]"
PINS_CONFLICT = "pod affinity terms conflict"
TOO_MANY_PODS = "Too many pods"
NOT_HELPFUL = "Preemption is not helpful for scheduling"
NO_VICTIMS = "No preemption victims found for incoming pod"
NOT_ELIGIBLE = "not eligible due to preemptionPolicy=Never."
NO_NODES = "no nodes available to schedule pods"
_MISSING = object()


@dataclass(frozen=True)
class Rejection:
    reasons: tuple[str, ...]
    resolvable: bool = False  # a resource shortage that evicting pods could solve


def untolerated_reason(taint: Taint, *, name_taints: bool) -> str:
    return f"node(s) had untolerated taint {taint.braces()}" if name_taints else UNTOLERATED_TAINTS


class FilterRun:
    """One pod shape against the nodes of a snapshot; node verdicts are cached per node look."""

    def __init__(self, snapshot: ClusterSnapshot, shape: PodShape, *, name_taints: bool = True):
        self.snapshot = snapshot
        self.shape = shape
        self.name_taints = name_taints
        placement = shape.placement
        self.keys = tuple(
            sorted(
                {k for k, _ in placement.node_selector}
                | {r.key for t in placement.required_terms or () for r in t.expressions}
            )
        )
        self.uses_name = placement.uses_name
        self.pinned = placement.named_nodes()
        self.tolerates_cordon = tolerated(shape.tolerations, UNSCHEDULABLE_TAINT)
        self._static: dict[tuple[object, ...], Rejection | None] = {}
        self._by_node: dict[int, Rejection | None] = {}
        self._rejections: dict[int, Rejection | None] = {}
        self.claims: ClaimFilter | None = None
        if shape.claims:
            need = claim_need(shape.claims, snapshot.dra, shape.claims[0].pod)
            self.claims = ClaimFilter(need, snapshot.dra, snapshot.selectors)

    @property
    def prefilter(self) -> str:
        """DynamicResources' PreFilter failure: every node fails with it ("" when none)."""
        return self.claims.need.prefilter if self.claims is not None else ""

    def rejection(self, i: int) -> Rejection | None:
        """Why node `i` cannot take the pod now (None: it can)."""
        if i in self._rejections:
            return self._rejections[i]
        result = self._rejections[i] = self._rejection(i)
        return result

    def _rejection(self, i: int) -> Rejection | None:
        node = self.snapshot.nodes[i]
        if self.pinned is not None and node.name not in self.pinned:
            return Rejection((NOT_PINNED,))
        if self.prefilter:
            return Rejection((self.prefilter,))
        static = self._static_rejection(i)
        if static is not None:
            return static
        shortage = resource_rejection(
            self.shape.requests,
            self.snapshot.free[i],
            self.snapshot.free_pods[i],
            node.allocatable,
        )
        if shortage is not None or self.claims is None:
            return shortage
        reason = self.claims.rejection(node.name, node.labels)
        return None if reason is None else Rejection((reason,))

    def claim_room(
        self, i: int, used: frozenset[DeviceId], most: int
    ) -> tuple[int, frozenset[DeviceId]]:
        """How many pods (at most `most`) the node's DRA devices take on top of `used`."""
        if self.claims is None:
            return most, used
        if self.prefilter:
            return 0, used
        node = self.snapshot.nodes[i]
        return self.claims.room(node.name, node.labels, used, most)

    def _static_rejection(self, i: int) -> Rejection | None:
        if i in self._by_node:
            return self._by_node[i]
        result = self._by_node[i] = self._look(i)
        return result

    def _look(self, i: int) -> Rejection | None:
        node = self.snapshot.nodes[i]
        group = self.snapshot.taint_group_of[i]
        labels = node.labels
        key = (group, tuple(labels.get(k, _MISSING) for k in self.keys))
        if self.uses_name:
            key = (*key, node.name)
        if key in self._static:
            return self._static[key]
        taints, cordoned = self.snapshot.taint_groups[group]
        result: Rejection | None = None
        if cordoned and not self.tolerates_cordon:
            result = Rejection((UNSCHEDULABLE,))
        elif (taint := untolerated_taint(taints, self.shape.tolerations)) is not None:
            result = Rejection((untolerated_reason(taint, name_taints=self.name_taints),))
        elif not self.shape.placement.matches(labels, node.name):
            result = Rejection((AFFINITY,))
        self._static[key] = result
        return result

    def passes_static(self, i: int) -> bool:
        if self.prefilter:
            return False
        node = self.snapshot.nodes[i]
        if self.pinned is not None and node.name not in self.pinned:
            return False
        return self._static_rejection(i) is None


def resource_rejection(
    request: Resources,
    free: Resources,
    free_pods: int,
    allocatable: Resources,
) -> Rejection | None:
    """NodeResourcesFit's Filter: every shortage, in its order (pods, cpu, memory, the rest)."""
    reasons: list[str] = []
    unresolvable = False
    if free_pods < 1:
        reasons.append(TOO_MANY_PODS)
    if not request.is_zero:
        for name, wanted, left, total in _compared(request, free, allocatable):
            if wanted > 0 and wanted > left:
                reasons.append(f"Insufficient {name}")
                unresolvable = unresolvable or wanted > total
    if not reasons:
        return None
    return Rejection(tuple(reasons), resolvable=not unresolvable)


def _compared(
    request: Resources, free: Resources, allocatable: Resources
) -> list[tuple[str, int, int, int]]:
    rows = [
        ("cpu", request.cpu_milli, free.cpu_milli, allocatable.cpu_milli),
        ("memory", request.memory, free.memory, allocatable.memory),
    ]
    extended_free, extended_total = dict(free.extended), dict(allocatable.extended)
    if request.gpu:
        rows.append((GPU, request.gpu, free.gpu, allocatable.gpu))
    # Every other resource counts, whether or not any node offers it: a node without it has
    # none free (`Insufficient nvidia.com/mig-4g.71gb`).
    for name, wanted in request.extended:
        rows.append((name, wanted, extended_free.get(name, 0), extended_total.get(name, 0)))
    return rows


def pods_that_fit(request: Resources, free: Resources, free_pods: int) -> int:
    """How many more pods of this request the node takes now, one after another."""
    count = free_pods
    for wanted, left in (
        (request.cpu_milli, free.cpu_milli),
        (request.memory, free.memory),
        (request.gpu, free.gpu),
    ):
        if wanted > 0:
            count = min(count, left // wanted)
    extended_free = dict(free.extended) if request.extended else {}
    for name, wanted in request.extended:
        if wanted > 0:
            count = min(count, extended_free.get(name, 0) // wanted)
    return max(count, 0)


def preemption_status(
    run: FilterRun, i: int, rejection: Rejection, priority: int
) -> tuple[str, ...] | None:
    """DefaultPreemption's view of a node the filters rejected: a reason, or None when evicting
    lower-priority pods would make room (the scheduler would preempt there)."""
    if not rejection.resolvable:
        return (NOT_HELPFUL,)
    snapshot = run.snapshot
    node = snapshot.nodes[i]
    victims = [pod for pod in node.pods if pod.priority < priority]
    if not victims:
        return (NO_VICTIMS,)
    freed = snapshot.free[i]
    for pod in victims:
        freed = freed.plus(pod.requests)
    again = resource_rejection(
        run.shape.requests,
        freed,
        snapshot.free_pods[i] + len(victims),
        node.allocatable,
    )
    return None if again is None else again.reasons


def preemption_allowed(shape: PodShape) -> bool:
    return shape.preemption_policy != PREEMPT_NEVER


def histogram(reasons: Sequence[str]) -> list[tuple[str, int]]:
    counts: dict[str, int] = {}
    for reason in reasons:
        counts[reason] = counts.get(reason, 0) + 1
    return list(counts.items())


def fit_error(total: int, counts: Sequence[tuple[str, int]]) -> str:
    """FitError.Error(): `0/N nodes are available: ` and the "count reason" strings, sorted as
    strings (so `10 ...` comes before `2 ...`), then a period."""
    listed = sorted(f"{count} {reason}" for reason, count in counts)
    return f"0/{total} nodes are available: {', '.join(listed)}."
