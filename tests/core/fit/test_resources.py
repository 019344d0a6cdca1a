"""A pod's request as the scheduler adds it up, and the API server's rules on requests/limits."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pools.core.fit.fields import FieldReader
from pools.core.fit.resources import Resources, read_pod_resources

GI = 2**30


def container(
    limits: dict[str, Any] | None = None, requests: dict[str, Any] | None = None, **extra: Any
) -> dict[str, Any]:
    resources: dict[str, Any] = {}
    if limits is not None:
        resources["limits"] = limits
    if requests is not None:
        resources["requests"] = requests
    return {"name": "c", "image": "i", "resources": resources, **extra}


def requests_of(spec: dict[str, Any]) -> Resources:
    reader = FieldReader()
    result = read_pod_resources(reader, spec, "spec")
    assert reader.problems == []
    return result.requests


def test_limits_default_requests_per_resource() -> None:
    spec = {
        "containers": [container({"nvidia.com/gpu": 2, "cpu": "4", "memory": "8Gi"}, {"cpu": "1"})]
    }
    assert requests_of(spec) == Resources(1000, 8 * GI, 2)


def test_app_containers_add_up() -> None:
    spec = {
        "containers": [
            container(requests={"cpu": "500m"}),
            container(requests={"cpu": "1.5", "memory": "1Gi"}),
        ]
    }
    assert requests_of(spec) == Resources(2000, GI, 0)


def test_init_containers_take_the_larger_per_resource() -> None:
    # The example of the scheduler's own comment: CPU 3, memory 3G.
    spec = {
        "initContainers": [
            container(requests={"cpu": "2", "memory": "1G"}),
            container(requests={"cpu": "2", "memory": "3G"}),
        ],
        "containers": [
            container(requests={"cpu": "2", "memory": "1G"}),
            container(requests={"cpu": "1", "memory": "1G"}),
        ],
    }
    assert requests_of(spec) == Resources(3000, 3 * 10**9, 0)


def test_an_init_container_asking_for_more_gpus_raises_the_pod_request() -> None:
    spec = {
        "initContainers": [container({"nvidia.com/gpu": 8})],
        "containers": [container({"nvidia.com/gpu": 1})],
    }
    assert requests_of(spec).gpu == 8


def test_sidecars_run_next_to_the_app_and_later_init_containers() -> None:
    sidecar = container(requests={"cpu": "1"}, restartPolicy="Always")
    spec = {
        "initContainers": [sidecar, container(requests={"cpu": "3"})],
        "containers": [container(requests={"cpu": "1"})],
    }
    # App 1 + sidecar 1 = 2; the init container runs next to the sidecar: 3 + 1 = 4.
    assert requests_of(spec).cpu_milli == 4000


def test_overhead_is_added() -> None:
    spec = {
        "containers": [container(requests={"cpu": "1"})],
        "overhead": {"cpu": "250m", "memory": "120Mi"},
    }
    assert requests_of(spec) == Resources(1250, 120 * 2**20, 0)


def test_other_resources_are_kept_by_name() -> None:
    spec = {"containers": [container({"rdma/hca": 1, "ephemeral-storage": "10Gi"})]}
    assert requests_of(spec).extended == (("ephemeral-storage", 10 * GI), ("rdma/hca", 1))


@given(
    st.lists(st.integers(0, 64), min_size=1, max_size=4), st.lists(st.integers(0, 64), max_size=3)
)
def test_gpu_request_is_max_of_app_sum_and_each_init(app: list[int], init: list[int]) -> None:
    spec = {
        "containers": [container({"nvidia.com/gpu": n}) for n in app],
        "initContainers": [container({"nvidia.com/gpu": n}) for n in init],
    }
    assert requests_of(spec).gpu == max([sum(app), *init])


def findings_of(resources: dict[str, Any]) -> list[str]:
    """What is said about the resources: warnings, and the refusals (negative amounts and
    fractional GPUs are refused outright since issue 25, R7: -1 GPU "fitted")."""
    spec = {"containers": [{"name": "c", "image": "i", "resources": resources}]}
    reader = FieldReader()
    result = read_pod_resources(reader, spec, "spec")
    return [f.message for f in result.findings] + [
        f"{p.path}: {p.message}" for p in reader.problems
    ]


@pytest.mark.parametrize(
    ("resources", "message"),
    [
        (
            {"limits": {"nvidia.com/gpu": 2}, "requests": {"nvidia.com/gpu": 1}},
            'spec.containers[0].resources.requests: Invalid value: "1": must be equal to '
            "nvidia.com/gpu limit of 2",
        ),
        (
            {"requests": {"nvidia.com/gpu": 1}},
            "spec.containers[0].resources.limits: Required value: Limit must be set for non "
            "overcommitable resources (nvidia.com/gpu is requested without a limit)",
        ),
        (
            {"limits": {"cpu": "1"}, "requests": {"cpu": "2"}},
            'spec.containers[0].resources.requests: Invalid value: "2": must be less than or '
            "equal to cpu limit of 1",
        ),
        (
            {"limits": {"nvidia.com/gpu": "500m"}},
            'spec.containers[0].resources.limits[nvidia.com/gpu]: Invalid value: "500m": must be '
            "an integer",
        ),
        (
            {"requests": {"memory": "-1Gi"}},
            'spec.containers[0].resources.requests[memory]: Invalid value: "-1Gi": must be greater '
            "than or equal to 0",
        ),
        (
            {"limits": {"gpu": 1}},
            'spec.containers[0].resources.limits[gpu]: Invalid value: "gpu": must be a standard '
            "resource for containers",
        ),
    ],
)
def test_the_api_servers_refusals(resources: dict[str, Any], message: str) -> None:
    assert message in findings_of(resources)


def test_equal_requests_and_limits_and_cpu_overcommit_are_fine() -> None:
    assert (
        findings_of(
            {
                "limits": {"nvidia.com/gpu": 2, "cpu": "4"},
                "requests": {"nvidia.com/gpu": "2", "cpu": "1"},
            }
        )
        == []
    )


def test_limit_without_request_is_noted_for_gpus() -> None:
    spec = {
        "containers": [
            container({"nvidia.com/gpu": 1}),
            container({"nvidia.com/gpu": 1}, {"nvidia.com/gpu": 1}),
        ]
    }
    result = read_pod_resources(FieldReader(), spec, "spec")
    assert result.gpu_limit_only == ["spec.containers[0]"]


def test_a_value_that_is_not_a_quantity_is_a_problem_with_its_path() -> None:
    reader = FieldReader()
    read_pod_resources(
        reader, {"containers": [container({"nvidia.com/gpu": "two"})]}, "spec.template.spec"
    )
    assert [str(p) for p in reader.problems] == [
        'spec.template.spec.containers[0].resources.limits[nvidia.com/gpu]: "two" is not a '
        "quantity: quantities must match the regular expression "
        "'^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'"
    ]
