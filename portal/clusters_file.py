"""CLUSTERS_FILE read at start: the YAML file, every malformed entry refused naming the entry and
the field (pools.core.clusters), every file an entry names checked readable, and the secrets
read from their files. The settings take the cluster's connection from it.

The first entry is the portal's own cluster (the flat settings take it); each further one is
served too (OTHER_CLUSTERS, pools.common.cluster_access). A shared querier's `cluster_label`
makes every query select the cluster's series (pools.metrics.scope). The first cluster described
by CLUSTERS_FILE and by the variables (KUBECONFIG, PROMETHEUS_URL, …) is refused: one of them
would be silently ignored.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

import yaml

from pools.core.clusters import ClusterAccess, ClusterConfig, PrometheusAccess, clusters_read
from portal.env import EnvError

# The variables that describe the one cluster when there is no CLUSTERS_FILE.
CLUSTER_VARIABLES = (
    "CLUSTER_NAME",
    "KUBECONFIG",
    "KUBE_CONTEXT",
    "KUBE_IN_CLUSTER",
    "PROMETHEUS_URL",
    "PROMETHEUS_BEARER_TOKEN",
    "PROMETHEUS_BEARER_TOKEN_FILE",
    "PROMETHEUS_USERNAME",
    "PROMETHEUS_PASSWORD",
    "PROMETHEUS_PASSWORD_FILE",
    "PROMETHEUS_CA_BUNDLE",
    "PROMETHEUS_CLIENT_CERT",
    "PROMETHEUS_CLIENT_KEY",
    "PROMETHEUS_HEADERS",
    "PROMETHEUS_CLUSTER_LABEL",
    "PROMETHEUS_CLUSTER_VALUE",
)


@dataclass(frozen=True)
class ClusterSettings:
    """What the settings take from the file's cluster."""

    cluster: ClusterConfig
    bearer_token: str | None = None
    password: str | None = None
    headers: dict[str, str] = field(default_factory=dict)
    # Every further cluster of the file, served too.
    others: tuple[ClusterAccess, ...] = ()


def _read_secret(path: str, where: str) -> str:
    try:
        with open(path, encoding="utf-8") as secret:
            value = secret.read().strip()
    except OSError as exc:
        raise EnvError("CLUSTERS_FILE", f"{where}: cannot read {path}: {exc.strerror}") from None
    if not value:
        raise EnvError("CLUSTERS_FILE", f"{where}: {path} is empty")
    return value


def clusters_file_load(path: str, *, kube: bool = True) -> list[ClusterConfig]:
    """Every cluster the file describes; EnvError naming each malformed entry and field, or a
    file an entry names that cannot be read. A process that calls no API server (`kube`
    false: KUBE_API_ACCESS) is not given the kubeconfigs, and does not look for them."""
    try:
        with open(path, encoding="utf-8") as text:
            document = yaml.load(text, Loader=yaml.CSafeLoader)
    except OSError as exc:
        raise EnvError("CLUSTERS_FILE", f"cannot read {path}: {exc.strerror}") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}" if mark is not None else ""
        raise EnvError("CLUSTERS_FILE", f"{path} is not YAML{where}") from None
    clusters, problems = clusters_read(document)
    if problems:
        raise EnvError("CLUSTERS_FILE", "; ".join(problems))
    for index, cluster in enumerate(clusters):
        for name, file_path in cluster.files():
            if name == "kubeconfig" and not kube:
                continue
            try:
                with open(file_path, "rb"):
                    pass
            except OSError as exc:
                where = f"clusters[{index}] ({cluster.name}).{name}"
                raise EnvError(
                    "CLUSTERS_FILE", f"{where}: cannot read {file_path}: {exc.strerror}"
                ) from None
    return clusters


def cluster_settings(
    path: str, environ: Mapping[str, str], *, kube: bool = True
) -> ClusterSettings:
    """The clusters of the file, the first with its secrets read for the flat settings;
    EnvError when the file is malformed or the variables describe the first cluster too."""
    twice = [name for name in CLUSTER_VARIABLES if environ.get(name, "").strip()]
    if twice:
        raise EnvError(
            "CLUSTERS_FILE",
            f"the cluster is described by CLUSTERS_FILE and by {', '.join(twice)}: "
            "describe it one way only",
        )
    first, *rest = clusters_file_load(path, kube=kube)
    bearer_token, password = _secrets(first, 0)
    others = tuple(_access(cluster, index) for index, cluster in enumerate(rest, start=1))
    return ClusterSettings(
        first,
        bearer_token=bearer_token,
        password=password,
        headers=dict(first.metrics.headers) if first.metrics else {},
        others=others,
    )


def _secrets(cluster: ClusterConfig, index: int) -> tuple[str | None, str | None]:
    """The bearer token and the password the entry's files hold."""
    metrics = cluster.metrics
    if metrics is None:
        return None, None
    where = f"clusters[{index}] ({cluster.name}).prometheus"
    token = (
        _read_secret(metrics.bearer_token_file, f"{where}.bearer_token_file")
        if metrics.bearer_token_file
        else None
    )
    password = (
        _read_secret(metrics.password_file, f"{where}.password_file")
        if metrics.password_file
        else None
    )
    return token, password


def _access(cluster: ClusterConfig, index: int) -> ClusterAccess:
    """A further cluster's access, its secrets read."""
    metrics = cluster.metrics
    prometheus = PrometheusAccess()
    if metrics is not None:
        # A bearer token file is read again at each change by the session
        # (pools.metrics.http), and checked here; a password is read once.
        _, password = _secrets(cluster, index)
        prometheus = PrometheusAccess(
            url=metrics.url,
            bearer_token_file=metrics.bearer_token_file,
            username=metrics.username,
            password=password or "",
            ca_bundle=metrics.ca_file,
            client_cert=metrics.cert_file,
            client_key=metrics.key_file,
            headers=tuple(sorted(metrics.headers)),
            cluster_label=metrics.cluster_label,
            cluster_value=metrics.cluster_value,
        )
    return ClusterAccess(
        name=cluster.name,
        colour=cluster.colour,
        kubeconfig=cluster.kubeconfig,
        context=cluster.context,
        in_cluster=cluster.in_cluster,
        pool_label_key=cluster.pool_label_key,
        prometheus=prometheus,
    )
