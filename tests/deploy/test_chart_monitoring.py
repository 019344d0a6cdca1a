"""The optional parts: Ingress, NetworkPolicy, ServiceMonitor and PrometheusRule.

ServiceMonitor and PrometheusRule are Prometheus Operator custom resources, absent from the
Kubernetes schemas kubernetes-validate ships; their structure is checked here against the
fields of the operator's monitoring.coreos.com/v1 CRDs the chart uses, and for meaning
(the monitor finds the web Service's port, the rules are the project's rules).
"""

from __future__ import annotations

import re
import shutil
import subprocess
from typing import Any

import jsonschema
import pytest
import yaml

from tests.deploy.chart import (
    CHART,
    NAMESPACE,
    RELEASE,
    ROOT,
    all_on_docs,
    default_docs,
    deployment,
    named,
    of_kind,
    render_error,
)

NAME = f"{RELEASE}-gpu-pool-portal"
CHART_RULES = CHART / "files/rules.yml"
PROJECT_RULES = ROOT / "deploy/prometheus/rules.yml"
OPTIONAL_KINDS = ("Ingress", "NetworkPolicy", "ServiceMonitor", "PrometheusRule")

_SECRET_KEY_SELECTOR = {
    "type": "object",
    "required": ["name", "key"],
    "additionalProperties": False,
    "properties": {"name": {"type": "string", "minLength": 1}, "key": {"type": "string"}},
}
_METADATA = {"type": "object", "required": ["name", "labels"]}
SERVICE_MONITOR = {
    "type": "object",
    "required": ["apiVersion", "kind", "metadata", "spec"],
    "properties": {
        "apiVersion": {"const": "monitoring.coreos.com/v1"},
        "kind": {"const": "ServiceMonitor"},
        "metadata": _METADATA,
        "spec": {
            "type": "object",
            "required": ["selector", "endpoints"],
            "additionalProperties": False,
            "properties": {
                "selector": {"type": "object", "required": ["matchLabels"]},
                "namespaceSelector": {
                    "type": "object",
                    "properties": {"matchNames": {"type": "array", "items": {"type": "string"}}},
                },
                "endpoints": {
                    "type": "array",
                    "minItems": 1,
                    "items": {
                        "type": "object",
                        "additionalProperties": False,
                        "properties": {
                            "port": {"type": "string"},
                            "path": {"type": "string", "pattern": "^/"},
                            "scheme": {"enum": ["http", "https"]},
                            "interval": {"type": "string", "pattern": "^[0-9]+(ms|s|m|h)$"},
                            "scrapeTimeout": {"type": "string", "pattern": "^[0-9]+(ms|s|m|h)$"},
                            # The CRD's RelabelConfig (monitoring.coreos.com/v1).
                            "relabelings": {
                                "type": "array",
                                "items": {
                                    "type": "object",
                                    "additionalProperties": False,
                                    "properties": {
                                        "action": {
                                            "enum": [
                                                "replace",
                                                "keep",
                                                "drop",
                                                "hashmod",
                                                "labelmap",
                                                "labeldrop",
                                                "labelkeep",
                                                "lowercase",
                                                "uppercase",
                                                "keepequal",
                                                "dropequal",
                                            ]
                                        },
                                        "sourceLabels": {
                                            "type": "array",
                                            "items": {"type": "string"},
                                        },
                                        "separator": {"type": "string"},
                                        "targetLabel": {"type": "string"},
                                        "regex": {"type": "string"},
                                        "modulus": {"type": "integer"},
                                        "replacement": {"type": "string"},
                                    },
                                },
                            },
                            "authorization": {
                                "type": "object",
                                "additionalProperties": False,
                                "required": ["credentials"],
                                "properties": {
                                    "type": {"type": "string"},
                                    "credentials": _SECRET_KEY_SELECTOR,
                                },
                            },
                        },
                    },
                },
            },
        },
    },
}
_RULE = {
    "type": "object",
    "required": ["expr"],
    "additionalProperties": False,
    "oneOf": [{"required": ["record"]}, {"required": ["alert"]}],
    "properties": {
        "record": {"type": "string", "pattern": "^[a-zA-Z_:][a-zA-Z0-9_:]*$"},
        "alert": {"type": "string"},
        "expr": {"type": ["string", "integer"]},
        "for": {"type": "string"},
        "labels": {"type": "object"},
        "annotations": {"type": "object"},
    },
}
PROMETHEUS_RULE = {
    "type": "object",
    "required": ["apiVersion", "kind", "metadata", "spec"],
    "properties": {
        "apiVersion": {"const": "monitoring.coreos.com/v1"},
        "kind": {"const": "PrometheusRule"},
        "metadata": _METADATA,
        "spec": {
            "type": "object",
            "required": ["groups"],
            "additionalProperties": False,
            "properties": {
                "groups": {
                    "type": "array",
                    "minItems": 1,
                    "items": {
                        "type": "object",
                        "required": ["name", "rules"],
                        "additionalProperties": False,
                        "properties": {
                            "name": {"type": "string", "minLength": 1},
                            "interval": {"type": "string"},
                            "rules": {"type": "array", "minItems": 1, "items": _RULE},
                        },
                    },
                }
            },
        },
    },
}


def test_optional_parts_are_off_by_default() -> None:
    docs = default_docs()
    for kind in OPTIONAL_KINDS:
        assert of_kind(docs, kind) == [], kind


def test_every_optional_part_renders_when_switched_on() -> None:
    docs = all_on_docs()
    assert [len(of_kind(docs, kind)) for kind in OPTIONAL_KINDS] == [1, 2, 1, 1]


def test_the_ingress_routes_its_hosts_to_the_web_service_with_tls() -> None:
    ingress = named(all_on_docs(), "Ingress", NAME)
    (rule,) = ingress["spec"]["rules"]
    assert rule["host"] == "gpu-portal.example.com"
    backend = rule["http"]["paths"][0]["backend"]["service"]
    assert backend == {"name": NAME, "port": {"name": "http"}}
    assert ingress["spec"]["tls"] == [
        {"secretName": "gpu-portal-tls", "hosts": ["gpu-portal.example.com"]}
    ]
    assert ingress["spec"]["ingressClassName"] == "nginx"


def pod_labels(docs: tuple[dict[str, Any], ...], component: str) -> dict[str, str]:
    return deployment(docs, component)["spec"]["template"]["metadata"]["labels"]


def selects(policy: dict[str, Any], labels: dict[str, str]) -> bool:
    wanted = policy["spec"]["podSelector"]["matchLabels"]
    return all(labels.get(key) == value for key, value in wanted.items())


def test_the_network_policy_allows_only_the_portals_egress() -> None:
    docs = all_on_docs()
    policy = named(docs, "NetworkPolicy", NAME)
    for component in ("web", "worker", "watcher", "beat"):
        assert selects(policy, pod_labels(docs, component)), component
    job = named(docs, "Job", f"{NAME}-migrations")["spec"]["template"]["metadata"]["labels"]
    assert selects(policy, job)
    assert policy["spec"]["policyTypes"] == ["Ingress", "Egress"]
    assert policy["spec"]["ingress"] == []
    ports = {
        (port["port"], port["protocol"])
        for rule in policy["spec"]["egress"]
        for port in rule["ports"]
    }
    assert ports == {
        (443, "TCP"),  # the API server (managed clusters), the OpenID Connect provider
        (6443, "TCP"),  # the API server
        (5432, "TCP"),  # PostgreSQL
        (6379, "TCP"),  # Redis
        (9090, "TCP"),  # Prometheus
        (53, "UDP"),  # DNS
        (53, "TCP"),
    }
    # No rule without destinations: an empty `to` would mean anywhere.
    assert all(rule["to"] for rule in policy["spec"]["egress"])
    assert {"ipBlock": {"cidr": "10.0.0.10/32"}} in policy["spec"]["egress"][0]["to"]


def test_only_the_web_pods_accept_connections_on_their_http_port() -> None:
    docs = all_on_docs()
    web_policy = named(docs, "NetworkPolicy", f"{NAME}-web")
    assert selects(web_policy, pod_labels(docs, "web"))
    for component in ("worker", "watcher", "beat"):
        assert not selects(web_policy, pod_labels(docs, component)), component
    (rule,) = web_policy["spec"]["ingress"]
    assert rule["ports"] == [{"port": "http", "protocol": "TCP"}]
    # The two sources given, and the release's own `helm test` pod.
    assert len(rule["from"]) == 3
    assert rule["from"][2] == {
        "podSelector": {
            "matchLabels": {
                "app.kubernetes.io/instance": "rel",
                "app.kubernetes.io/component": "helm-test",
            }
        }
    }


def test_a_network_policy_without_destinations_is_refused_naming_them() -> None:
    message = render_error(sets=("networkPolicy.enabled=true",))
    assert "networkPolicy.egress.apiServer.to" in message


def test_the_service_monitor_scrapes_the_web_service_with_the_metrics_token() -> None:
    docs = all_on_docs()
    monitor = named(docs, "ServiceMonitor", NAME)
    jsonschema.validate(monitor, SERVICE_MONITOR)
    service = named(docs, "Service", NAME)
    selector = monitor["spec"]["selector"]["matchLabels"]
    assert all(service["metadata"]["labels"].get(k) == v for k, v in selector.items())
    assert monitor["spec"]["namespaceSelector"] == {"matchNames": [NAMESPACE]}
    # The portal's own figures, and each node's pool for the pool rules.
    endpoints = monitor["spec"]["endpoints"]
    assert [endpoint["path"] for endpoint in endpoints] == ["/metrics", "/metrics/pools"]
    # Each endpoint a job of its own, so their targets' `up` series never collide.
    assert "relabelings" not in endpoints[0]
    assert endpoints[1]["relabelings"] == [
        {"action": "replace", "targetLabel": "job", "replacement": f"{NAME}-pools"}
    ]
    for endpoint in endpoints:
        assert endpoint["port"] in {port["name"] for port in service["spec"]["ports"]}
        assert endpoint["authorization"] == {
            "type": "Bearer",
            "credentials": {"name": "gpu-pool-portal", "key": "METRICS_TOKEN"},
        }
    assert monitor["metadata"]["labels"]["release"] == "kube-prometheus-stack"


def test_a_service_monitor_needs_the_metrics_token() -> None:
    message = render_error(sets=("serviceMonitor.enabled=true", "metrics.enabled=false"))
    assert "metrics.enabled" in message


def test_the_prometheus_rule_carries_the_charts_rules_file() -> None:
    rule = named(all_on_docs(), "PrometheusRule", NAME)
    jsonschema.validate(rule, PROMETHEUS_RULE)
    assert rule["spec"]["groups"] == yaml.safe_load(CHART_RULES.read_text())["groups"]


def test_the_structural_checks_refuse_a_broken_custom_resource() -> None:
    rule = named(all_on_docs(), "PrometheusRule", NAME)
    broken = {**rule, "spec": {"groups": [{"name": "g", "rules": [{"record": "x"}]}]}}
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(broken, PROMETHEUS_RULE)
    monitor = named(all_on_docs(), "ServiceMonitor", NAME)
    endpoint = {**monitor["spec"]["endpoints"][0], "bearerTokenSecrett": {}}
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(
            {**monitor, "spec": {**monitor["spec"], "endpoints": [endpoint]}}, SERVICE_MONITOR
        )


def test_the_charts_rules_are_a_copy_of_the_projects_rules() -> None:
    # Helm reads files inside the chart only, so the chart carries a copy.
    assert CHART_RULES.read_bytes() == PROJECT_RULES.read_bytes(), (
        f"run: cp {PROJECT_RULES.relative_to(ROOT)} {CHART_RULES.relative_to(ROOT)}"
    )


def promtool() -> str:
    found = shutil.which("promtool")
    if found is None:
        pytest.skip("promtool is not installed (Debian's prometheus package has it)")
    return found


@pytest.mark.parametrize("rules", [PROJECT_RULES, CHART_RULES], ids=["project", "chart"])
def test_promtool_accepts_the_rules(rules) -> None:  # type: ignore[no-untyped-def]
    result = subprocess.run(
        [promtool(), "check", "rules", str(rules)], capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert re.search(r"SUCCESS: [1-9][0-9]* rules found", result.stdout), result.stdout
