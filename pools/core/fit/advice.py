"""What a platform engineer would say about a workload besides the verdict (pure).

Each finding has a stable code:

- `gpu-without-pool-affinity`: GPUs requested, no required affinity on the pool label — the
  pods land on any GPU node whose taints they tolerate, in whichever pool has room.
- `tolerates-everything`: a toleration with an empty key and `Exists` tolerates every taint
  (of its effect, or of every effect), so pool taints stop protecting anything from it.
- `gpu-model-not-in-cluster`: a `nvidia.com/gpu.product` asked by label that no node in the
  cluster carries: the pods stay Pending in every pool, and no pool's fix can change that
  (none is offered: see `unfixable_pools`).
- `gpu-model-not-in-pool`: a `nvidia.com/gpu.product` asked by label that a pool does not
  accept or has no node with (the cluster has it elsewhere).
- `gpu-limit-defaults-request` (info): a GPU limit with no request; the request defaults to it.
- `priority-instead-of-isolation`: a priority above the default and no pool affinity —
  priority isolates nothing; when GPUs are short, preemption evicts other teams' pods wherever
  this pod fits. `would-preempt`: no node has room now and the scheduler would evict
  lower-priority pods on the nodes named.
- `gang-larger-than-free-nodes`: a gang that cannot start at once in a pool that accepts its
  pods, with the pool's whole free nodes and largest free block.
- `node-name-set`, `other-scheduler`, `pool-without-gpu-request`,
  `unknown-priority-class`: the verdict's own limits, said plainly.

Findings the API server would refuse (request not equal to limit, invalid tolerations or
affinity, unknown fields) come from reading the manifest and are part of `Workload.findings`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from pools.core.fit.claims import ClaimFilter, claim_need
from pools.core.fit.cluster import NO_POOL, ClusterSnapshot
from pools.core.fit.findings import INFO, WARNING, Finding
from pools.core.fit.pods import DEFAULT_SCHEDULER, SYSTEM_PRIORITY_CLASSES
from pools.core.fit.resources import GPU, gpu_limit_only_finding
from pools.core.fit.scheduling import EXISTS
from pools.core.fit.workloads import PodTemplate
from pools.core.wording import counted

if TYPE_CHECKING:
    from pools.core.fit.verdicts import PodVerdict, PoolFit, WorkloadFit

GPU_PRODUCT_LABEL = "nvidia.com/gpu.product"
_RESOURCE_REASONS = ("Insufficient ", "Too many pods")


@dataclass(frozen=True)
class FitOptions:
    pool_key: str
    priority_classes: Mapping[str, int] = field(default_factory=dict)
    default_priority: int = 0  # the value of the cluster's globalDefault PriorityClass, if any
    name_taints: bool = True  # False: the 1.35 wording, "node(s) had untolerated taint(s)"


def workload_findings(
    fit: WorkloadFit, snapshot: ClusterSnapshot, options: FitOptions
) -> tuple[Finding, ...]:
    document = fit.workload.document
    findings: list[Finding] = []
    for template, verdict, lands in zip(
        fit.workload.templates, fit.cluster, fit.lands_in, strict=True
    ):
        findings += _template_findings(template, verdict, lands, snapshot, options)
    for pool_fit in fit.pools:
        findings += _pool_findings(fit, pool_fit, snapshot, options.pool_key)
    return tuple(_in_document(finding, document) for finding in findings)


def _in_document(finding: Finding, document: int) -> Finding:
    return Finding(
        finding.code, finding.severity, finding.message, document, finding.path, finding.pool
    )


def _template_findings(
    template: PodTemplate,
    verdict: PodVerdict,
    lands: tuple[str, ...],
    snapshot: ClusterSnapshot,
    options: FitOptions,
) -> list[Finding]:
    shape = template.shape
    findings = []
    if shape.gpu_limit_only:
        findings.append(gpu_limit_only_finding(list(shape.gpu_limit_only), shape.requests.gpu))
    missing = _models_nowhere(template, snapshot)
    if missing:
        findings.append(_model_not_in_cluster(template, missing, snapshot))
    pinned = shape.placement.requires_value(options.pool_key)
    if shape.requests.gpu and pinned is None:
        findings.append(
            _no_pool_affinity(template, lands, options.pool_key, model_missing=bool(missing))
        )
    if pinned and not shape.requests.gpu and _gpu_pools(snapshot, pinned):
        message = (
            f"{template.path}: pinned to pool {', '.join(sorted(pinned))} but requests no "
            f"{GPU}: it takes a slot on a GPU node and gets no GPU."
        )
        findings.append(Finding("pool-without-gpu-request", INFO, message, path=template.path))
    findings += _toleration_findings(template)
    findings += _priority_findings(template, verdict, pinned, snapshot, options)
    findings += _limits_of_the_verdict(template, snapshot)
    return findings


def _gpu_pools(snapshot: ClusterSnapshot, pools: frozenset[str]) -> bool:
    return any(snapshot.nodes[i].allocatable.gpu for p in pools for i in snapshot.pool_nodes(p))


def gpu_models(snapshot: ClusterSnapshot, indexes: Iterable[int] | None = None) -> set[str]:
    """The GPU models the nodes carry (all of the snapshot's by default)."""
    nodes = snapshot.nodes if indexes is None else [snapshot.nodes[i] for i in indexes]
    return {n.labels.get(GPU_PRODUCT_LABEL, "") for n in nodes} - {""}


def _models_nowhere(template: PodTemplate, snapshot: ClusterSnapshot) -> frozenset[str]:
    """The GPU models the template asks for by label when no node has any of them."""
    asked = template.shape.placement.requires_value(GPU_PRODUCT_LABEL)
    if not asked or asked & gpu_models(snapshot):
        return frozenset()
    return asked


def _model_not_in_cluster(
    template: PodTemplate, asked: frozenset[str], snapshot: ClusterSnapshot
) -> Finding:
    have = ", ".join(sorted(gpu_models(snapshot))) or "no GPU node"
    message = (
        f"{template.path}: asks for {GPU_PRODUCT_LABEL} {', '.join(sorted(asked))}, and no "
        f"node in the cluster has that model (the cluster has {have}): the pods stay Pending "
        "in every pool, whatever the scheduling block. Ask for a model the cluster has."
    )
    return Finding("gpu-model-not-in-cluster", WARNING, message, path=template.path)


MODEL_MISSING = "no node here has the GPU model asked for"
DEVICES_MISSING = "no node here has DRA devices that could take its claims"


def unfixable_pools(templates: Iterable[PodTemplate], snapshot: ClusterSnapshot) -> dict[str, str]:
    """The pools whose fix cannot work, and why: a template asks for GPU models by label
    and no node of the pool has one of them, or it makes ResourceClaims no node's DRA
    devices could take. That pool's fix would keep the selector no node of the pool
    matches, or claims none of its devices can meet, so the fixed pods would stay Pending
    there."""
    templates = list(templates)
    asked = [
        models for t in templates if (models := t.shape.placement.requires_value(GPU_PRODUCT_LABEL))
    ]
    claims = [
        ClaimFilter(
            claim_need(t.shape.claims, snapshot.dra, t.shape.claims[0].pod),
            snapshot.dra,
            snapshot.selectors,
        )
        for t in templates
        if t.shape.claims
    ]
    unfixable = {}
    for name in sorted(snapshot.pools):
        members = snapshot.pool_nodes(name)
        here = gpu_models(snapshot, members)
        if not all(models & here for models in asked):
            unfixable[name] = MODEL_MISSING
            continue
        nodes = [snapshot.nodes[i] for i in members]
        if not all(any(c.could_take(n.name, n.labels) for n in nodes) for c in claims):
            unfixable[name] = DEVICES_MISSING
    return unfixable


def _no_pool_affinity(
    template: PodTemplate, lands: tuple[str, ...], pool_key: str, *, model_missing: bool
) -> Finding:
    where = ", ".join(f"pool {p}" if p != NO_POOL else "nodes in no pool" for p in lands)
    if lands:
        today = f"today it would land in: {where}"
    elif model_missing:
        today = "today no node has the GPU model it asks for"
    else:
        today = "today no node has room for it"
    message = (
        f"{template.path}: requests {counted(template.shape.requests.gpu, 'GPU')} with no "
        f"required node affinity on {pool_key}: it lands on any GPU node whose taints it "
        f"tolerates, in whichever pool has room ({today}). Add the pool's scheduling block."
    )
    return Finding("gpu-without-pool-affinity", WARNING, message, path=template.path)


def _toleration_findings(template: PodTemplate) -> list[Finding]:
    findings = []
    for position, toleration in enumerate(template.shape.tolerations):
        if not toleration.tolerates_every_key:
            continue
        path = f"{template.path}.tolerations[{position}]"
        scope = f"every {toleration.effect} taint" if toleration.effect else "every taint"
        message = (
            f"{path}: an empty key with operator {EXISTS} tolerates {scope} — every pool's "
            "taint, and node problems such as not-ready or disk-pressure"
            + ("" if toleration.effect else ", so the pod is not even evicted from failing nodes")
            + ". Tolerate the one pool taint you mean."
        )
        findings.append(Finding("tolerates-everything", WARNING, message, path=path))
    return findings


def _priority_findings(
    template: PodTemplate,
    verdict: PodVerdict,
    pinned: frozenset[str] | None,
    snapshot: ClusterSnapshot,
    options: FitOptions,
) -> list[Finding]:
    shape, findings = template.shape, []
    known = {**SYSTEM_PRIORITY_CLASSES, **options.priority_classes}
    if shape.priority_class and options.priority_classes and shape.priority_class not in known:
        message = (
            f"{template.path}.priorityClassName: the API server refuses the pod: no "
            f"PriorityClass with name {shape.priority_class} was found"
        )
        findings.append(Finding("unknown-priority-class", WARNING, message, path=template.path))
    priority = shape.priority_value(options.priority_classes, options.default_priority)
    asks_priority = bool(shape.priority_class or shape.priority)
    above_default = priority > options.default_priority or shape.priority_class not in known
    if shape.requests.gpu and pinned is None and asks_priority and above_default:
        message = (
            f"{template.path}: priority {shape.priority_class or priority} without pool "
            "affinity isolates nothing: when GPUs are short the scheduler evicts "
            "lower-priority pods wherever this pod fits, other teams' jobs in other pools "
            "included. Use the pool's taint and node affinity instead."
        )
        findings.append(
            Finding("priority-instead-of-isolation", WARNING, message, path=template.path)
        )
    if verdict.preempts_on:
        pools = sorted(
            {snapshot.nodes[snapshot.index[n]].pool or "no pool" for n in verdict.preempts_on}
        )
        message = (
            f"{template.path}: no node has room now; the scheduler would evict lower-priority "
            f"pods on {counted(len(verdict.preempts_on), 'node')} "
            f"({', '.join(verdict.preempts_on[:5])}"
            f"{', …' if len(verdict.preempts_on) > 5 else ''}) in {', '.join(pools)} to make room."
        )
        findings.append(Finding("would-preempt", WARNING, message, path=template.path))
    return findings


def _limits_of_the_verdict(template: PodTemplate, snapshot: ClusterSnapshot) -> list[Finding]:
    shape, findings, path = template.shape, [], template.path
    if shape.node_name:
        message = (
            f"{path}.nodeName: set to {shape.node_name}, so the scheduler never sees the pod: the "
            "kubelet there admits it or refuses it, and NoSchedule taints are not checked."
        )
        findings.append(Finding("node-name-set", WARNING, message, path=path))
    if shape.scheduler_name and shape.scheduler_name != DEFAULT_SCHEDULER:
        message = (
            f"{path}.schedulerName: {shape.scheduler_name} places this pod; the verdict applies "
            "the default scheduler's filters, which it may not apply the same way."
        )
        findings.append(Finding("other-scheduler", INFO, message, path=path))
    return findings


def _pool_findings(
    fit: WorkloadFit, pool_fit: PoolFit, snapshot: ClusterSnapshot, pool_key: str
) -> list[Finding]:
    findings = []
    pool = snapshot.pools[pool_fit.pool]
    models_here = gpu_models(snapshot, snapshot.pool_nodes(pool.name))
    for template in fit.workload.templates:
        asked = template.shape.placement.requires_value(GPU_PRODUCT_LABEL)
        targets = template.shape.placement.requires_value(pool_key)
        if not asked or (targets is not None and pool.name not in targets):
            continue
        if _models_nowhere(template, snapshot):
            continue  # said once for the cluster (gpu-model-not-in-cluster), not per pool
        if pool.accepted_gpu_models and not asked & set(pool.accepted_gpu_models):
            have = ", ".join(pool.accepted_gpu_models)
        elif not asked & models_here:
            have = ", ".join(sorted(models_here)) or "no GPU node"
        else:
            continue
        message = (
            f"{template.path}: asks for {GPU_PRODUCT_LABEL} {', '.join(sorted(asked))}; pool "
            f"{pool.name} has {have}."
        )
        findings.append(
            Finding("gpu-model-not-in-pool", WARNING, message, path=template.path, pool=pool.name)
        )
    gang = pool_fit.gang
    if gang and not gang.fits_now and _only_short_of_room(pool_fit):
        gpus = "/".join(str(t.shape.requests.gpu) for t in fit.workload.templates)
        message = (
            f"{fit.workload.label}: a gang of {gang.size} pods ({gpus} GPU each) cannot start at "
            f"once in pool {pool.name}: room for {gang.placed} now; the pool has "
            f"{counted(gang.whole_free_nodes, 'whole free node')}, the largest free block is "
            f"{gang.largest_free_block} GPUs. Without a gang scheduler, some pods start and hold "
            "their GPUs while the rest wait."
        )
        findings.append(Finding("gang-larger-than-free-nodes", WARNING, message, pool=pool.name))
    return findings


def _only_short_of_room(pool_fit: PoolFit) -> bool:
    """Every template is stopped by resources in this pool, not by taints or affinity."""
    for verdict in pool_fit.templates:
        if verdict.fits:
            continue
        if not verdict.reasons or not all(
            reason.startswith(_RESOURCE_REASONS) for reason, _ in verdict.reasons
        ):
            return False
    return True
