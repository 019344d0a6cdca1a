"""/readyz against real servers: a real Redis, a real Prometheus, and ports with nothing on them."""

from __future__ import annotations

import json
import re
from datetime import timedelta
from pathlib import Path

import pytest
from django.test import Client
from django.utils import timezone

from pools.inventory.lease import lease_acquire
from pools.models import InventoryLease
from portal import readiness
from tests.servers import PrometheusServer, RedisServer, free_port, prometheus_server


def readyz(client: Client) -> tuple[int, dict]:  # type: ignore[type-arg]
    response = client.get("/readyz")
    return response.status_code, json.loads(response.content)


@pytest.mark.django_db
def test_all_up_is_ready(
    client: Client, settings, redis: RedisServer, prometheus: PrometheusServer
) -> None:  # type: ignore[no-untyped-def]
    settings.CELERY_BROKER_URL = redis.url
    settings.PROMETHEUS_URL = prometheus.url
    status, body = readyz(client)
    assert status == 200
    assert body["ready"] is True
    assert body["checks"]["database"]["ok"] is True
    assert body["checks"]["broker"] == {"ok": True, "required": False, "detail": "redis ping ok"}
    assert body["checks"]["prometheus"]["ok"] is True


@pytest.mark.django_db
def test_redis_down_is_reported_and_the_pod_stays_ready(client: Client, settings) -> None:  # type: ignore[no-untyped-def]
    """With Redis down the pages answer, degraded: a failed broker check on every web pod
    would take them all out of the Service, a full outage. Only when asked for is it one."""
    port = free_port()
    settings.CELERY_BROKER_URL = f"redis://:hunter2@127.0.0.1:{port}/0"
    status, body = readyz(client)
    assert status == 200
    assert body["ready"] is True
    broker = body["checks"]["broker"]
    assert broker["ok"] is False and broker["required"] is False
    assert f"broker unreachable at redis://:***@127.0.0.1:{port}/0" in broker["error"]
    assert "hunter2" not in json.dumps(body)
    settings.READYZ_REQUIRED = ["database", "broker"]
    status, body = readyz(client)
    assert (status, body["ready"], body["checks"]["broker"]["required"]) == (503, False, True)


@pytest.mark.django_db
def test_the_database_down_takes_the_pod_out(client: Client, settings, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    def down() -> str:
        raise readiness.CheckFailed("database unreachable: connection refused")

    settings.CELERY_BROKER_URL = f"redis://127.0.0.1:{free_port()}/0"
    monkeypatch.setitem(readiness.CHECKS, "database", down)
    status, body = readyz(client)
    assert (status, body["checks"]["database"]["required"]) == (503, True)


@pytest.mark.django_db
def test_prometheus_down_is_reported_but_not_required_by_default(
    client: Client,
    settings,
    redis: RedisServer,
    tmp_path: Path,  # type: ignore[no-untyped-def]
) -> None:
    settings.CELERY_BROKER_URL = redis.url
    with prometheus_server(tmp_path) as own:
        settings.PROMETHEUS_URL = own.url
        assert readyz(client)[1]["checks"]["prometheus"]["ok"] is True
    # Stopped: the same URL now refuses connections.
    status, body = readyz(client)
    assert status == 200
    prom = body["checks"]["prometheus"]
    assert prom["ok"] is False and prom["required"] is False
    assert f"Prometheus unreachable at {own.url}" in prom["error"]


@pytest.mark.django_db
def test_prometheus_can_be_made_required(client: Client, settings, redis: RedisServer) -> None:  # type: ignore[no-untyped-def]
    settings.CELERY_BROKER_URL = redis.url
    settings.PROMETHEUS_URL = f"http://127.0.0.1:{free_port()}"
    settings.READYZ_REQUIRED = ["database", "broker", "prometheus"]
    status, body = readyz(client)
    assert status == 503
    assert body["checks"]["prometheus"]["required"] is True


@pytest.mark.django_db
def test_no_cluster_configured_is_reported(client: Client, settings, redis: RedisServer) -> None:  # type: ignore[no-untyped-def]
    settings.CELERY_BROKER_URL = redis.url
    settings.KUBECONFIG = ""
    settings.KUBE_IN_CLUSTER = False
    status, body = readyz(client)
    assert status == 200
    assert "no cluster configured" in body["checks"]["kubernetes"]["error"]


@pytest.mark.django_db
def test_without_a_cluster_the_kubernetes_check_says_what_it_sees_through_the_inventory(
    client: Client,
    settings,
    redis: RedisServer,  # type: ignore[no-untyped-def]
) -> None:
    """The chart's web pods mount no token: /readyz says it cannot ask the API server, and
    whether the watcher (or the sync) still writes the inventory under its lease."""
    settings.CELERY_BROKER_URL = redis.url
    settings.KUBECONFIG = ""
    settings.KUBE_IN_CLUSTER = False
    settings.INVENTORY_SYNC_SECONDS = 60
    settings.INVENTORY_LEASE_SECONDS = 15
    unseen = (
        "no cluster configured in this process (no KUBECONFIG, KUBE_IN_CLUSTER=false, or "
        "KUBE_API_ACCESS=false), so it cannot ask the API server itself"
    )
    assert lease_acquire("watcher:portal-watcher-0:7", 15)
    status, body = readyz(client)
    assert status == 200
    kubernetes = body["checks"]["kubernetes"]
    assert (kubernetes["ok"], kubernetes["required"]) == (True, False)
    assert re.fullmatch(
        rf"{re.escape(unseen)}; the inventory lease was renewed \d+s ago by "
        "watcher:portal-watcher-0:7",
        kubernetes["detail"],
    ), kubernetes
    # The watcher stopped renewing 10 minutes ago: what the pages show may be stale.
    InventoryLease.objects.update(renewed_at=timezone.now() - timedelta(minutes=10))
    status, body = readyz(client)
    kubernetes = body["checks"]["kubernetes"]
    assert (status, kubernetes["ok"]) == (200, False)
    assert re.fullmatch(
        rf"{re.escape(unseen)}; the inventory lease was last renewed 6\d\ds ago \(by "
        r"watcher:portal-watcher-0:7\), over 135s: no watcher or sync reaches the API "
        "server, the nodes shown may be stale",
        kubernetes["error"],
    ), kubernetes
    # Made required, the same answer takes the pod out of the Service.
    settings.READYZ_REQUIRED = ["database", "kubernetes"]
    assert readyz(client)[0] == 503
