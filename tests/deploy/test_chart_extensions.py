"""What an install on a real cluster needs beyond the defaults: the image pinned by digest,
extra volumes (a private CA), pod labels, the notes `helm install` prints, `helm test`, and
an optional HorizontalPodAutoscaler for the web pods."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.deploy.chart import (
    CHART,
    NAMESPACE,
    RELEASE,
    all_on_docs,
    default_docs,
    deployment,
    named,
    of_kind,
    pod_specs,
    render,
    render_error,
    run_helm,
)
from tests.edges.portal.test_ipv6_hosts import gunicorn_at
from tests.workers import ROOT

NAME = f"{RELEASE}-gpu-pool-portal"
DIGEST = "sha256:" + "0123456789abcdef" * 4


def pods(docs: tuple[dict[str, Any], ...]) -> list[tuple[str, dict[str, Any]]]:
    return list(pod_specs(docs))


def test_the_image_can_be_pinned_by_digest() -> None:
    docs = render(sets=(f"image.digest={DIGEST}", "image.tag=ignored"))
    images = {c["image"] for _, spec in pods(docs) for c in spec["containers"]}
    images |= {c["image"] for c in named(docs, "Pod", f"{NAME}-test-web")["spec"]["containers"]}
    assert images == {f"gpu-pool-portal@{DIGEST}"}
    assert "at '/image/digest'" in render_error(sets=("image.digest=latest",))
    assert "at '/image/digest'" in render_error(sets=("image.digest=sha256:abc",))


def test_extra_volumes_reach_every_portal_pod_and_container() -> None:
    docs = all_on_docs()
    assert len(pods(docs)) == 5
    for where, spec in pods(docs):
        volumes = {v["name"]: v for v in spec["volumes"]}
        assert volumes["private-ca"] == {"name": "private-ca", "configMap": {"name": "private-ca"}}
        assert "tmp" in volumes, where  # the chart's own are kept
        for container in spec["containers"]:
            mounts = {m["mountPath"]: m for m in container["volumeMounts"]}
            assert mounts["/etc/portal/ca"] == {
                "name": "private-ca",
                "mountPath": "/etc/portal/ca",
                "readOnly": True,
            }, where
            assert "/tmp" in mounts, where


def test_pod_labels_go_on_the_pods_never_on_the_selectors() -> None:
    docs = all_on_docs()
    for component in ("web", "worker", "watcher", "beat"):
        workload = deployment(docs, component)
        assert workload["spec"]["template"]["metadata"]["labels"]["example.com/team"] == "platform"
        assert "example.com/team" not in workload["spec"]["selector"]["matchLabels"]
    job = named(docs, "Job", f"{NAME}-migrations")
    assert job["spec"]["template"]["metadata"]["labels"]["example.com/team"] == "platform"
    service = named(docs, "Service", NAME)
    assert "example.com/team" not in service["spec"]["selector"]
    error = render_error(sets=("podLabels.app\\.kubernetes\\.io/component=mine",))
    assert "podLabels.app.kubernetes.io/component: the chart sets app.kubernetes.io/*" in error


def notes(*sets: str) -> str:
    args = ["install", RELEASE, str(CHART), "--namespace", NAMESPACE, "--dry-run=client"]
    for item in sets:
        args += ["--set", item]
    result = run_helm(*args)
    assert result.returncode == 0, result.stderr
    return result.stdout.split("NOTES:\n", 1)[1]


def test_the_install_notes_say_how_to_check_and_reach_it() -> None:
    text = notes()
    assert f"helm test -n {NAMESPACE} {RELEASE}" in text
    assert f"port-forward svc/{NAME} 8080:80" in text
    assert "config.prometheusUrl is empty" in text
    text = notes(
        "ingress.enabled=true",
        "ingress.hosts[0].host=portal.example.com",
        "config.prometheusUrl=http://prometheus:9090",
    )
    assert "https://portal.example.com/" in text
    assert "port-forward" not in text and "prometheusUrl is empty" not in text


def test_helm_test_asks_the_web_service_as_a_restricted_pod() -> None:
    docs = default_docs()
    pod = named(docs, "Pod", f"{NAME}-test-web")
    assert pod["metadata"]["annotations"]["helm.sh/hook"] == "test"
    spec = pod["spec"]
    assert spec["restartPolicy"] == "Never" and spec["automountServiceAccountToken"] is False
    assert spec["securityContext"]["runAsNonRoot"] is True
    (container,) = spec["containers"]
    assert container["securityContext"]["readOnlyRootFilesystem"] is True
    assert container["securityContext"]["capabilities"] == {"drop": ["ALL"]}
    # Not selected by the portal's own NetworkPolicy (its egress stays open), let into the
    # web pods' one.
    web_selector = deployment(docs, "web")["spec"]["selector"]["matchLabels"]
    labels = pod["metadata"]["labels"]
    assert not all(labels.get(k) == v for k, v in web_selector.items())
    assert labels["app.kubernetes.io/component"] == "helm-test"


@pytest.mark.django_db(transaction=True)
def test_helm_tests_script_passes_against_the_web_as_the_chart_configures_it(
    tmp_path: Path,
) -> None:
    """The test pod's own script, run against gunicorn with the chart's settings: its
    request (the Service's in-cluster name as Host) is one the portal accepts."""
    docs = default_docs()
    (container,) = named(docs, "Pod", f"{NAME}-test-web")["spec"]["containers"]
    script = container["command"][2]
    web = deployment(docs, "web")["spec"]["template"]["spec"]["containers"][0]
    env = {e["name"]: e["value"] for e in web["env"] if "value" in e}
    config = named(docs, "ConfigMap", NAME)["data"]
    settings = {
        "DJANGO_ALLOWED_HOSTS": env["DJANGO_ALLOWED_HOSTS"].replace("$(POD_IP)", "127.0.0.1"),
        "DJANGO_SECURE_SSL_REDIRECT": config["DJANGO_SECURE_SSL_REDIRECT"],
        "READYZ_REQUIRED": config["READYZ_REQUIRED"],
        "DJANGO_BEHIND_TLS_PROXY": config["DJANGO_BEHIND_TLS_PROXY"],
    }
    service = f"{NAME}.{NAMESPACE}.svc"
    with gunicorn_at(tmp_path, "127.0.0.1", **settings) as url:
        port = url.rsplit(":", 1)[1]
        local = script.replace(f"http://{service}:80", f"http://{service}:{port}")
        # The cluster's DNS, here: the Service's name is this machine.
        resolve = (
            "import socket\n"
            "lookup = socket.getaddrinfo\n"
            f"socket.getaddrinfo = lambda host, *a, **k: lookup("
            f"'127.0.0.1' if host == {service!r} else host, *a, **k)\n"
        )
        result = subprocess.run(
            [sys.executable, "-c", resolve + local],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
    assert result.returncode == 0, result.stdout + result.stderr
    assert re.findall(r"/(healthz|readyz): 200", result.stdout) == ["healthz", "readyz"]


def test_the_web_pods_can_scale_on_cpu() -> None:
    docs = all_on_docs()
    hpa = named(docs, "HorizontalPodAutoscaler", f"{NAME}-web")
    assert hpa["spec"]["scaleTargetRef"] == {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "name": f"{NAME}-web",
    }
    assert (hpa["spec"]["minReplicas"], hpa["spec"]["maxReplicas"]) == (3, 8)
    assert hpa["spec"]["metrics"][0]["resource"]["target"]["averageUtilization"] == 60
    assert "replicas" not in deployment(docs, "web")["spec"]  # the autoscaler owns it
    assert deployment(default_docs(), "web")["spec"]["replicas"] == 2
    assert of_kind(default_docs(), "HorizontalPodAutoscaler") == []
    on = "web.autoscaling.enabled=true"
    assert "at '/web/autoscaling/minReplicas'" in render_error(
        sets=(on, "web.autoscaling.minReplicas=1")
    )
    assert "web.autoscaling.maxReplicas: 3 is below minReplicas (4)" in render_error(
        sets=(on, "web.autoscaling.minReplicas=4", "web.autoscaling.maxReplicas=3")
    )
    # The disruption budget is held against the fewest web pods the autoscaler keeps.
    assert "is not below web.autoscaling.minReplicas (2)" in render_error(
        sets=(on, "web.podDisruptionBudget.minAvailable=2")
    )


GUIDE = (ROOT / "docs/deploy.md").read_text()


@pytest.mark.parametrize(
    ("section", "says"),
    [
        ("## 11. Backup and restore", ("pg_dump --format=custom", "pg_restore --clean")),
        ("## 12. Sizing by node count", ("| GPU nodes |", "15,000")),
        ("## 13. High availability", ("two pods or more", "Redis Sentinel is not supported")),
        ("### Notes for each version", ("config.readyzRequired", "heartbeatMaxAgeSeconds")),
        ("### The Prometheus Operator objects", ("prometheusRule.labels: {release:",)),
        ("## 8. Network policy", ("EMAIL_PORT", "NOTIFY_WEBHOOK_URL", "extraEgress")),
    ],
)
def test_the_deploy_guide_covers_running_it_for_real(section: str, says: tuple[str, ...]) -> None:
    assert section in GUIDE
    body = GUIDE.split(section, 1)[1].split("\n## ", 1)[0]
    for text in says:
        assert text in body, (section, text)
