"""`manage.py check --deploy`: what a deployment should fix before it serves."""

from __future__ import annotations

from typing import Any

from django.core import checks
from django.db.utils import Error as DatabaseError

from pools.fleet.cluster_rename import unserved_clusters
from pools.fleet.selectors import pools_claiming_owned_keys
from pools.models import served_clusters


@checks.register("pools", deploy=True)
def pools_claiming_owned_keys_check(**kwargs: Any) -> list[checks.CheckMessage]:
    """Pools stored before the definition check refused keys another component owns."""
    try:
        claiming = pools_claiming_owned_keys()
    except DatabaseError:
        return []  # not migrated yet: there is no pool to report
    return [
        checks.Warning(
            f"Pool {name!r} claims what another component owns: {' '.join(problems)}",
            hint="Edit the pool's labels and taint: until then each move into or out of it "
            "strips those keys from the nodes it moves, and its nodes show as drifted.",
            obj=f"pool {name}",
            id="pools.W001",
        )
        for name, problems in claiming.items()
    ]


@checks.register("pools", deploy=True)
def unserved_clusters_check(**kwargs: Any) -> list[checks.CheckMessage]:
    """Pools and nodes kept for a cluster no longer served: a renamed cluster's, most likely."""
    try:
        unserved = unserved_clusters()
    except DatabaseError:
        return []  # not migrated yet
    served = ", ".join(served_clusters())
    return [
        checks.Warning(
            f"{pools} pools and {nodes} nodes are kept for cluster {name!r}, which this portal "
            f"does not serve (it serves {served}).",
            hint=f"If the cluster was renamed: manage.py rename_cluster {name} <its name>. "
            "Until then its pools are seen by nobody, and its nodes are recorded again as "
            "unassigned.",
            obj=f"cluster {name}",
            id="pools.W002",
        )
        for name, (pools, nodes) in unserved.items()
    ]
