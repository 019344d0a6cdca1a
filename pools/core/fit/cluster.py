"""The cluster as the fit check sees it: nodes with what is free on them, and pools (pure).

Callers build plain `FitNode`s and `FitPool`s from whatever they hold (database rows, API
objects, a hypothetical layout for a move preview) and wrap them once in a `ClusterSnapshot`,
which adds up each node's requests and groups nodes that look alike to the filters, so a
check over thousands of nodes evaluates each distinct node shape once.

A node that is not Ready is given the `node.kubernetes.io/not-ready:NoSchedule` taint when it
does not already carry a not-ready or unreachable taint: the node lifecycle controller adds it
within seconds, and the scheduler only sees nodes through their taints.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from pools.core.dra.selectors import SelectorCache
from pools.core.fit.claims import NO_DRA, DraState
from pools.core.fit.resources import ZERO, Resources
from pools.core.fit.scheduling import NOT_READY_TAINT
from pools.core.taints import Taint

NO_POOL = ""  # the pool name of nodes in no pool
_NODE_CONDITION_TAINTS = ("node.kubernetes.io/not-ready", "node.kubernetes.io/unreachable")


@dataclass(frozen=True)
class NodePod:
    """A non-terminated pod bound to a node: what it requests, and its priority (preemption)."""

    requests: Resources = ZERO
    priority: int = 0
    name: str = ""  # namespace/name, for messages


@dataclass(frozen=True)
class FitNode:
    name: str
    pool: str = NO_POOL  # the pool the node is in, by the pool label; NO_POOL: none
    labels: Mapping[str, str] = field(default_factory=dict)
    taints: tuple[Taint, ...] = ()
    unschedulable: bool = False
    ready: bool = True
    allocatable: Resources = ZERO  # cpu in millicores, memory in bytes, GPUs, extended
    max_pods: int = 110  # allocatable "pods"
    pods: tuple[NodePod, ...] = ()

    def effective_taints(self) -> tuple[Taint, ...]:
        if self.ready or any(t.key in _NODE_CONDITION_TAINTS for t in self.taints):
            return self.taints
        return (*self.taints, NOT_READY_TAINT)


@dataclass(frozen=True)
class FitPool:
    name: str
    labels: Mapping[str, str] = field(default_factory=dict)
    taint: Taint | None = None
    accepted_gpu_models: tuple[str, ...] = ()  # nvidia.com/gpu.product values; empty: any


@dataclass(frozen=True)
class PoolCapacity:
    """What a gang can count on in a pool now; nodes that are Ready and not cordoned only."""

    nodes: int
    usable_nodes: int
    gpus: int
    free_gpus: int
    whole_free_nodes: int  # usable GPU nodes with no GPU in use
    largest_free_block: int  # most free GPUs on one usable node

    def as_dict(self) -> dict[str, int]:
        return {
            "nodes": self.nodes,
            "usable_nodes": self.usable_nodes,
            "gpus": self.gpus,
            "free_gpus": self.free_gpus,
            "whole_free_nodes": self.whole_free_nodes,
            "largest_free_block": self.largest_free_block,
        }


class ClusterSnapshot:
    """Nodes, pools and the free resources of every node, computed once."""

    def __init__(
        self, nodes: Sequence[FitNode], pools: Sequence[FitPool] = (), dra: DraState = NO_DRA
    ) -> None:
        self.nodes = tuple(nodes)
        self.dra = dra  # devices, classes and claims of DRA (pools.core.fit.claims)
        self.selectors = SelectorCache()  # CEL results, shared by the checks' runs
        self.pools = {pool.name: pool for pool in pools}
        self.index = {node.name: i for i, node in enumerate(self.nodes)}
        self.requested = [_requested(node) for node in self.nodes]
        self.free = [
            n.allocatable.minus(r) for n, r in zip(self.nodes, self.requested, strict=True)
        ]
        self.free_pods = [n.max_pods - len(n.pods) for n in self.nodes]
        # Nodes the unschedulable and taint filters cannot tell apart share a group; labels
        # are compared per check, on the keys the pod's affinity reads.
        self.taint_groups: list[tuple[tuple[Taint, ...], bool]] = []
        self.taint_group_of = _taint_groups(self.nodes, self.taint_groups)
        self.members: dict[str, list[int]] = {}
        for i, node in enumerate(self.nodes):
            self.members.setdefault(node.pool, []).append(i)
        self._capacities: dict[str, PoolCapacity] = {}

    def pool_nodes(self, pool: str) -> list[int]:
        return self.members.get(pool, [])

    def pool_capacity(self, pool: str) -> PoolCapacity:
        if pool not in self._capacities:
            self._capacities[pool] = self.capacity(self.pool_nodes(pool))
        return self._capacities[pool]

    def with_nodes(self, replaced: Sequence[FitNode]) -> ClusterSnapshot:
        """The same cluster with some nodes replaced by name (a move preview's "after")."""
        by_name = {node.name: node for node in replaced}
        nodes = [by_name.pop(node.name, node) for node in self.nodes]
        return ClusterSnapshot([*nodes, *by_name.values()], list(self.pools.values()), self.dra)

    def capacity(self, indexes: Sequence[int]) -> PoolCapacity:
        usable = [i for i in indexes if self.nodes[i].ready and not self.nodes[i].unschedulable]
        gpu_nodes = [i for i in usable if self.nodes[i].allocatable.gpu > 0]
        free = [max(self.free[i].gpu, 0) for i in gpu_nodes]
        whole = sum(1 for i in gpu_nodes if self.requested[i].gpu == 0 and self.free[i].gpu > 0)
        return PoolCapacity(
            nodes=len(indexes),
            usable_nodes=len(usable),
            gpus=sum(self.nodes[i].allocatable.gpu for i in gpu_nodes),
            free_gpus=sum(free),
            whole_free_nodes=whole,
            largest_free_block=max(free, default=0),
        )


def pool_capacity(snapshot: ClusterSnapshot, pool: str) -> PoolCapacity:
    """Gang capacity of a pool: whole free nodes and the largest free GPU block."""
    return snapshot.pool_capacity(pool)


def _requested(node: FitNode) -> Resources:
    requests = [pod.requests for pod in node.pods]
    total = Resources(
        sum(r.cpu_milli for r in requests),
        sum(r.memory for r in requests),
        sum(r.gpu for r in requests),
    )
    for r in requests:
        if r.extended:
            total = total.plus(Resources(extended=r.extended))
    return total


def _taint_groups(
    nodes: Sequence[FitNode], groups: list[tuple[tuple[Taint, ...], bool]]
) -> list[int]:
    numbers: dict[tuple[tuple[Taint, ...], bool], int] = {}
    group_of = []
    for node in nodes:
        key = (node.effective_taints(), node.unschedulable)
        if key not in numbers:
            numbers[key] = len(groups)
            groups.append(key)
        group_of.append(numbers[key])
    return group_of
