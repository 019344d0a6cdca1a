"""The cluster the work at hand is about, and how to reach it.

The portal's own cluster is described by the flat settings (KUBECONFIG, PROMETHEUS_URL, …,
POOL_LABEL_KEY and CLUSTER_NAME, or the first entry of CLUSTERS_FILE); each further entry of
CLUSTERS_FILE is in OTHER_CLUSTERS. Code that talks to an API server or a Prometheus, or
reads the pool label, asks here for the current cluster's (pools.core.cluster_scope), so the
same function serves every cluster. The own cluster's access is read from the settings at
each call: they are the one place it is configured.
"""

from __future__ import annotations

from dataclasses import replace

from django.conf import settings

from pools.core.cluster_scope import scoped_cluster
from pools.core.clusters import ClusterAccess, PrometheusAccess


def current_cluster() -> str:
    """The cluster the work at hand is about (pools.core.cluster_scope), else the portal's
    own (CLUSTER_NAME, or the first CLUSTERS_FILE entry): the one a new pool, node or audited
    event belongs to, and the one `Pool.objects` and `Node.objects` read."""
    return scoped_cluster() or str(settings.CLUSTER_NAME)


def served_clusters() -> tuple[str, ...]:
    """The clusters whose pools and nodes this portal serves: its own first."""
    home = str(settings.CLUSTER_NAME)
    return (home, *(name for name in settings.OTHER_CLUSTERS if name != home))


def _home() -> ClusterAccess:
    return ClusterAccess(
        name=str(settings.CLUSTER_NAME),
        colour=settings.CLUSTER_COLOUR,
        kubeconfig=settings.KUBECONFIG,
        context=settings.KUBE_CONTEXT,
        in_cluster=settings.KUBE_IN_CLUSTER,
        pool_label_key=settings.POOL_LABEL_KEY,
        prometheus=PrometheusAccess(
            url=settings.PROMETHEUS_URL or "",
            bearer_token=settings.PROMETHEUS_BEARER_TOKEN or "",
            bearer_token_file=settings.PROMETHEUS_BEARER_TOKEN_FILE,
            username=settings.PROMETHEUS_USERNAME,
            password=settings.PROMETHEUS_PASSWORD or "",
            ca_bundle=settings.PROMETHEUS_CA_BUNDLE,
            client_cert=settings.PROMETHEUS_CLIENT_CERT,
            client_key=settings.PROMETHEUS_CLIENT_KEY,
            headers=tuple(sorted(settings.PROMETHEUS_HEADERS.items())),
            cluster_label=settings.PROMETHEUS_CLUSTER_LABEL,
            cluster_value=settings.PROMETHEUS_CLUSTER_VALUE,
        ),
    )


def cluster_access(name: str | None = None) -> ClusterAccess:
    """How to reach cluster `name` (the current one by default); with no way to its API
    server in a process that calls none (KUBE_API_ACCESS false)."""
    name = name or current_cluster()
    if name == settings.CLUSTER_NAME:
        access = _home()
    else:
        try:
            access = settings.OTHER_CLUSTERS[name]
        except KeyError:
            raise LookupError(f"no cluster named {name!r} is served here") from None
    if not settings.KUBE_API_ACCESS:
        return replace(access, kubeconfig="", context="", in_cluster=False)
    return access


def prometheus_access() -> PrometheusAccess:
    return cluster_access().prometheus


def pool_label_key() -> str:
    """The node label naming a node's pool, in the current cluster. Read for every node a
    sync writes: the portal's own cluster's is the setting, with no access built."""
    name = current_cluster()
    if name != settings.CLUSTER_NAME:
        return cluster_access(name).pool_label_key or str(settings.POOL_LABEL_KEY)
    return str(settings.POOL_LABEL_KEY)


def cluster_path(path: str, cluster: str) -> str:
    """`path` on the portal, for a row of `cluster`: a link sent out (a notification, a
    calendar entry) opens in the row's cluster, whatever cluster the reader last chose."""
    if cluster == settings.CLUSTER_NAME:
        return path
    return f"{path}{'&' if '?' in path else '?'}cluster={cluster}"
