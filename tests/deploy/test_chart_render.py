"""The chart lints, renders, and every object it renders is valid Kubernetes.

The rendered objects are validated against the Kubernetes OpenAPI schemas shipped with
kubernetes-validate, for 1.32 (the kubectl on the development machines) and 1.33 (the
kubectl beside the pinned helm), in strict mode, so a misspelt field fails too. The two
custom resources (ServiceMonitor, PrometheusRule) are not in those schemas:
test_chart_monitoring.py checks their structure instead.
"""

from __future__ import annotations

import copy

import kubernetes_validate
import pytest

from tests.deploy.chart import (
    CHART,
    RELEASE,
    VALUES_ALL,
    all_on_docs,
    default_docs,
    of_kind,
    run_helm,
)

SCHEMA_VERSIONS = ["1.32.0", "1.33.0"]
CUSTOM_KINDS = {"ServiceMonitor", "PrometheusRule"}


@pytest.mark.parametrize("values", [[], ["--values", str(VALUES_ALL)]], ids=["default", "all-on"])
def test_helm_lint_is_clean(values: list[str]) -> None:
    result = run_helm("lint", "--strict", str(CHART), *values)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "1 chart(s) linted, 0 chart(s) failed" in result.stdout
    assert "[WARNING]" not in result.stdout and "[ERROR]" not in result.stdout


@pytest.mark.parametrize("version", SCHEMA_VERSIONS)
@pytest.mark.parametrize("render", [default_docs, all_on_docs], ids=["default", "all-on"])
def test_every_object_is_valid_against_the_kubernetes_schemas(render, version: str) -> None:  # type: ignore[no-untyped-def]
    checked = 0
    for doc in render():
        if doc["kind"] in CUSTOM_KINDS:
            continue
        kubernetes_validate.validate(doc, version, strict=True)
        checked += 1
    assert checked >= 12


def test_the_schema_check_refuses_a_misspelt_field() -> None:
    deployment = copy.deepcopy(of_kind(default_docs(), "Deployment")[0])
    deployment["spec"]["template"]["spec"]["containers"][0]["readOnlyRootFileSystem"] = True
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(deployment, SCHEMA_VERSIONS[-1], strict=True)


def test_default_values_render_exactly_the_core_objects() -> None:
    rendered = {(doc["kind"], doc["metadata"]["name"]) for doc in default_docs()}
    name = f"{RELEASE}-gpu-pool-portal"
    assert rendered == {
        ("ServiceAccount", name),
        ("ConfigMap", name),
        ("ClusterRole", f"gpu-portal-{name}"),
        ("ClusterRoleBinding", f"gpu-portal-{name}"),
        ("Service", name),
        ("PodDisruptionBudget", f"{name}-web"),
        ("Deployment", f"{name}-web"),
        ("Deployment", f"{name}-worker"),
        ("Deployment", f"{name}-watcher"),
        ("Deployment", f"{name}-beat"),
        ("ConfigMap", f"{name}-migrations"),
        ("Job", f"{name}-migrations"),
        ("Pod", f"{name}-test-web"),  # helm test
    }


def test_every_option_on_adds_exactly_the_optional_objects() -> None:
    default = {(doc["kind"], doc["metadata"]["name"]) for doc in default_docs()}
    everything = {(doc["kind"], doc["metadata"]["name"]) for doc in all_on_docs()}
    name = f"{RELEASE}-gpu-pool-portal"
    assert everything - default == {
        ("Ingress", name),
        ("NetworkPolicy", name),
        ("NetworkPolicy", f"{name}-web"),
        ("ServiceMonitor", name),
        ("PrometheusRule", name),
        ("HorizontalPodAutoscaler", f"{name}-web"),
    }
    assert default <= everything
