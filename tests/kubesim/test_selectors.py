"""Pod field selectors and label selectors as apimachinery parses them (issue 12.12)."""

from __future__ import annotations

import json

import pytest
from kubernetes.client.exceptions import ApiException

from tests.kubesim.conftest import kubectl, needs_kubectl
from tests.kubesim_process import Kubesim

NOTEBOOK = "notebook-a100-reserve-000"


def pod_names(sim: Kubesim, selector: str) -> list[str]:
    pods = sim.core().list_pod_for_all_namespaces(field_selector=selector)
    return sorted(p.metadata.name for p in pods.items)


def test_the_pod_fields_the_real_server_selects_on(kubesim_shared: Kubesim) -> None:
    pod = kubesim_shared.core().read_namespaced_pod(NOTEBOOK, "research")
    total = len(pod_names(kubesim_shared, ""))
    assert len(pod_names(kubesim_shared, "spec.schedulerName=default-scheduler")) == total
    # The GPU operator's DaemonSet pods run as their own service accounts, always restarted.
    daemons = pod_names(kubesim_shared, "metadata.namespace=gpu-operator")
    assert len(daemons) == 50
    assert len(pod_names(kubesim_shared, "spec.serviceAccountName=default")) == total - 50
    assert len(pod_names(kubesim_shared, "spec.hostNetwork=false")) == total
    assert pod_names(kubesim_shared, "spec.restartPolicy=Always") == daemons
    assert pod_names(kubesim_shared, f"status.podIP={pod.status.pod_ip}") == [NOTEBOOK]
    # Pending pods have no IP and were nominated nowhere.
    assert pod_names(kubesim_shared, "status.podIP=,status.phase=Pending") == [
        "big-train",
        "eval-job-2",
    ]
    assert len(pod_names(kubesim_shared, "status.nominatedNodeName=")) == total
    # Old clients' spec.host is spec.nodeName.
    assert NOTEBOOK in pod_names(kubesim_shared, "spec.host=a100-reserve-000")


@pytest.mark.parametrize(
    ("selector", "message"),
    [
        ("spec.bogus=1", "field label not supported: spec.bogus"),
        # No whitespace is trimmed: the field is "spec.nodeName ".
        ("spec.nodeName = x", "field label not supported: spec.nodeName "),
        ("spec.nodeName", "invalid selector: 'spec.nodeName'; can't understand 'spec.nodeName'"),
        ("spec.nodeName=a\\x", "invalid field selector: invalid escape sequence: \\x"),
    ],
)
def test_field_selector_errors(kubesim_shared: Kubesim, selector: str, message: str) -> None:
    with pytest.raises(ApiException) as caught:
        kubesim_shared.core().list_pod_for_all_namespaces(field_selector=selector)
    assert caught.value.status == 400
    assert json.loads(caught.value.body)["message"] == message


@pytest.mark.parametrize(
    ("selector", "expected"),
    [
        ("nvidia.com/gpu.count>4", 23),
        ("nvidia.com/gpu.count<5", 2),
        ("gpu-pool in (training,inference),!batch-scheduling", 8),
        ("gpu-pool notin (mixed),gpu-pool", 13),
        ("gpu-pool in ()", 0),
    ],
)
def test_set_based_label_selectors(kubesim_shared: Kubesim, selector: str, expected: int) -> None:
    assert len(kubesim_shared.core().list_node(label_selector=selector).items) == expected


@pytest.mark.parametrize(
    ("selector", "message"),
    [
        (
            "nvidia.com/gpu.count>many",
            "unable to parse requirement: values[0]: Invalid value: \"many\": for 'Gt', 'Lt' "
            "operators, the value must be an integer",
        ),
        (
            "gpu-pool training",
            "unable to parse requirement: found 'training', expected: in, notin, =, ==, !=, gt, lt",
        ),
        ("gpu-pool=a,", "found '', expected: identifier after ','"),
        (
            "gpu-pool in (a",
            "unable to parse requirement: found '', expected: ',' or ')'",
        ),
    ],
)
def test_label_selector_errors(kubesim_shared: Kubesim, selector: str, message: str) -> None:
    with pytest.raises(ApiException) as caught:
        kubesim_shared.core().list_node(label_selector=selector)
    assert caught.value.status == 400
    assert json.loads(caught.value.body)["message"] == message


@needs_kubectl
def test_kubectl_selects_by_set_and_field(tls_kubesim: Kubesim) -> None:
    rows = kubectl(
        tls_kubesim, "get", "nodes", "-l", "nvidia.com/gpu.count<5", "--no-headers"
    ).stdout.splitlines()
    assert [r.split()[0] for r in rows] == ["gpu-new-000", "gpu-new-001"]
    pods = kubectl(
        tls_kubesim,
        "get",
        "pods",
        "-A",
        "--field-selector",
        "status.phase=Pending,spec.schedulerName=default-scheduler",
        "--no-headers",
    ).stdout.splitlines()
    assert len(pods) == 2
