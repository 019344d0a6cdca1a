"""What a drill checks (pure): the practice asks, when a node goes down or a GPU faults,
whether the portal flags it, whether the pool's jobs find room or stay Pending, whether a new
node joining is recognised, and whether the cluster comes back as it was."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from pools.core.insights.readiness import Check, Status
from pools.core.wording import counted

# No drill holds a node longer than this: an hour is a rehearsal, a day is an outage.
MAX_HOLD_SECONDS = 3600
# Pods that belong on their node whatever its GPUs do: a DaemonSet's (dcgm-exporter, the
# device plugin, GPU Feature Discovery) and a static pod's mirror (owned by the Node).
NODE_BOUND_OWNERS = frozenset({"DaemonSet", "Node"})


def jobs_on_node(pods: Iterable[Mapping[str, Any]]) -> list[str]:
    """The node's pods that should leave it when a GPU faults, as namespace/name: not those a
    DaemonSet runs on every node, nor static pods, which stay by design."""
    return sorted(
        f"{p['namespace']}/{p['name']}"
        for p in pods
        if p.get("owner_kind", "") not in NODE_BOUND_OWNERS
    )


@dataclass(frozen=True)
class NodeDownObservation:
    node: str
    flagged: bool  # the inventory row showed the node cordoned while it was down
    pods_before: int  # pods on the node when it went down
    pods_during: int  # pods on it at the end of the hold (a cordon evicts nothing)
    pending_before: int  # GPU pods waiting for the pool when it went down
    pending_during: int  # and at the end of the hold
    spare_nodes: int  # the pool's other schedulable nodes with every GPU free, meanwhile
    restored: bool  # the row shows the node schedulable again after the drill

    def as_dict(self) -> dict[str, object]:
        return dict(self.__dict__)


def _verdict(node: str, name: str, title: str, ok: bool, passed: str, failed: str) -> Check:
    return Check(name, title, Status.PASS if ok else Status.FAIL, passed if ok else failed, [node])


def _room(node: str, pending_before: int, pending_during: int, spare_nodes: int) -> Check:
    waiting = pending_during - pending_before
    return _verdict(
        node,
        "room",
        "The pool's jobs find room or say why they wait",
        waiting <= 0 or spare_nodes > 0,
        f"{counted(max(0, waiting), 'more pod')} waited; {counted(spare_nodes, 'spare node')} "
        "in the pool.",
        f"{counted(waiting, 'more GPU pod')} stayed Pending and the pool had no spare node: it "
        "cannot lose a node without queueing.",
    )


def node_down_checks(o: NodeDownObservation) -> list[Check]:
    return [
        _verdict(
            o.node,
            "flagged",
            "The portal flags the node down",
            o.flagged,
            f"{o.node} showed as cordoned in the inventory while it was down.",
            f"{o.node} never showed as cordoned: the inventory missed the change.",
        ),
        _verdict(
            o.node,
            "pods_kept",
            "Running pods keep running",
            o.pods_during >= o.pods_before,
            f"{counted(o.pods_before, 'pod')} on the node kept running (a cordon evicts nothing).",
            f"{counted(o.pods_before - o.pods_during, 'pod')} left the node while it was cordoned.",
        ),
        _room(o.node, o.pending_before, o.pending_during, o.spare_nodes),
        _verdict(
            o.node,
            "restored",
            "The node is restored",
            o.restored,
            f"{o.node} is schedulable again.",
            f"{o.node} is still cordoned: uncordon it (kubectl uncordon {o.node}).",
        ),
    ]


# XID 79, "GPU has fallen off the bus": fatal, the GPU is unusable until the node reboots.
FAULT_XID = 79


@dataclass(frozen=True)
class GpuFaultObservation:
    node: str
    gpu: int
    xid: int  # the XID injected
    xid_seen: int | None  # what the portal's figures showed for that GPU (None: no answer)
    metrics_error: str  # why the figures were not read ('' when they were)
    pods_before: tuple[str, ...]  # namespace/name of the pods on the node at the fault
    pods_still: tuple[str, ...]  # those of them still on it at the end of the hold
    pending_before: int
    pending_during: int
    spare_nodes: int
    restored: bool  # the injected XID was cleared

    def as_dict(self) -> dict[str, object]:
        return {k: list(v) if isinstance(v, tuple) else v for k, v in self.__dict__.items()}


def _flagged(o: GpuFaultObservation) -> Check:
    title = "The portal flags the faulty GPU"
    if o.xid_seen is None:
        return Check(
            "flagged",
            title,
            Status.UNKNOWN,
            f"The node's GPU figures could not be read: {o.metrics_error}",
            [o.node],
        )
    return _verdict(
        o.node,
        "flagged",
        title,
        o.xid_seen == o.xid,
        f"{o.node} GPU {o.gpu} showed XID {o.xid} on the node's figures.",
        f"{o.node} GPU {o.gpu} showed XID {o.xid_seen} instead of {o.xid}: the DCGM series "
        "did not reach Prometheus during the hold (is the exporter scraped?).",
    )


def gpu_fault_checks(o: GpuFaultObservation) -> list[Check]:
    stayed = len(o.pods_still)
    return [
        _flagged(o),
        _verdict(
            o.node,
            "jobs_moved",
            "The jobs on the faulty node are moved off it",
            stayed == 0,
            f"{counted(len(o.pods_before), 'job pod')} on the node; none kept running on it "
            "(DaemonSet and static pods stay by design).",
            f"{counted(stayed, 'job pod')} kept running on the node with the faulty GPU "
            f"({', '.join(o.pods_still)}): nothing reacts to the XID. A health check that "
            "cordons and drains a node on a fatal XID would move them.",
        ),
        _room(o.node, o.pending_before, o.pending_during, o.spare_nodes),
        _verdict(
            o.node,
            "restored",
            "The fault is cleared",
            o.restored,
            f"{o.node} GPU {o.gpu} no longer carries the injected XID.",
            f"The injected XID on {o.node} GPU {o.gpu} could not be cleared.",
        ),
    ]


@dataclass(frozen=True)
class NodeJoinObservation:
    node: str
    seen: bool  # the inventory has a present row for the node, written after it joined
    pool: str  # the pool that row puts it in ('' when unassigned)
    waited_seconds: int  # from the join to the check (at least one full sync)
    removed: bool  # deleted from the cluster and its row marked gone

    def as_dict(self) -> dict[str, object]:
        return dict(self.__dict__)


def node_join_checks(o: NodeJoinObservation) -> list[Check]:
    return [
        _verdict(
            o.node,
            "recognised",
            "The portal recognises the new node as unassigned",
            o.seen and not o.pool,
            f"{o.node} showed as an unassigned GPU node within {o.waited_seconds} s.",
            f"{o.node} was not seen by the inventory within {o.waited_seconds} s (is the "
            "watcher or the periodic sync running?)."
            if not o.seen
            else f"{o.node} showed in pool {o.pool} instead of unassigned.",
        ),
        _verdict(
            o.node,
            "removed",
            "The drill's node is removed",
            o.removed,
            f"{o.node} is deleted from the cluster and gone from the inventory.",
            f"{o.node} could not be removed: delete it (kubectl delete node {o.node}).",
        ),
    ]


# The new node carries this taint, so no workload lands on a node that has no kubelet.
DRILL_TAINT_KEY = "gpu-portal/drill"


@dataclass(frozen=True)
class NodeShape:
    gpu_model: str
    gpus: int
    gpu_memory_mib: int


def joining_node(name: str, shape: NodeShape, drill_id: int) -> dict[str, object]:
    """A Node as a kubelet registers it: GPU capacity, its GPU labels, no pool label, and
    a little CPU and memory reserved for the system daemons."""
    gpus = str(shape.gpus)
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "labels": {
                "kubernetes.io/hostname": name,
                "nvidia.com/gpu.present": "true",
                "nvidia.com/gpu.product": shape.gpu_model,
                "nvidia.com/gpu.count": gpus,
                "nvidia.com/gpu.memory": str(shape.gpu_memory_mib),
            },
        },
        "spec": {
            "taints": [{"key": DRILL_TAINT_KEY, "value": str(drill_id), "effect": "NoSchedule"}]
        },
        "status": {
            "capacity": {"cpu": "96", "memory": "1056Gi", "pods": "110", "nvidia.com/gpu": gpus},
            "allocatable": {
                "cpu": "95",
                "memory": "1040Gi",
                "pods": "110",
                "nvidia.com/gpu": gpus,
            },
            "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady"}],
        },
    }


def _probe_removed(pod: str, removed: bool) -> Check:
    """A probe-pod drill's last check: its pod (namespace/name) is gone."""
    return _verdict(
        pod,
        "removed",
        "The probe pod is removed",
        removed,
        f"{pod} is deleted.",
        f"{pod} could not be deleted: kubectl delete pod -n {pod.replace('/', ' ')}.",
    )


# What the scheduler and the fit check say of a pod that asks for more GPUs than any node
# has free: kube-scheduler's NodeResourcesFit filter reason.
NO_ROOM_REASON = "Insufficient nvidia.com/gpu"


@dataclass(frozen=True)
class NoRoomObservation:
    pod: str  # namespace/name of the probe
    gpus: int  # what it asked for
    largest_free: int  # the most GPUs free on one node of the pool when it was made
    bound_to: str  # the node it was bound to ('' : none, as it should be)
    scheduler_message: str  # its PodScheduled=False message ('' : not refused yet)
    portal_message: str | None  # the reason the portal's pending list shows (None: not seen)
    fit_fits: bool | None  # the fit check's verdict in the pool (None: no answer)
    fit_message: str  # why not, as the fit check says it
    removed: bool  # the probe is deleted

    def as_dict(self) -> dict[str, object]:
        return dict(self.__dict__)


def no_room_checks(o: NoRoomObservation) -> list[Check]:
    asked = (
        f"{o.pod} asked for {counted(o.gpus, 'GPU')} (the most free on one node: {o.largest_free})"
    )
    return [
        _verdict(
            o.pod,
            "scheduler_refuses",
            "The scheduler keeps it pending for want of GPUs",
            not o.bound_to and NO_ROOM_REASON in o.scheduler_message,
            f"{asked}; the scheduler said: {o.scheduler_message}",
            f"{asked}; it was bound to {o.bound_to}."
            if o.bound_to
            else f"{asked}; the scheduler did not say {NO_ROOM_REASON!r} within the hold "
            f"({o.scheduler_message or 'no PodScheduled condition'}).",
        ),
        _verdict(
            o.pod,
            "portal_shows",
            "The portal shows it pending for want of GPUs",
            o.portal_message is not None and NO_ROOM_REASON in o.portal_message,
            f"The pending list shows {o.pod}: {o.portal_message}",
            f"The inventory did not see {o.pod} within the hold (is the watcher running?)."
            if o.portal_message is None
            else f"The pending list shows {o.pod} without the reason: {o.portal_message or '—'}",
        ),
        _verdict(
            o.pod,
            "fit_says_no_room",
            "The fit check says no node has room",
            o.fit_fits is False and NO_ROOM_REASON in o.fit_message,
            f"The fit check: {o.fit_message}",
            "The fit check had no answer for the pod."
            if o.fit_fits is None
            else f"The fit check said it fits now, or gave another reason: {o.fit_message or '—'}",
        ),
        _probe_removed(o.pod, o.removed),
    ]


# The probe job's own deadline: short, so the drill sees it run out within its hold.
TIMEOUT_DEADLINE_SECONDS = 15


@dataclass(frozen=True)
class TimeoutObservation:
    pod: str  # namespace/name of the probe
    deadline_seconds: int
    started: bool  # it ran (a pod that never started has no deadline to run out)
    phase: str  # its phase on the cluster at the end of the hold
    cluster_reason: str  # its pod-level reason there (DeadlineExceeded, as the kubelet says)
    portal_reason: str | None  # the termination reason the portal recorded (None: not seen)
    portal_cause: str | None  # the failure class the insights give it (None: not seen)
    removed: bool

    def as_dict(self) -> dict[str, object]:
        return dict(self.__dict__)


def timeout_checks(o: TimeoutObservation) -> list[Check]:
    return [
        _verdict(
            o.pod,
            "cluster_ends_it",
            "The cluster ends the job at its deadline",
            o.phase == "Failed" and o.cluster_reason == "DeadlineExceeded",
            f"{o.pod} failed with DeadlineExceeded after its {o.deadline_seconds} s deadline.",
            f"{o.pod} never started: the pool had no free GPU for it."
            if not o.started
            else f"{o.pod} is {o.phase or 'gone'} ({o.cluster_reason or 'no reason'}) after its "
            f"{o.deadline_seconds} s deadline: nothing enforces activeDeadlineSeconds.",
        ),
        _verdict(
            o.pod,
            "reported_as_timeout",
            "The portal reports the failure as a timeout",
            o.portal_cause == "timeout",
            f"The portal recorded {o.portal_reason} and counts it as a timeout.",
            f"The inventory did not see {o.pod} end within the hold (is the watcher running?)."
            if o.portal_reason is None
            else f"The portal recorded {o.portal_reason or 'no reason'} and counts it as "
            f"{o.portal_cause}, not as a timeout.",
        ),
        _probe_removed(o.pod, o.removed),
    ]
