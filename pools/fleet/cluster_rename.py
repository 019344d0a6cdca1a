"""Renaming a cluster, and finding rows of clusters the portal does not serve.

Pools and nodes belong to a cluster by name (pools.models). A portal whose CLUSTER_NAME (or
CLUSTERS_FILE entry) changes no longer sees the pools kept under the old name: the inventory
would record its nodes again under the new one, as unassigned. `cluster_rename` carries the
pools and nodes over in one transaction; audited events keep the name they were recorded
under, as history does.
"""

from __future__ import annotations

from django.db import transaction
from django.db.models import Count

from pools.audit import audit
from pools.core.names import dns_label_problem
from pools.models import Node, Pool, served_clusters


class RenameRefused(Exception):
    pass


def unserved_clusters() -> dict[str, tuple[int, int]]:
    """Each cluster that has pools or nodes kept but is not served: (pools, present nodes)."""
    served = set(served_clusters())
    pools = dict(
        Pool.everywhere.exclude(cluster__in=served).values_list("cluster").annotate(n=Count("id"))
    )
    nodes = dict(
        Node.everywhere.present()
        .exclude(cluster__in=served)
        .values_list("cluster")
        .annotate(n=Count("id"))
    )
    return {name: (pools.get(name, 0), nodes.get(name, 0)) for name in sorted({*pools, *nodes})}


def _clashes(old: str, new: str) -> list[str]:
    clashes = []
    for model, kind in ((Pool, "pool"), (Node, "node")):
        names = model.everywhere.filter(cluster=old).values_list("name", flat=True)
        taken = model.everywhere.filter(cluster=new, name__in=names).values_list("name", flat=True)
        clashes += [f"{kind} {name}" for name in sorted(taken)]
    return clashes


@transaction.atomic
def cluster_rename(*, old: str, new: str) -> tuple[int, int]:
    """Carry the pools and nodes of cluster `old` over to `new`; how many of each."""
    if problem := dns_label_problem(new):
        raise RenameRefused(f"The new name {new!r} is not a DNS label: {problem}.")
    if old == new:
        raise RenameRefused(f"The cluster is named {old!r} already.")
    if (
        not Pool.everywhere.filter(cluster=old).exists()
        and not Node.everywhere.filter(cluster=old).exists()
    ):
        raise RenameRefused(f"No pool or node is kept for cluster {old!r}.")
    if clashes := _clashes(old, new):
        raise RenameRefused(
            f"Cluster {new!r} already has {', '.join(clashes)}: rename nothing, and retire or "
            "rename those first."
        )
    pools = Pool.everywhere.filter(cluster=old).update(cluster=new)
    nodes = Node.everywhere.filter(cluster=old).update(cluster=new)
    audit(
        "cluster.renamed",
        message=f"{old} → {new}: {pools} pools, {nodes} nodes",
        before={"cluster": old},
        after={"cluster": new},
    )
    return pools, nodes
