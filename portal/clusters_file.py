"""CLUSTERS_FILE read at start: the YAML file, every malformed entry refused naming the entry and
the field (pools.core.clusters), every file an entry names checked readable, and the secrets
read from their files. The settings take the cluster's connection from it.

This version serves one cluster per portal: a file naming several is refused, saying so. A
shared querier's `cluster_label` makes every query select the cluster's series
(pools.metrics.scope). The same cluster described by CLUSTERS_FILE and by the variables
(KUBECONFIG, PROMETHEUS_URL, …) is refused too: one of them would be silently ignored.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

import yaml

from pools.core.clusters import ClusterConfig, clusters_read
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


def _read_secret(path: str, where: str) -> str:
    try:
        with open(path, encoding="utf-8") as secret:
            value = secret.read().strip()
    except OSError as exc:
        raise EnvError("CLUSTERS_FILE", f"{where}: cannot read {path}: {exc.strerror}") from None
    if not value:
        raise EnvError("CLUSTERS_FILE", f"{where}: {path} is empty")
    return value


def clusters_file_load(path: str) -> list[ClusterConfig]:
    """Every cluster the file describes; EnvError naming each malformed entry and field, or a
    file an entry names that cannot be read."""
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
            try:
                with open(file_path, "rb"):
                    pass
            except OSError as exc:
                where = f"clusters[{index}] ({cluster.name}).{name}"
                raise EnvError(
                    "CLUSTERS_FILE", f"{where}: cannot read {file_path}: {exc.strerror}"
                ) from None
    return clusters


def cluster_settings(path: str, environ: Mapping[str, str]) -> ClusterSettings:
    """The one cluster of the file, with its secrets read; EnvError when the file is
    malformed, names several clusters, or the variables describe the cluster too."""
    twice = [name for name in CLUSTER_VARIABLES if environ.get(name, "").strip()]
    if twice:
        raise EnvError(
            "CLUSTERS_FILE",
            f"the cluster is described by CLUSTERS_FILE and by {', '.join(twice)}: "
            "describe it one way only",
        )
    clusters = clusters_file_load(path)
    if len(clusters) > 1:
        names = ", ".join(c.name for c in clusters)
        raise EnvError(
            "CLUSTERS_FILE",
            f"names {len(clusters)} clusters ({names}); this version serves one cluster per "
            "portal (several clusters in one portal are not built yet): run one portal each",
        )
    (cluster,) = clusters
    metrics = cluster.metrics
    if metrics is None:
        return ClusterSettings(cluster)
    where = f"clusters[0] ({cluster.name}).prometheus"
    return ClusterSettings(
        cluster,
        bearer_token=_read_secret(metrics.bearer_token_file, f"{where}.bearer_token_file")
        if metrics.bearer_token_file
        else None,
        password=_read_secret(metrics.password_file, f"{where}.password_file")
        if metrics.password_file
        else None,
        headers=dict(metrics.headers),
    )
