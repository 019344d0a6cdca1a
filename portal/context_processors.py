from django.conf import settings
from django.http import HttpRequest


def portal(request: HttpRequest) -> dict[str, object]:
    return {
        "cluster_configured": bool(settings.KUBECONFIG or settings.KUBE_IN_CLUSTER),
        "metrics_configured": bool(settings.PROMETHEUS_URL),
    }
