"""Readiness checks of a pool (pure): the practice's steps checked against the inventory and
the metrics, each passing or failing with the nodes or pods concerned."""

from __future__ import annotations

import enum
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from pools.core.insights.records import InsightNode
from pools.core.insights.scheduling import PodScheduling
from pools.core.wording import counted


class Status(enum.StrEnum):
    PASS = "pass"  # noqa: S105 -- a check status, not a password
    FAIL = "fail"
    UNKNOWN = "unknown"


@dataclass(frozen=True)
class Check:
    name: str
    title: str
    status: Status
    detail: str
    concerned: list[str] = field(default_factory=list)  # node or namespace/pod names


@dataclass(frozen=True)
class LivePod:
    """A pod running or pending on one of the pool's nodes, with its scheduling block."""

    key: str  # namespace/name
    node: str
    gpus: int
    scheduling: PodScheduling


@dataclass(frozen=True)
class PoolRules:
    name: str
    pool_key: str
    taint: tuple[str, str, str] | None  # (key, value, effect)


@dataclass(frozen=True)
class LoanFact:
    move_id: int
    loan_until: float | None
    nodes: int
    still_lent: int = 0  # after its return: nodes another move held, or whose return failed


def _check(name: str, title: str, bad: Sequence[str], ok: str, fail: Callable[[int], str]) -> Check:
    if bad:
        return Check(name, title, Status.FAIL, fail(len(bad)), sorted(bad))
    return Check(name, title, Status.PASS, ok)


def labels_and_taints(nodes: Sequence[InsightNode]) -> Check:
    return _check(
        "labels_taints",
        "Nodes carry the pool's labels and taints",
        [n.name for n in nodes if n.drifted],
        "Every node carries exactly the pool's labels and taint.",
        lambda n: f"{counted(n, 'node')} drifted from the pool's labels or taint: reconcile them.",
    )


def workloads_declare(pods: Sequence[LivePod], rules: PoolRules) -> Check:
    """Pods on the pool's nodes must ask for the pool (required affinity or a selector), for
    GPUs, and tolerate the pool's taint; a pod that landed without asking got there by luck
    (an untainted node) and will not get there again."""
    bad = []
    for pod in pods:
        wanted = pod.scheduling.wanted_pools(rules.pool_key)
        problems = []
        if wanted is None or rules.name not in wanted:
            problems.append(f"no required {rules.pool_key}={rules.name}")
        if rules.taint is not None and not pod.scheduling.tolerates(*rules.taint):
            problems.append(f"no toleration of {rules.taint[0]}")
        if pod.gpus <= 0:
            problems.append("no GPU request")
        if problems:
            bad.append(f"{pod.key} ({'; '.join(problems)})")
    return _check(
        "workloads_declare",
        "Workloads declare the pool's affinity, toleration and GPU requests",
        bad,
        f"All {counted(len(pods), 'pod')} on the pool's nodes ask for it properly.",
        lambda n: f"{counted(n, 'pod')} on the pool's nodes do not ask for it properly.",
    )


GIB = 1024**3


def _reserve_problems(node: InsightNode) -> list[str]:
    problems = []
    if node.cpu_allocatable >= node.cpu_capacity:
        problems.append("CPU: nothing reserved")
    if node.memory_allocatable >= node.memory_capacity:
        problems.append("memory: nothing reserved")
    return problems


def system_reserved(nodes: Sequence[InsightNode]) -> Check:
    """The kubelet's reservations (system-reserved, kube-reserved, eviction thresholds) show
    as allocatable below capacity; a node that reserves nothing lets pods starve the
    kubelet and the container runtime, and the node goes NotReady under load."""
    title = "Nodes reserve CPU and memory for system daemons"
    known = [n for n in nodes if n.cpu_capacity > 0 and n.memory_capacity > 0]
    # By name: a node's dataclass equality compares every field, and `in` a list would make
    # this quadratic (1.5 s of CPU for a 1,000-node pool).
    unknown = sorted({n.name for n in nodes} - {n.name for n in known})
    note = f" Capacity unknown for {', '.join(unknown)}." if unknown else ""
    if nodes and not known:
        return Check(
            "system_reserved",
            title,
            Status.UNKNOWN,
            "The inventory has no capacity for the pool's nodes yet (the next sync fills it).",
            unknown,
        )
    bad = [f"{n.name} ({'; '.join(p)})" for n in known if (p := _reserve_problems(n))]
    if bad:
        return Check(
            "system_reserved",
            title,
            Status.FAIL,
            f"{counted(len(bad), 'node')} reserve nothing for system daemons (allocatable equals "
            "capacity): set the kubelet's systemReserved and kubeReserved." + note,
            sorted(bad),
        )
    if not known:
        return Check("system_reserved", title, Status.PASS, "The pool has no nodes.")
    cpu = min(known, key=lambda n: n.cpu_capacity - n.cpu_allocatable)
    memory = min(known, key=lambda n: n.memory_capacity - n.memory_allocatable)
    return Check(
        "system_reserved",
        title,
        Status.PASS,
        f"All {counted(len(known), 'node')} keep CPU and memory below capacity; the least "
        "reserved: "
        f"{(cpu.cpu_capacity - cpu.cpu_allocatable) / 1000:g} CPU on {cpu.name}, "
        f"{(memory.memory_capacity - memory.memory_allocatable) / GIB:.1f} GiB on "
        f"{memory.name}." + note,
    )


def metrics_arrive(
    nodes: Sequence[InsightNode], metrics_error: str | None, counters: Sequence[str] = ()
) -> Check:
    """Every ready node's GPUs report every counter the pages draw (`counters`, read from
    each node's counters_reporting): a framebuffer, temperature or XID series that stops
    arriving is found, not only a missing utilisation."""
    title = "Every node's DCGM metrics arrive"
    if metrics_error:
        return Check("metrics", title, Status.UNKNOWN, f"Prometheus: {metrics_error}")
    bad = []
    for n in nodes:
        if not n.ready:
            continue
        # A MIG node's exporter reports each instance (and each GPU not in MIG mode).
        expected = n.reporting_devices
        what = "GPUs and MIG instances" if n.mig else "GPUs"
        if counters and n.counters_reporting is not None:
            reporting = n.counters_reporting
            short = [
                f"{kind}: {reporting.get(kind, 0)} of {expected} {what} report"
                for kind in counters
                if reporting.get(kind, 0) < expected
            ]
        elif (n.gpus_reporting or 0) < expected:
            short = [f"{n.gpus_reporting or 0} of {expected} {what} report"]
        else:
            short = []
        if short:
            bad.append(f"{n.name} ({'; '.join(short)})")
    every = f" ({', '.join(counters)})" if counters else ""
    return _check(
        "metrics",
        title,
        bad,
        f"Every ready node's GPUs report to Prometheus{every}.",
        lambda n: f"{counted(n, 'ready node')} miss DCGM series for some GPUs.",
    )


def nodes_recognised(unassigned: Sequence[str], stale: Sequence[str], sync_seconds: int) -> Check:
    """New or replaced nodes are recognised: the inventory saw every node within two syncs
    (`stale` lists those it did not), and unassigned GPU nodes are flagged (`unassigned`)."""
    note = f" Unassigned GPU nodes flagged: {', '.join(unassigned)}." if unassigned else ""
    return _check(
        "recognised",
        "New or replaced nodes are recognised",
        stale,
        f"The inventory saw every node within {2 * sync_seconds} s.{note}",
        lambda n: f"{counted(n, 'node')} not seen by the inventory for over two syncs.{note}",
    )


def loans_end(loans: Sequence[LoanFact], now: float) -> Check:
    """Temporary sharing only through loans with an end that is honoured."""
    bad = [
        f"move #{loan.move_id} ({counted(loan.nodes, 'node')})"
        + (
            f": its return left {counted(loan.still_lent, 'node')} lent, tried again"
            if loan.still_lent
            else ""
        )
        for loan in loans
        if loan.still_lent or loan.loan_until is None or loan.loan_until < now
    ]
    return _check(
        "loans",
        "Temporary sharing happens only through loans with an end",
        bad,
        f"{counted(len(loans), 'open loan')}, each with an end still ahead.",
        lambda n: f"{counted(n, 'loan')} past the end set and not returned.",
    )
