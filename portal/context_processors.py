from django.conf import settings
from django.http import HttpRequest

from pools.roles import Capability, has_capability


def portal(request: HttpRequest) -> dict[str, object]:
    return {
        "cluster_configured": bool(settings.KUBECONFIG or settings.KUBE_IN_CLUSTER),
        "metrics_configured": bool(settings.PROMETHEUS_URL),
        "perms_edit_pools": has_capability(request.user, Capability.EDIT_POOLS),
        "perms_request_move": has_capability(request.user, Capability.REQUEST_MOVE),
        "perms_approve_move": has_capability(request.user, Capability.APPROVE_MOVE),
    }
