"""Maintenance headroom: how many of a pool's nodes can be drained now, and what stops more.

Pure: the pool's nodes, the GPU pods on them, the disruption budgets that cover them, in;
the figure and the blockers by name, out. A drain evicts a node's GPU pods through the
eviction API, so:

- a PodDisruptionBudget allows as many evictions of its pods at once as its status says
  (`disruptionsAllowed`): the nodes drained together may hold no more of its pods than that;
  a pod two budgets cover is refused by the API server whatever they allow;
- a gang (a Job, PyTorchJob, MPIJob, … of two pods or more) that loses a member loses its
  run: a node holding a member of a running gang is not drained;
- the pool keeps its capacity floor (`min_nodes`): nodes already cordoned, NotReady or held
  by a move count as down.

The nodes that can be drained together are chosen greedily, those with the fewest pods under
a budget first: the figure is what that order reaches (the exact maximum is a packing
problem; the greedy one is what a wave drains, and never promises more than the budgets
allow).
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

GANG_MIN_PODS = 2


@dataclass(frozen=True)
class Budget:
    """A PodDisruptionBudget as the disruption controller's status says it now."""

    namespace: str
    name: str
    selector: Mapping[str, Any]  # a label selector: matchLabels, matchExpressions
    disruptions_allowed: int

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"


@dataclass(frozen=True)
class HeadroomPod:
    namespace: str
    name: str
    node: str
    labels: Mapping[str, str] = field(default_factory=dict)
    gang: str = ""  # "PyTorchJob ml/train" for a pod of a gang owner, else ""

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"


@dataclass(frozen=True)
class HeadroomNode:
    name: str
    cordoned: bool = False
    ready: bool = True
    moving: bool = False  # an active move holds it

    @property
    def down(self) -> str:
        """Why it is already out of service ("" when it is not)."""
        if self.moving:
            return "held by a move"
        if not self.ready:
            return "NotReady"
        if self.cordoned:
            return "cordoned"
        return ""


BUDGET = "budget"
GANG = "gang"
FLOOR = "floor"
DOWN = "down"
SHARED_BUDGETS = "shared-budgets"


@dataclass(frozen=True)
class Blocker:
    kind: str  # BUDGET, GANG, FLOOR, DOWN or SHARED_BUDGETS
    name: str  # the budget, the gang, the pool's floor, the node
    message: str
    nodes: tuple[str, ...] = ()  # the nodes it keeps from being drained

    def as_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "name": self.name, "message": self.message, "nodes": self.nodes}


@dataclass(frozen=True)
class Headroom:
    pool: str
    nodes: int  # the pool's nodes
    in_service: int  # not cordoned, NotReady or held by a move
    min_nodes: int
    drainable: tuple[str, ...]  # the nodes that can be drained together now, in order
    blockers: tuple[Blocker, ...]
    budgets_error: str | None = None  # the budgets could not be read: the figure is not given

    @property
    def drainable_now(self) -> int | None:
        return None if self.budgets_error else len(self.drainable)

    def as_dict(self) -> dict[str, Any]:
        return {
            "pool": self.pool,
            "nodes": self.nodes,
            "in_service": self.in_service,
            "min_nodes": self.min_nodes,
            "drainable_now": self.drainable_now,
            "drainable_nodes": list(self.drainable) if not self.budgets_error else [],
            "blockers": [b.as_dict() for b in self.blockers],
            "budgets_error": self.budgets_error,
        }


def selector_matches(selector: Mapping[str, Any], labels: Mapping[str, str]) -> bool:
    """A label selector (metav1.LabelSelector) against a pod's labels. An empty selector
    selects every pod of the namespace, as a policy/v1 budget's does."""
    for key, value in (selector.get("matchLabels") or {}).items():
        if labels.get(key) != value:
            return False
    for expression in selector.get("matchExpressions") or []:
        key, operator = expression.get("key", ""), expression.get("operator", "")
        values = expression.get("values") or []
        if operator == "In" and labels.get(key) not in values:
            return False
        if operator == "NotIn" and key in labels and labels[key] in values:
            return False
        if operator == "Exists" and key not in labels:
            return False
        if operator == "DoesNotExist" and key in labels:
            return False
    return True


def _anchors(selector: Mapping[str, Any]) -> list[tuple[str, str]] | None:
    """Label pairs one of which a pod must carry to be selected (one matchLabels pair, or
    an In expression's values); None when the selector requires none."""
    for key, value in (selector.get("matchLabels") or {}).items():
        return [(key, value)]
    for expression in selector.get("matchExpressions") or []:
        if expression.get("operator") == "In":
            return [(expression.get("key", ""), v) for v in expression.get("values") or []]
    return None


def _covering(pods: Iterable[HeadroomPod], budgets: Sequence[Budget]) -> dict[str, list[Budget]]:
    """The budgets that select each pod. Budgets are indexed by a label pair they require,
    so a pod is matched against the few whose pair it carries (and those requiring none),
    not against every budget of its namespace: 120,000 pods and 200 budgets in a second."""
    anchored: dict[tuple[str, str, str], list[Budget]] = defaultdict(list)
    loose: dict[str, list[Budget]] = defaultdict(list)
    for budget in budgets:
        anchors = _anchors(budget.selector)
        if anchors is None:
            loose[budget.namespace].append(budget)
            continue
        for key, value in anchors:
            anchored[(budget.namespace, key, value)].append(budget)
    covering = {}
    for pod in pods:
        candidates = list(loose.get(pod.namespace, ()))
        for key, value in pod.labels.items():
            candidates += anchored.get((pod.namespace, key, value), ())
        covering[pod.key] = [b for b in candidates if selector_matches(b.selector, pod.labels)]
    return covering


def headroom(
    pool: str,
    nodes: Sequence[HeadroomNode],
    pods: Sequence[HeadroomPod],
    budgets: Sequence[Budget],
    *,
    min_nodes: int = 0,
    budgets_error: str | None = None,
    only: Collection[str] | None = None,
) -> Headroom:
    """The pool's maintenance headroom (see the module's docstring); with `only`, of those
    of its nodes alone (a maintenance's nodes left to drain), the others still counted for
    the floor and the budgets."""
    blockers = [Blocker(DOWN, n.name, f"{n.name} is {n.down}", (n.name,)) for n in nodes if n.down]
    in_service = [n for n in nodes if not n.down]
    held = _held(in_service, pods, budgets)
    blockers += held.blockers
    room = max(len(in_service) - min_nodes, 0)
    candidates = sorted(
        (
            n.name
            for n in in_service
            if n.name not in held.stuck and (only is None or n.name in only)
        ),
        key=lambda name: (sum(held.need[name].values()), name),
    )
    chosen, refused, floor_kept = _choose(candidates, held.need, budgets, room)
    blockers += _budget_blockers(refused, budgets)
    if floor_kept:
        blockers.append(
            Blocker(
                FLOOR,
                pool,
                f"{pool} keeps at least {min_nodes} node{'' if min_nodes == 1 else 's'} in "
                f"service: {len(in_service)} are, so {room} may be drained",
                tuple(floor_kept),
            )
        )
    return Headroom(
        pool,
        len(nodes),
        len(in_service),
        min_nodes,
        () if budgets_error else tuple(chosen),
        tuple(blockers),
        budgets_error,
    )


@dataclass(frozen=True)
class _Held:
    need: dict[str, Counter[str]]  # node -> the evictions its drain takes of each budget
    stuck: set[str]  # nodes no drain may take (a gang's, a pod two budgets cover)
    blockers: list[Blocker]


def _held(
    nodes: Sequence[HeadroomNode], pods: Sequence[HeadroomPod], budgets: Sequence[Budget]
) -> _Held:
    """What the pods of the nodes in service hold against a drain: the budgets their
    evictions count against, the running gangs, the pods two budgets cover."""
    names = {n.name for n in nodes}
    on_node: dict[str, list[HeadroomPod]] = defaultdict(list)
    for pod in pods:
        if pod.node in names:
            on_node[pod.node].append(pod)
    covering = _covering((p for held in on_node.values() for p in held), budgets)
    gang_sizes = Counter(p.gang for p in pods if p.gang)
    gang_nodes: dict[str, set[str]] = defaultdict(set)
    shared: dict[str, list[str]] = defaultdict(list)
    need: dict[str, Counter[str]] = {}
    for node in nodes:
        counted: Counter[str] = Counter()
        for pod in on_node.get(node.name, ()):
            if gang_sizes[pod.gang] >= GANG_MIN_PODS:
                gang_nodes[pod.gang].add(node.name)
            covered = covering.get(pod.key, [])
            if len(covered) > 1:
                shared[node.name].append(pod.key)
            counted.update(b.key for b in covered)
        need[node.name] = counted
    blockers = []
    for gang in sorted(gang_nodes):
        kept = tuple(sorted(gang_nodes[gang]))
        message = (
            f"{gang} is running with {gang_sizes[gang]} pods: draining {_nodes_text(kept)} "
            "would stop it"
        )
        blockers.append(Blocker(GANG, gang, message, kept))
    for name in sorted(shared):
        message = (
            f"{', '.join(shared[name])} on {name}: more than one disruption budget covers it, "
            "and the API server refuses to evict such a pod"
        )
        blockers.append(Blocker(SHARED_BUDGETS, name, message, (name,)))
    stuck = {n for kept in gang_nodes.values() for n in kept} | set(shared)
    return _Held(need, stuck, blockers)


def _choose(
    candidates: Sequence[str],
    need: Mapping[str, Counter[str]],
    budgets: Sequence[Budget],
    room: int,
) -> tuple[list[str], dict[str, list[str]], list[str]]:
    """Nodes taken in order while every budget allows their evictions together and the
    floor has room; those a budget refused (by budget), and those the floor kept."""
    allowed = {b.key: max(b.disruptions_allowed, 0) for b in budgets}
    used: Counter[str] = Counter()
    chosen: list[str] = []
    refused: dict[str, list[str]] = defaultdict(list)
    floor_kept: list[str] = []
    for name in candidates:
        over = [k for k, n in need[name].items() if used[k] + n > allowed[k]]
        for key in over:
            refused[key].append(name)
        if over:
            continue
        if len(chosen) >= room:
            floor_kept.append(name)
            continue
        chosen.append(name)
        used.update(need[name])
    return chosen, refused, floor_kept


def _budget_blockers(refused: Mapping[str, list[str]], budgets: Sequence[Budget]) -> list[Blocker]:
    by_key = {b.key: b for b in budgets}
    blockers = []
    for key in sorted(refused):
        allowed, kept = by_key[key].disruptions_allowed, tuple(refused[key])
        message = (
            f"PodDisruptionBudget {key} allows {allowed} disruption{'' if allowed == 1 else 's'} "
            f"now: it would refuse to evict its pods on {_nodes_text(kept)}"
        )
        blockers.append(Blocker(BUDGET, key, message, kept))
    return blockers


NAMED_NODES = 5


def _nodes_text(nodes: Sequence[str]) -> str:
    named = ", ".join(nodes[:NAMED_NODES])
    more = len(nodes) - NAMED_NODES
    return named + (f" and {more} more" if more > 0 else "")


def drain_blockers(
    nodes: Sequence[HeadroomNode],
    pods: Sequence[HeadroomPod],
    budgets: Sequence[Budget],
    draining: Collection[str],
) -> list[Blocker]:
    """What would stop draining exactly the nodes `draining` together now: each budget their
    GPU pods' evictions would exceed, each running gang among them, each pod two budgets
    cover. (The pool's floor is the move's own capacity check.)"""
    wanted = [n for n in nodes if n.name in draining]
    held = _held(wanted, pods, budgets)
    blockers = [b for b in held.blockers if set(b.nodes) & set(draining)]
    by_key = {b.key: b for b in budgets}
    total: Counter[str] = Counter()
    for name in held.need:
        total.update(held.need[name])
    for key in sorted(total):
        allowed = max(by_key[key].disruptions_allowed, 0)
        if total[key] <= allowed:
            continue
        kept = tuple(sorted(n for n, need in held.need.items() if need[key]))
        message = (
            f"PodDisruptionBudget {key} allows {allowed} disruption{'' if allowed == 1 else 's'} "
            f"now: draining {_nodes_text(kept)} would evict {total[key]} of its pods"
        )
        blockers.append(Blocker(BUDGET, key, message, kept))
    return blockers
