"""The fit check across the fleet: which cluster and pool will take this manifest, and what
must change. The one-cluster check (pools.fit.service) runs in each cluster's scope, over its
own nodes, pools and DRA state; the answer ranks the clusters where it lands now first.
A node never changes clusters, so a fix is always a pool of the cluster named."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pools.common.cluster_access import served_clusters
from pools.core.cluster_scope import cluster_scope
from pools.fit.service import FitCheck, fit_check_run


@dataclass(frozen=True)
class ClusterFit:
    cluster: str
    check: FitCheck

    @property
    def fits_now(self) -> bool:
        """Every workload finds room now somewhere in the cluster."""
        return all(w.fits_now for w in self.check.report.workloads)

    @property
    def pools_now(self) -> list[str]:
        """The pools where every workload finds room now ("" : the nodes in no pool)."""
        workloads = self.check.report.workloads
        names = [p.pool for p in workloads[0].pools] if workloads else []
        return [n for n in names if all(w.pool(n).fits_now for w in workloads)]

    def as_dict(self) -> dict[str, Any]:
        return {
            "cluster": self.cluster,
            "fits_now": self.fits_now,
            "pools_fitting_now": self.pools_now,
            "pools_with_a_fix": sorted(self.check.report.fixes),
            "report": self.check.as_dict(),
        }


def fleet_fit_run(*, manifest: str) -> list[ClusterFit]:
    """The manifest checked in every cluster served: those where it lands now first (in the
    order served), then the others. A manifest that cannot be read is refused once, as the
    one-cluster check refuses it."""
    found = []
    for name in served_clusters():
        with cluster_scope(name):
            found.append(ClusterFit(name, fit_check_run(manifest=manifest)))
    return sorted(found, key=lambda fit: not fit.fits_now)
