from django.conf import settings
from django.http import HttpRequest

from pools import guarded_cache
from pools.models import MoveRequest
from pools.roles import Capability, has_capability


def portal(request: HttpRequest) -> dict[str, object]:
    approver = has_capability(request.user, Capability.APPROVE_MOVE)
    return {
        # The approvals inbox count, for approvers only (one cheap query a page).
        "pending_moves": MoveRequest.objects.filter(state=MoveRequest.State.PENDING).count()
        if approver
        else 0,
        "cluster_configured": bool(settings.KUBECONFIG or settings.KUBE_IN_CLUSTER),
        "metrics_configured": bool(settings.PROMETHEUS_URL),
        # What this request could not reach (Redis): the page says so.
        "degraded": guarded_cache.degraded(),
        "perms_edit_pools": has_capability(request.user, Capability.EDIT_POOLS),
        "perms_request_move": has_capability(request.user, Capability.REQUEST_MOVE),
        "perms_approve_move": has_capability(request.user, Capability.APPROVE_MOVE),
    }
