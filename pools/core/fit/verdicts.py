"""What the fit check answers (pure): a verdict per pod template, per pool and per workload,
and the report over a whole manifest, each with the dictionary the page and the API show."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from pools.core.fit.cluster import PoolCapacity
from pools.core.fit.findings import Finding
from pools.core.fit.fix import Fix
from pools.core.fit.workloads import Workload


@dataclass(frozen=True)
class PodVerdict:
    """One pod template on a set of nodes, as the scheduler's filters would see it now."""

    role: str
    nodes_total: int
    nodes_fit: tuple[str, ...]
    replicas_wanted: int
    replicas_fit: int  # of the wanted replicas, how many find room now
    room: int  # how many such pods fit now in all (not capped by the wanted count)
    reasons: tuple[tuple[str, int], ...] = ()  # why the other nodes do not, with node counts
    message: str = ""  # the FailedScheduling text when no node fits
    preemption: str = ""  # its DefaultPreemption part ("preemption: ...")
    preempts_on: tuple[str, ...] = ()  # nodes where evicting lower-priority pods makes room

    @property
    def fits(self) -> bool:
        return bool(self.nodes_fit)

    @property
    def scheduler_message(self) -> str:
        return f"{self.message} {self.preemption}".strip()

    def as_dict(self) -> dict[str, Any]:
        return {
            "role": self.role,
            "fits": self.fits,
            "nodes_total": self.nodes_total,
            "nodes_fit": list(self.nodes_fit),
            "replicas_wanted": self.replicas_wanted,
            "replicas_fit": self.replicas_fit,
            "room": self.room,
            "reasons": [{"reason": r, "nodes": n} for r, n in self.reasons],
            "message": self.message,
            "preemption": self.preemption,
            "scheduler_message": self.scheduler_message,
            "preempts_on": list(self.preempts_on),
        }


@dataclass(frozen=True)
class GangVerdict:
    size: int  # pods that must run at once
    placed: int  # of those, how many find room now, placed together
    whole_free_nodes: int
    largest_free_block: int

    @property
    def fits_now(self) -> bool:
        return self.placed >= self.size

    def as_dict(self) -> dict[str, Any]:
        return {
            "size": self.size,
            "fits_now": self.fits_now,
            "placed": self.placed,
            "whole_free_nodes": self.whole_free_nodes,
            "largest_free_block": self.largest_free_block,
        }


@dataclass(frozen=True)
class PoolFit:
    pool: str
    templates: tuple[PodVerdict, ...]
    fits_now: bool  # every wanted pod of every template finds room now, placed together
    capacity: PoolCapacity
    gang: GangVerdict | None = None
    findings: tuple[Finding, ...] = ()

    def as_dict(self) -> dict[str, Any]:
        return {
            "pool": self.pool,
            "fits_now": self.fits_now,
            "templates": [t.as_dict() for t in self.templates],
            "gang": self.gang.as_dict() if self.gang else None,
            "capacity": self.capacity.as_dict(),
            "findings": [f.as_dict() for f in self.findings],
        }


@dataclass(frozen=True)
class WorkloadFit:
    workload: Workload
    cluster: tuple[PodVerdict, ...]
    lands_in: tuple[tuple[str, ...], ...]  # per template: pools with a node that takes it now
    fits_now: bool
    gang: GangVerdict | None
    pools: tuple[PoolFit, ...]
    findings: tuple[Finding, ...] = ()

    def pool(self, name: str) -> PoolFit:
        return next(p for p in self.pools if p.pool == name)

    def as_dict(self) -> dict[str, Any]:
        w = self.workload
        return {
            "document": w.document,
            "kind": w.kind,
            "name": w.name,
            "namespace": w.namespace,
            "pods": w.pods,
            "gang_size": w.gang_size,
            "fits_now": self.fits_now,
            "gang": self.gang.as_dict() if self.gang else None,
            "cluster": [
                {**v.as_dict(), "lands_in": list(pools)}
                for v, pools in zip(self.cluster, self.lands_in, strict=True)
            ],
            "pools": [p.as_dict() for p in self.pools],
            "findings": [f.as_dict() for f in self.findings],
        }


@dataclass(frozen=True)
class FitReport:
    workloads: tuple[WorkloadFit, ...]
    findings: tuple[Finding, ...]  # every finding, manifest-wide ones included
    fixes: Mapping[str, Fix] = field(default_factory=dict)
    # Why a pool has no fix: "no node here has the GPU model asked for", ...
    no_fix: Mapping[str, str] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        return {
            "workloads": [w.as_dict() for w in self.workloads],
            "findings": [f.as_dict() for f in self.findings],
            "fixes": {name: fix.as_dict() for name, fix in self.fixes.items()},
        }
