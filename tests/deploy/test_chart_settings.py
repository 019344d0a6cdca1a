"""The settings the chart gives the portal: the names it reads, values it accepts."""

from __future__ import annotations

import re
import subprocess
import sys
from typing import Any

import pytest

from tests.deploy.chart import (
    RELEASE,
    ROOT,
    all_on_docs,
    containers,
    default_docs,
    deployment,
    named,
    render,
    render_error,
)

CONFIG = f"{RELEASE}-gpu-pool-portal"
OIDC_SETTINGS = {
    "OIDC_RP_CLIENT_ID",
    "OIDC_OP_AUTHORIZATION_ENDPOINT",
    "OIDC_OP_TOKEN_ENDPOINT",
    "OIDC_OP_USER_ENDPOINT",
    "OIDC_OP_JWKS_ENDPOINT",
    "OIDC_RP_SIGN_ALGO",
    "OIDC_ROLE_MAP",
    "OIDC_GROUPS_CLAIM",
}
# Stand-ins for what the Secrets hold, in the shapes the portal parses.
SECRET_STAND_INS = {
    "DJANGO_SECRET_KEY": "chart-test-" + "k3y" * 20,
    "DATABASE_URL": "postgres://portal:pw@postgres.db.svc:5432/portal",
    "CELERY_BROKER_URL": "redis://:pw@redis.db.svc:6379/0",
    "CACHE_URL": "redis://:pw@redis.db.svc:6379/1",
    "METRICS_TOKEN": "chart-test-metrics-token",
    "OIDC_RP_CLIENT_SECRET": "chart-test-client-secret",
    "PROMETHEUS_BEARER_TOKEN": "chart-test-prometheus-token",
}


def config_data(docs: tuple[dict[str, Any], ...]) -> dict[str, str]:
    return named(docs, "ConfigMap", CONFIG)["data"]


def test_the_config_map_carries_the_settings_other_parts_read() -> None:
    data = config_data(default_docs())
    assert data["KUBE_IN_CLUSTER"] == "true"
    assert data["DJANGO_DEBUG"] == "false"
    assert data["LOG_FORMAT"] == "json"
    assert data["DCGM_NODE_LABEL"] == "Hostname"
    assert data["POOL_LABEL_KEY"] == "gpu-pool"
    assert data["LOCAL_LOGIN_ENABLED"] == "true"
    assert data["DJANGO_BEHIND_TLS_PROXY"] == "true"
    for name in ("PROMETHEUS_URL", "DJANGO_CSRF_TRUSTED_ORIGINS"):
        assert name in data
    assert not OIDC_SETTINGS & set(data)


def test_single_sign_on_settings_appear_when_it_is_on() -> None:
    data = config_data(all_on_docs())
    assert set(data) >= OIDC_SETTINGS
    assert data["OIDC_ROLE_MAP"] == "gpu-admins=pool-admins,ml-leads=approvers"
    assert data["OIDC_GROUPS_CLAIM"] == "groups"
    assert data["OIDC_RP_SIGN_ALGO"] == "RS256"
    assert data["LOCAL_LOGIN_ENABLED"] == "false"
    assert data["LOG_FORMAT"] == "text"
    assert data["PROMETHEUS_URL"] == "http://prometheus-operated.monitoring.svc:9090"
    assert data["DCGM_NODE_LABEL"] == "hostname"


def test_the_cluster_and_its_querier_label_reach_the_config_map() -> None:
    assert not {"CLUSTER_NAME", "PROMETHEUS_CLUSTER_LABEL"} & set(config_data(default_docs()))
    data = config_data(
        render(
            sets=(
                "config.clusterName=eu-west",
                "config.prometheusClusterLabel=cluster",
                "config.prometheusClusterValue=prod-eu-1",
            )
        )
    )
    assert (data["CLUSTER_NAME"], data["PROMETHEUS_CLUSTER_LABEL"]) == ("eu-west", "cluster")
    assert data["PROMETHEUS_CLUSTER_VALUE"] == "prod-eu-1"
    assert "/config/clusterName" in render_error(sets=("config.clusterName=EU_west",))
    assert "/config/prometheusClusterLabel" in render_error(
        sets=("config.prometheusClusterLabel=k8s-cluster",)
    )


def test_single_sign_on_without_its_settings_is_refused_naming_them() -> None:
    message = render_error(sets=("oidc.enabled=true",))
    assert "oidc.clientId" in message


def test_ingress_hosts_become_allowed_hosts_and_trusted_origins() -> None:
    docs = all_on_docs()
    assert config_data(docs)["DJANGO_CSRF_TRUSTED_ORIGINS"] == (
        "https://gpu-portal.internal.example.com,https://gpu-portal.example.com"
    )
    for where, container in containers(docs):
        env = {item["name"]: item for item in container["env"]}
        assert env["DJANGO_ALLOWED_HOSTS"]["value"] == (
            "gpu-portal.internal.example.com,gpu-portal.example.com,"
            f"{RELEASE}-gpu-pool-portal.gpu-portal.svc,$(POD_IP)"
        ), where


def test_extra_env_reaches_every_container() -> None:
    for where, container in containers(all_on_docs()):
        env = {item["name"]: item for item in container["env"]}
        assert env["INVENTORY_SYNC_SECONDS"]["value"] == "60", where
        assert env["PROMETHEUS_BEARER_TOKEN"]["valueFrom"]["secretKeyRef"]["key"] == "token", where


def test_bad_values_are_refused_naming_the_field() -> None:
    assert "/config/logFormat" in render_error(sets=("config.logFormat=xml",))
    assert "/config/dcgmNodeLabel" in render_error(sets=("config.dcgmNodeLabel=node-name",))
    assert "/config/readyzRequired" in render_error(sets=("config.readyzRequired={disk}",))
    assert "ingress.hosts" in render_error(sets=("ingress.enabled=true",))


def environment(container: dict[str, Any], config: dict[str, str]) -> dict[str, str]:
    """What the kubelet would give the container, with stand-ins for the secrets."""
    env = dict(config)
    for item in container["env"]:
        if "value" in item:
            env[item["name"]] = re.sub(r"\$\((\w+)\)", lambda m: env[m.group(1)], item["value"])
        elif "fieldRef" in item["valueFrom"]:
            env[item["name"]] = "10.42.0.7"
        else:
            env[item["name"]] = SECRET_STAND_INS[item["name"]]
    return env


@pytest.mark.parametrize(
    "render_docs",
    [default_docs, all_on_docs, lambda: render(sets=("config.behindTlsProxy=false",))],
    ids=["default", "all-on", "no-proxy"],
)
def test_the_portal_accepts_the_charts_settings_and_passes_the_deploy_checks(render_docs) -> None:  # type: ignore[no-untyped-def]
    docs = render_docs()
    container = deployment(docs, "web")["spec"]["template"]["spec"]["containers"][0]
    env = environment(container, config_data(docs))
    result = subprocess.run(
        [sys.executable, "manage.py", "check", "--deploy", "--fail-level", "WARNING"],
        cwd=ROOT,
        env={"PATH": "/usr/bin:/bin", "DJANGO_SETTINGS_MODULE": "portal.settings", **env},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    # The pod's own IP is an allowed host, so probes and scrapes are not refused.
    assert "10.42.0.7" in env["DJANGO_ALLOWED_HOSTS"].split(",")


def test_a_redis_outage_does_not_take_the_web_pods_out_of_the_service() -> None:
    """The readiness probe fails only on what makes a web pod useless: the database. With
    Redis down the pages answer, degraded; requiring the broker would empty the Service."""
    assert config_data(default_docs())["READYZ_REQUIRED"] == "database"
    chosen = render(sets=("config.readyzRequired={database,broker,pool_definitions}",))
    assert config_data(chosen)["READYZ_REQUIRED"] == "database,broker,pool_definitions"
