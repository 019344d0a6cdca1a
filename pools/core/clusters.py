"""The clusters a portal knows, the pure part: what an entry of CLUSTERS_FILE may say, and every
problem of a malformed one, named by entry and field (the file is read and its secrets' files
checked in portal/clusters_file.py).

An entry names its cluster, how to reach it (a kubeconfig file and context, or `in_cluster`
for the one the portal runs in), where its metrics are (its own Prometheus with its own
authentication, or a shared querier such as Thanos, Mimir or VictoriaMetrics with the value of
a `cluster` label selecting its series), and optionally its own pool label key. Secrets come
from files only: a token or a password written into the file would be read by everyone who
may read the configuration.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from pools.core.names import dns_label_problem, label_key_problem

COLOUR = re.compile(r"#[0-9a-fA-F]{6}")
PROMETHEUS_LABEL = re.compile(r"[a-zA-Z_][a-zA-Z0-9_]*")
HEADER_NAME = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+")
DEFAULT_COLOUR = "#4c6ef5"
ENTRY_KEYS = frozenset(
    {"name", "colour", "kubeconfig", "context", "in_cluster", "prometheus", "pool_label_key"}
)
METRICS_KEYS = frozenset(
    {
        "url",
        "bearer_token_file",
        "username",
        "password_file",
        "ca_file",
        "cert_file",
        "key_file",
        "headers",
        "cluster_label",
        "cluster_value",
    }
)
# Secrets written inline, and the key that takes a file instead.
INLINE_SECRETS = {"bearer_token": "bearer_token_file", "password": "password_file"}
FILE_FIELDS = ("bearer_token_file", "password_file", "ca_file", "cert_file", "key_file")


@dataclass(frozen=True)
class MetricsAccess:
    """How to ask a cluster's metrics: a Prometheus of its own, or a shared querier whose
    series carry `cluster_label`="`cluster_value`"."""

    url: str
    bearer_token_file: str = ""
    username: str = ""
    password_file: str = ""
    ca_file: str = ""
    cert_file: str = ""
    key_file: str = ""
    headers: tuple[tuple[str, str], ...] = ()
    cluster_label: str = ""
    cluster_value: str = ""

    @property
    def shared(self) -> bool:
        return bool(self.cluster_label)


@dataclass(frozen=True)
class ClusterConfig:
    name: str
    colour: str = DEFAULT_COLOUR
    kubeconfig: str = ""  # "" with in_cluster: the pod's service account
    context: str = ""
    in_cluster: bool = False
    metrics: MetricsAccess | None = None
    pool_label_key: str = ""  # "": POOL_LABEL_KEY

    def files(self) -> list[tuple[str, str]]:
        """(field, path) of every file the entry names, for the start to check."""
        found = [("kubeconfig", self.kubeconfig)] if self.kubeconfig else []
        if self.metrics is not None:
            found += [
                (f"prometheus.{name}", getattr(self.metrics, name))
                for name in FILE_FIELDS
                if getattr(self.metrics, name)
            ]
        return found


@dataclass
class Problems:
    """Every problem found, each as `clusters[i] (name).field: why`."""

    found: list[str] = field(default_factory=list)

    def add(self, where: str, why: str) -> None:
        self.found.append(f"{where}: {why}")


def _where(index: int, entry: Mapping[str, Any], field_name: str = "") -> str:
    name = entry.get("name") if isinstance(entry.get("name"), str) else ""
    place = f"clusters[{index}]" + (f" ({name})" if name else "")
    return f"{place}.{field_name}" if field_name else place


def clusters_read(document: Any) -> tuple[list[ClusterConfig], list[str]]:
    """The clusters a parsed CLUSTERS_FILE describes, or every problem in it (then no
    cluster: a start must not go on with half of them)."""
    problems = Problems()
    if not isinstance(document, Mapping) or set(document) != {"clusters"}:
        problems.add("CLUSTERS_FILE", "expected a mapping with one key, `clusters`")
        return [], problems.found
    entries = document["clusters"]
    if not isinstance(entries, list) or not entries:
        problems.add("clusters", "expected a list of at least one cluster")
        return [], problems.found
    found = []
    for index, entry in enumerate(entries):
        if not isinstance(entry, Mapping):
            problems.add(
                f"clusters[{index}]", "expected a mapping with at least name and kubeconfig"
            )
            continue
        if (cluster := _entry(index, entry, problems)) is not None:
            found.append(cluster)
    _across(found, problems)
    return ([] if problems.found else found), problems.found


def _across(found: list[ClusterConfig], problems: Problems) -> None:
    names = [c.name for c in found]
    for name in sorted({n for n in names if names.count(n) > 1}):
        problems.add("clusters", f"the name {name!r} is given to {names.count(name)} clusters")
    inside = [c.name for c in found if c.in_cluster]
    if len(inside) > 1:
        problems.add("clusters", f"only one cluster is the one the portal runs in: {inside}")


def _text(value: Any, where: str, problems: Problems) -> str:
    if isinstance(value, str) and value.strip():
        return value.strip()
    problems.add(where, "expected a non-empty string")
    return ""


def _entry(index: int, entry: Mapping[str, Any], problems: Problems) -> ClusterConfig | None:
    before = len(problems.found)
    at = lambda name: _where(index, entry, name)  # noqa: E731 -- every message names its field
    for key in sorted(set(entry) - ENTRY_KEYS, key=str):
        problems.add(at(str(key)), f"unknown field; expected {', '.join(sorted(ENTRY_KEYS))}")
    name = _text(entry.get("name"), at("name"), problems) if "name" in entry else ""
    if "name" not in entry:
        problems.add(at("name"), "required")
    elif name and (why := dns_label_problem(name)):
        problems.add(at("name"), why)
    colour = entry.get("colour", DEFAULT_COLOUR)
    if not isinstance(colour, str) or not COLOUR.fullmatch(colour):
        problems.add(at("colour"), "expected a colour like #1f77b4")
    in_cluster = entry.get("in_cluster", False)
    if not isinstance(in_cluster, bool):
        problems.add(at("in_cluster"), "expected true or false")
    kubeconfig = _reach(entry, in_cluster is True, at, problems)
    context = _text(entry["context"], at("context"), problems) if "context" in entry else ""
    pool_key = entry.get("pool_label_key", "")
    if "pool_label_key" in entry:
        pool_key = _text(pool_key, at("pool_label_key"), problems)
        if pool_key and (why := label_key_problem(pool_key)):
            problems.add(at("pool_label_key"), why)
    metrics = _metrics(entry["prometheus"], name, at, problems) if "prometheus" in entry else None
    if len(problems.found) > before:
        return None
    return ClusterConfig(name, colour, kubeconfig, context, in_cluster, metrics, pool_key)


def _reach(entry: Mapping[str, Any], in_cluster: bool, at: Any, problems: Problems) -> str:
    if in_cluster:
        if "kubeconfig" in entry or "context" in entry:
            problems.add(at("kubeconfig"), "in_cluster uses the pod's own account: no kubeconfig")
        return ""
    if "kubeconfig" not in entry:
        problems.add(at("kubeconfig"), "required (or in_cluster: true for the portal's own)")
        return ""
    return _text(entry["kubeconfig"], at("kubeconfig"), problems)


def _metrics(value: Any, name: str, at: Any, problems: Problems) -> MetricsAccess | None:
    if not isinstance(value, Mapping):
        problems.add(at("prometheus"), "expected a mapping with at least url")
        return None
    for key in sorted(set(value) - METRICS_KEYS, key=str):
        why = (
            f"secrets come from files: use {INLINE_SECRETS[key]}"
            if key in INLINE_SECRETS
            else f"unknown field; expected {', '.join(sorted(METRICS_KEYS))}"
        )
        problems.add(at(f"prometheus.{key}"), why)
    url = value.get("url")
    if not isinstance(url, str) or not re.fullmatch(r"https?://[^\s/]+(/\S*)?", url):
        problems.add(at("prometheus.url"), "expected an http:// or https:// address")
    texts = {
        key: _text(value[key], at(f"prometheus.{key}"), problems)
        for key in (*FILE_FIELDS, "username", "cluster_label", "cluster_value")
        if key in value
    }
    if texts.get("username") and not texts.get("password_file"):
        problems.add(at("prometheus.password_file"), "username needs its password_file")
    if texts.get("key_file") and not texts.get("cert_file"):
        problems.add(at("prometheus.cert_file"), "key_file needs its certificate, cert_file")
    if texts.get("bearer_token_file") and texts.get("username"):
        problems.add(at("prometheus.username"), "a bearer token or basic auth, not both")
    label = texts.get("cluster_label", "")
    if label and not PROMETHEUS_LABEL.fullmatch(label):
        problems.add(at("prometheus.cluster_label"), "expected a Prometheus label name")
    if "cluster_value" in texts and not label:
        problems.add(at("prometheus.cluster_label"), "cluster_value needs its cluster_label")
    headers = _headers(value.get("headers", {}), at, problems)
    if label and not texts.get("cluster_value"):
        texts["cluster_value"] = name
    return MetricsAccess(url=str(url), headers=headers, **texts)


def _headers(value: Any, at: Any, problems: Problems) -> tuple[tuple[str, str], ...]:
    if not isinstance(value, Mapping):
        problems.add(at("prometheus.headers"), "expected a mapping of header names to values")
        return ()
    headers = []
    for header, content in value.items():
        if not isinstance(header, str) or not HEADER_NAME.fullmatch(header):
            problems.add(at(f"prometheus.headers.{header}"), "not a header name")
        elif not isinstance(content, str) or not content or "\n" in content:
            problems.add(at(f"prometheus.headers.{header}"), "expected a one-line value")
        else:
            headers.append((header, content))
    return tuple(headers)


@dataclass(frozen=True)
class PrometheusAccess:
    """How the portal asks one cluster's metrics, its secrets read (empty url: none)."""

    url: str = ""
    bearer_token: str = ""
    bearer_token_file: str = ""
    username: str = ""
    password: str = ""
    ca_bundle: str = ""
    client_cert: str = ""
    client_key: str = ""
    headers: tuple[tuple[str, str], ...] = ()
    cluster_label: str = ""
    cluster_value: str = ""


@dataclass(frozen=True)
class ClusterAccess:
    """Everything the portal needs to serve one cluster: its API server, its metrics and its
    pool label key."""

    name: str
    colour: str = DEFAULT_COLOUR
    kubeconfig: str = ""
    context: str = ""
    in_cluster: bool = False
    pool_label_key: str = ""
    prometheus: PrometheusAccess = PrometheusAccess()
