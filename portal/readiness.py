"""What /readyz reports: each outside system, ok or the error an operator can act on."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

import redis
from django.conf import settings
from django.db import connection
from django.db.utils import Error as DatabaseError

from pools.common.cluster_access import current_cluster, prometheus_access, served_clusters
from pools.core.cluster_scope import cluster_scope
from pools.core.redact import redact_url
from pools.fleet.selectors import pools_claiming_owned_keys
from pools.inventory.freshness import inventory_freshness, writer_gone_after
from pools.inventory.lease import lease_last_renewed
from pools.kube.client import kube_configured, kube_version
from pools.kube.errors import KubeError
from pools.metrics.node_figures import figure_sources, rules_loaded
from pools.metrics.source import MetricsError, prometheus_ready


@dataclass(frozen=True)
class Check:
    name: str
    ok: bool
    detail: str
    required: bool


@dataclass(frozen=True)
class ReadinessReport:
    checks: list[Check] = field(default_factory=list)

    @property
    def ready(self) -> bool:
        return all(check.ok for check in self.checks if check.required)

    def as_dict(self) -> dict[str, object]:
        return {
            "ready": self.ready,
            "checks": {
                check.name: {
                    "ok": check.ok,
                    "required": check.required,
                    ("detail" if check.ok else "error"): check.detail,
                }
                for check in self.checks
            },
        }


def check_database() -> str:
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
    except DatabaseError as exc:
        raise CheckFailed(f"database unreachable: {exc}") from exc
    return connection.vendor


def check_broker() -> str:
    client = redis.Redis.from_url(
        settings.CELERY_BROKER_URL, socket_timeout=2, socket_connect_timeout=2
    )
    try:
        client.ping()
    except redis.RedisError as exc:
        raise CheckFailed(f"broker unreachable at {settings.CELERY_BROKER_URL}: {exc}") from exc
    finally:
        client.close()
    return "redis ping ok"


def each_cluster(check: Callable[[], str], *, named: bool) -> str:
    """`check` for every cluster served, each in its scope; it fails when one does, naming
    each cluster's answer. With one cluster, its answer as it is (named by `check` itself
    when `named`)."""
    clusters = served_clusters()
    answers, failed = [], False
    for name in clusters:
        with cluster_scope(name):
            try:
                answer = check()
            except CheckFailed as exc:
                answer, failed = str(exc), True
        prefix = "" if named or len(clusters) == 1 else f"cluster {name}: "
        answers.append(prefix + answer)
    if failed:
        raise CheckFailed("; ".join(answers))
    return "; ".join(answers)


def check_prometheus() -> str:
    return each_cluster(_prometheus_one, named=False)


def _prometheus_one() -> str:
    url = prometheus_access().url
    if not url:
        raise CheckFailed("PROMETHEUS_URL is not set: metrics are unavailable")
    try:
        prometheus_ready()
    except MetricsError as exc:
        raise CheckFailed(str(exc)) from exc
    return f"{url} ready; {figures_detail()}"


def figures_detail() -> str:
    """Whether the recording rules are loaded, and where the node figures last came from."""
    loaded = rules_loaded()
    rules = {True: "recording rules loaded", False: "no recording rules"}.get(
        loaded, "recording rules unknown"
    )
    sources = figure_sources()
    if sources is None:
        return f"{rules}; node figures not fetched yet"
    raw = sorted(name for name, source in sources.items() if source == "raw")
    if not raw:
        return f"{rules}; node figures from recorded series"
    if len(raw) == len(sources):
        return f"{rules}; node figures from raw expressions"
    return f"{rules}; node figures from recorded series, raw for {', '.join(raw)}"


def check_kubernetes() -> str:
    return each_cluster(_kubernetes_one, named=True)


def _kubernetes_one() -> str:
    cluster = current_cluster()
    if not kube_configured():
        inventory = _kubernetes_through_the_inventory()
        return inventory if len(served_clusters()) == 1 else f"cluster {cluster}: {inventory}"
    try:
        version = kube_version()
    except KubeError as exc:
        raise CheckFailed(f"cluster {cluster}: {exc}") from exc
    return f"cluster {cluster}: API server {version}"


def _kubernetes_through_the_inventory() -> str:
    """A process with no cluster configured (the chart's web pods mount no token: they call
    no Kubernetes API) cannot ask the API server itself; it says so, and what it can see:
    when the inventory was last written under its lease, by the watcher or the sync."""
    unseen = (
        "no cluster configured in this process (no KUBECONFIG, KUBE_IN_CLUSTER=false, or "
        "KUBE_API_ACCESS=false), so it cannot ask the API server itself"
    )
    try:
        last = lease_last_renewed()
    except DatabaseError as exc:
        raise CheckFailed(f"{unseen}; nor read the inventory lease: {exc}") from exc
    if last is None:
        raise CheckFailed(f"{unseen}; and no inventory watcher or sync has written the nodes yet")
    holder, age = last
    by = holder or "a watcher since stopped"
    stale = writer_gone_after()
    if age > stale:
        raise CheckFailed(
            f"{unseen}; the inventory lease was last renewed {age:.0f}s ago (by {by}), over "
            f"{stale}s: no watcher or sync reaches the API server, the nodes shown may be stale"
        )
    freshness = inventory_freshness()
    if freshness is not None and freshness.stale:
        raise CheckFailed(f"{unseen}; {freshness.why}; the nodes shown may be stale")
    return f"{unseen}; the inventory lease was renewed {age:.0f}s ago by {by}"


def check_pool_definitions() -> str:
    """Pools claiming a label or taint key Kubernetes, the kubelet, NFD, GFD or the GPU
    Operator owns: each move strips it from the nodes it moves (issue 25, R2)."""
    try:
        claiming = pools_claiming_owned_keys()
    except DatabaseError as exc:
        raise CheckFailed(f"pools unreadable: {exc}") from exc
    if claiming:
        raise CheckFailed(
            "; ".join(f"pool {name}: {' '.join(problems)}" for name, problems in claiming.items())
            + " Edit these pools: until then each move strips those keys from its nodes."
        )
    return "no pool claims a label or taint key another component owns"


class CheckFailed(Exception):
    pass


CHECKS: dict[str, Callable[[], str]] = {
    "database": check_database,
    "broker": check_broker,
    "prometheus": check_prometheus,
    "kubernetes": check_kubernetes,
    "pool_definitions": check_pool_definitions,
}


def readiness_report(*, required: Iterable[str]) -> ReadinessReport:
    """Every check's outcome; /readyz is public, so each detail is redacted here, once."""
    required_set = set(required)
    checks = []
    for name, run in CHECKS.items():
        try:
            ok, detail = True, run()
        except CheckFailed as exc:
            ok, detail = False, str(exc)
        checks.append(Check(name, ok, redact_url(detail), name in required_set))
    return ReadinessReport(checks)
