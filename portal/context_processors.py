import functools

from django.http import HttpRequest

from pools.common import guarded_cache
from pools.common.cluster_access import cluster_access, served_clusters
from pools.common.roles import Capability, has_capability
from pools.inventory.freshness import inventory_freshness
from pools.kube.client import kube_configured
from pools.moves.selectors import moves_awaiting_decision_count


def portal(request: HttpRequest) -> dict[str, object]:
    approver = has_capability(request.user, Capability.APPROVE_MOVE)
    access = cluster_access()
    return {
        # The approvals inbox: the pending requests this user may approve (not their own).
        "pending_moves": moves_awaiting_decision_count(request.user) if approver else 0,
        "cluster_configured": kube_configured(),
        "metrics_configured": bool(access.prometheus.url),
        # What this request could not reach (Redis): the page says so.
        "degraded": guarded_cache.degraded(),
        # The cluster the page is about, and the others served, to switch to.
        "cluster_name": access.name,
        "cluster_colour": access.colour,
        "other_clusters": [
            (name, cluster_access(name).colour) for name in served_clusters() if name != access.name
        ],
        # Nodes as old as the inventory's last answer from the API server: said when stale.
        # Asked once, and only by a template that shows it (a partial does not).
        "inventory": functools.cache(inventory_freshness)
        if request.user.is_authenticated
        else None,
        "perms_edit_pools": has_capability(request.user, Capability.EDIT_POOLS),
        "perms_request_move": has_capability(request.user, Capability.REQUEST_MOVE),
        "perms_approve_move": has_capability(request.user, Capability.APPROVE_MOVE),
    }
