"""Will my job land, and if not, why? The fit check, over plain data (pure).

One module answers the fit page, `POST /api/v1/fit/`, the Pending list and the move preview:

    from pools.core.fit.api_objects import fit_nodes            # raw Node/Pod objects -> FitNode
    from pools.core.fit.cluster import ClusterSnapshot, FitNode, FitPool, NodePod, pool_capacity
    from pools.core.fit.findings import ManifestError
    from pools.core.fit.check import check_fit, check_pod, evaluate_pod
    from pools.core.fit.workloads import pod_shape, read_manifest

    snapshot = ClusterSnapshot(fit_nodes(nodes, pods, pool_key=KEY), pools)  # once per request
    try:
        manifest = read_manifest(text)        # YAML or JSON, one or many documents, <= 1 MB
    except ManifestError as error:            # 400 with error.as_list(): document, object, field
        ...
    report = check_fit(manifest, snapshot, pool_key=KEY, priority_classes={"high": 100000})
    report.as_dict()                          # the API body; the page reads the same objects
    report.fixes["training"].text, .diff      # the manifest with the pool's block merged in

    check_pod(pod_object, snapshot, pool_key=KEY)       # a Pending pod read from the cluster
    evaluate_pod(pod_shape(pod_object), snapshot)       # fast: no advice, no fixes
    untolerated_taint(node.taints, shape.tolerations)   # intruders (pools.core.fit.scheduling)
    pool_capacity(snapshot, "training")                 # whole free nodes, largest free block
    snapshot.with_nodes([moved, ...])                   # the cluster after a move

Inputs (`pools.core.fit.cluster`), plain frozen dataclasses the edge fills from what it holds:
`FitNode(name, pool, labels, taints, unschedulable, ready, allocatable=Resources(cpu_milli,
memory, gpu, extended), max_pods, pods=(NodePod(requests, priority, name), ...))` — `pods` are
the node's non-terminated pods (`pools.core.fit.api_objects` builds all of it from API objects) —
and `FitPool(name, labels, taint, accepted_gpu_models)`. Options: `priority_classes` (name ->
value, for preemption), `default_priority` (the globalDefault class's value), `name_taints=False`
for the wording of Kubernetes 1.35+ ("node(s) had untolerated taint(s)"), `with_fixes=False`
to skip the fixes.

A report (`FitReport`) holds, per workload of the manifest (`WorkloadFit`):

- `cluster`: one `PodVerdict` per pod template over every node — what the real scheduler will
  do now: the nodes that take a pod (`nodes_fit`), how many of the wanted replicas fit
  (`replicas_fit`, and `room` uncapped), and when no node does, its FailedScheduling text
  (`message`, then `preemption`; `scheduler_message` joins them) with the reasons aggregated
  and sorted exactly as kube-scheduler's FitError does; `preempts_on` names the nodes where
  the scheduler would evict lower-priority pods instead. `lands_in` names, per template, the
  pools (`""` for nodes in no pool) that would take its pods today. `fits_now` and `gang` say
  whether all the wanted pods (all N of a gang) find room at once.
- `pools`: one `PoolFit` per pool — the same verdicts over the pool's nodes only, `fits_now`,
  the gang verdict and the pool's gang capacity (`capacity`).
- `findings`: what a platform engineer would say (codes in `pools.core.fit.advice`), with the
  API server's refusals found while reading; `report.findings` lists all of them, pools' too.
- `report.fixes[pool]`: the whole manifest with that pool's scheduling block merged into every
  pod template (`pools.core.fit.fix`), and its diff; only for the pools where it can work (no
  fix for a pool none of whose nodes has the GPU model a template asks for by label).

How the verdict is reached is in `pools.core.fit.plugins` (the scheduler's filters and messages)
and `pools.core.fit.packing` (how many pods fit, placed together).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from pools.core.fit.advice import FitOptions, unfixable_pools, workload_findings
from pools.core.fit.cluster import ClusterSnapshot, PoolCapacity
from pools.core.fit.findings import Finding
from pools.core.fit.fix import scheduling_fixes
from pools.core.fit.packing import place, room
from pools.core.fit.plugins import (
    NO_NODES,
    NOT_ELIGIBLE,
    NOT_HELPFUL,
    PINS_CONFLICT,
    FilterRun,
    fit_error,
    histogram,
    preemption_allowed,
    preemption_status,
)
from pools.core.fit.pods import PodShape
from pools.core.fit.verdicts import FitReport, GangVerdict, PodVerdict, PoolFit, WorkloadFit
from pools.core.fit.workloads import Manifest, Workload, read_objects
from pools.core.gc_pause import collector_paused


def check_fit(
    manifest: Manifest,
    snapshot: ClusterSnapshot,
    *,
    pool_key: str,
    priority_classes: Mapping[str, int] | None = None,
    default_priority: int = 0,
    name_taints: bool = True,
    with_fixes: bool = True,
) -> FitReport:
    # The check builds many objects, none in a cycle: the collector's passes over a big
    # manifest's were a third of the time (pools.core.gc_pause).
    with collector_paused():
        options = FitOptions(pool_key, dict(priority_classes or {}), default_priority, name_taints)
        memo = Evaluations(snapshot, options)
        fits = []
        for workload in manifest.workloads:
            fit = evaluate_workload(workload, snapshot, options, memo)
            advice = workload_findings(fit, snapshot, options)
            fits.append(_with_findings(fit, advice))
        findings = [*manifest.findings]
        for fit in fits:
            findings += fit.findings
            for pool_fit in fit.pools:
                findings += pool_fit.findings
        templates = [t for w in manifest.workloads for t in w.templates]
        unfixable = unfixable_pools(templates, snapshot)
        fixable = [snapshot.pools[name] for name in sorted(snapshot.pools) if name not in unfixable]
        fixes = scheduling_fixes(manifest, fixable, pool_key) if with_fixes else {}
        return FitReport(tuple(fits), tuple(findings), fixes, unfixable)


def check_pod(
    pod: Mapping[str, Any], snapshot: ClusterSnapshot, *, pool_key: str, **options: Any
) -> FitReport:
    """The fit check for one Pod object read from the cluster (a Pending pod)."""
    body = {key: value for key, value in pod.items() if key != "status"}
    manifest = read_objects([{"kind": "Pod", "apiVersion": "v1", **body}])
    return check_fit(manifest, snapshot, pool_key=pool_key, **options)


def _with_findings(fit: WorkloadFit, advice: tuple[Finding, ...]) -> WorkloadFit:
    general = tuple(f for f in advice if not f.pool)
    pools = tuple(
        PoolFit(
            p.pool,
            p.templates,
            p.fits_now,
            p.capacity,
            p.gang,
            (*p.findings, *(f for f in advice if f.pool == p.pool)),
        )
        for p in fit.pools
    )
    return WorkloadFit(
        fit.workload,
        fit.cluster,
        fit.lands_in,
        fit.fits_now,
        fit.gang,
        pools,
        (*fit.workload.findings, *fit.findings, *general),
    )


class Evaluations:
    """What one check has worked out, shared by its workloads: a List of 200 Deployments of
    one shape runs the filters once, not 200 times (issue 25, R1). Every entry is a function
    of its key alone, so the answers are those of evaluating each workload afresh."""

    def __init__(self, snapshot: ClusterSnapshot, options: FitOptions) -> None:
        self.snapshot = snapshot
        self.options = options
        self.everything = list(range(len(snapshot.nodes)))
        self.cluster_capacity = snapshot.capacity(self.everything)
        self.runs: dict[PodShape, FilterRun] = {}
        self.verdicts: dict[tuple[Any, ...], PodVerdict] = {}
        self.placed: dict[tuple[Any, ...], list[int]] = {}

    def run(self, shape: PodShape) -> FilterRun:
        # Shapes that differ only in advice (the same container in each item of a List)
        # share their run.
        shape = shape.for_scheduling
        if shape not in self.runs:
            self.runs[shape] = FilterRun(self.snapshot, shape, name_taints=self.options.name_taints)
        return self.runs[shape]

    def verdict(self, run: FilterRun, role: str, wanted: int, scope: str | None) -> PodVerdict:
        """`scope`: a pool's name, or None for the whole cluster."""
        key = (id(run), role, wanted, scope)  # a run's shape is hashed once, in run()
        if key not in self.verdicts:
            indexes = self.everything if scope is None else self.snapshot.pool_nodes(scope)
            self.verdicts[key] = _verdict(run, role, wanted, indexes, self.options)
        return self.verdicts[key]

    def place(self, runs: Sequence[FilterRun], wanted: list[int], scope: str | None) -> list[int]:
        key = (tuple(id(run) for run in runs), tuple(wanted), scope)
        if key not in self.placed:
            indexes = self.everything if scope is None else self.snapshot.pool_nodes(scope)
            self.placed[key] = place(runs, wanted, indexes)
        return self.placed[key]


def evaluate_workload(
    workload: Workload,
    snapshot: ClusterSnapshot,
    options: FitOptions,
    memo: Evaluations | None = None,
) -> WorkloadFit:
    memo = memo if memo is not None else Evaluations(snapshot, options)
    runs = [memo.run(t.shape) for t in workload.templates]
    cluster = tuple(
        memo.verdict(run, t.role, t.replicas, None)
        for run, t in zip(runs, workload.templates, strict=True)
    )
    lands_in = tuple(_pools_of(snapshot, v.nodes_fit) for v in cluster)
    fits_now, gang = _together(
        workload, memo.place(runs, _wanted(workload), None), memo.cluster_capacity
    )
    pools = []
    for name in sorted(snapshot.pools):
        verdicts = tuple(
            memo.verdict(run, t.role, t.replicas, name)
            for run, t in zip(runs, workload.templates, strict=True)
        )
        capacity = snapshot.pool_capacity(name)
        pool_fits, pool_gang = _together(
            workload, memo.place(runs, _wanted(workload), name), capacity
        )
        pools.append(PoolFit(name, verdicts, pool_fits, capacity, pool_gang))
    return WorkloadFit(workload, cluster, lands_in, fits_now, gang, tuple(pools))


def _pools_of(snapshot: ClusterSnapshot, names: Sequence[str]) -> tuple[str, ...]:
    return tuple(sorted({snapshot.nodes[snapshot.index[name]].pool for name in names}))


def _wanted(workload: Workload) -> list[int]:
    return [t.replicas for t in workload.templates]


def _together(
    workload: Workload, placed: list[int], capacity: PoolCapacity
) -> tuple[bool, GangVerdict | None]:
    wanted = _wanted(workload)
    fits = sum(placed) >= sum(wanted)
    if not workload.is_gang:
        return fits, None
    gang = GangVerdict(
        workload.gang_size,
        min(sum(placed), workload.gang_size),
        capacity.whole_free_nodes,
        capacity.largest_free_block,
    )
    return fits, gang


def evaluate_pod(
    shape: PodShape,
    snapshot: ClusterSnapshot,
    indexes: Sequence[int] | None = None,
    *,
    replicas: int = 1,
    priority_classes: Mapping[str, int] | None = None,
    default_priority: int = 0,
    name_taints: bool = True,
) -> PodVerdict:
    """One pod shape on some nodes of the snapshot (all of them by default): the fast path for
    lists of pending pods and the move preview."""
    run = FilterRun(snapshot, shape, name_taints=name_taints)
    options = FitOptions("", dict(priority_classes or {}), default_priority, name_taints)
    nodes = range(len(snapshot.nodes)) if indexes is None else indexes
    return _verdict(run, "", replicas, list(nodes), options)


def _verdict(
    run: FilterRun, role: str, wanted: int, indexes: Sequence[int], options: FitOptions
) -> PodVerdict:
    snapshot = run.snapshot
    fitting, rejected = [], []
    for i in indexes:
        rejection = run.rejection(i)
        if rejection is None:
            fitting.append(i)
        else:
            rejected.append((i, rejection))
    capacity = room(run, fitting)
    base = PodVerdict(
        role,
        len(indexes),
        tuple(snapshot.nodes[i].name for i in fitting),
        wanted,
        min(wanted, capacity),
        capacity,
    )
    if fitting:
        return base
    return _failure(run, base, rejected, options)


def _failure(
    run: FilterRun, base: PodVerdict, rejected: list[Any], options: FitOptions
) -> PodVerdict:
    total = base.nodes_total
    counts = histogram([reason for _, rejection in rejected for reason in rejection.reasons])
    counts.sort(key=lambda item: f"{item[1]} {item[0]}")  # the order of the message
    if total == 0:
        message, preemption = NO_NODES, ""
    elif (run.pinned is not None and not run.pinned) or run.prefilter:
        # A PreFilter failed: every node fails with its reason, which the message carries
        # alone, and preemption cannot help.
        reason = run.prefilter or PINS_CONFLICT
        message = f"0/{total} nodes are available: {reason}."
        preemption = "preemption: " + fit_error(total, [(NOT_HELPFUL, total)])
        counts = [(reason, total)]
    else:
        message = fit_error(total, counts)
        preemption = ""
    victims_on: list[str] = []
    if total and not preemption:
        preemption, victims_on = _preemption(run, rejected, total, options)
    return PodVerdict(
        base.role,
        total,
        (),
        base.replicas_wanted,
        0,
        0,
        tuple(counts),
        message,
        preemption,
        tuple(victims_on),
    )


def _preemption(
    run: FilterRun, rejected: list[Any], total: int, options: FitOptions
) -> tuple[str, list[str]]:
    if not preemption_allowed(run.shape):
        return f"preemption: {NOT_ELIGIBLE}", []
    priority = run.shape.priority_value(options.priority_classes, options.default_priority)
    reasons: list[str] = []
    candidates = []
    for i, rejection in rejected:
        status = preemption_status(run, i, rejection, priority)
        if status is None:
            candidates.append(run.snapshot.nodes[i].name)
        else:
            reasons += status
    if candidates:
        # The scheduler nominates a node and evicts lower-priority pods there.
        return "", candidates
    return "preemption: " + fit_error(total, histogram(reasons)), []
