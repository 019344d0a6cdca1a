"""Pods asking for MIG instances and shared GPUs on kubesim's `devices` scenario: nodes of
single- and mixed-strategy MIG, time-sliced and MPS GPUs (renamed nvidia.com/gpu.shared)
and whole GPUs. The inventory counts each node's physical GPUs and units by kind; the
portal's fit check places each pod where kubesim's scheduler binds it, or refuses it with
the scheduler's reasons. (The real control plane's nodes are the demo scenario's, of whole
GPUs: there the agreement on a resource no node offers is in test_kubesim_agreement.)"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from pools.fit.service import fit_check_run
from pools.inventory import inventory_sync
from pools.models import Node
from tests.edges.fit.test_fit_kubesim import TOLERATE_INFERENCE, create, gpu_pod, reasons_of
from tests.kubesim_process import Kubesim, kubesim_server

pytestmark = pytest.mark.django_db
POOL_KEY = "gpu-pool"


@pytest.fixture
def devices(tmp_path, settings) -> Iterator[Kubesim]:  # type: ignore[no-untyped-def]
    with kubesim_server(tmp_path, scenario="devices") as sim:
        settings.KUBECONFIG = str(sim.kubeconfig)
        settings.KUBE_CONTEXT = ""
        settings.KUBE_IN_CLUSTER = False
        inventory_sync()
        yield sim


def asking(name: str, limits: dict[str, str], **placement: Any) -> dict[str, Any]:
    pod = gpu_pod(name, 0, **placement)
    pod["spec"]["containers"][0]["resources"] = {"limits": limits}
    return pod


def test_the_inventory_counts_each_shape(devices: Kubesim) -> None:
    def shape(name: str) -> tuple[int, list[tuple[str, str, int]], int]:
        node = Node.objects.get(name=name)
        record = node.device_set()
        units = [(u.kind.kind, u.kind.label, u.allocatable) for u in record.units]
        return record.gpus, units, record.exporter_devices

    assert shape("a100-mig-000") == (8, [("mig", "MIG 1g.10gb", 56)], 56)
    gpus, units, exported = shape("h100-mig-000")
    assert (gpus, units, exported) == (8, [("mig", "MIG 1g.10gb", 56)], 56)
    gpus, units, exported = shape("l40s-ts-000")
    assert units == [("shared", "shared GPU (time-slicing, 4 per GPU)", 4 * gpus)]
    assert exported == gpus  # the exporter reports each GPU once
    gpus, units, _ = shape("l4-mps-000")
    assert units == [("shared", "shared GPU (mps, 4 per GPU)", 4 * gpus)]
    assert shape("h100-whole-000")[1] == [("gpu", "whole GPU", 8)]
    # What the scenario's pods hold is counted per kind.
    mixed = Node.objects.get(name="h100-mig-000").device_set()
    assert (
        mixed.units[0].allocated
        == Node.objects.get(name="h100-mig-000").resources_requested["nvidia.com/mig-1g.10gb"]
        > 0
    )


@pytest.mark.parametrize(
    "pod",
    [
        asking("one-slice", {"nvidia.com/mig-1g.10gb": "1"}, tolerations=TOLERATE_INFERENCE),
        asking("many-slices", {"nvidia.com/mig-1g.10gb": "60"}, tolerations=TOLERATE_INFERENCE),
        asking("bigger-slice", {"nvidia.com/mig-4g.71gb": "1"}, tolerations=TOLERATE_INFERENCE),
        asking("mps-share", {"nvidia.com/gpu.shared": "2"}, tolerations=TOLERATE_INFERENCE),
        asking("time-slice", {"nvidia.com/gpu": "3"}, selector={POOL_KEY: "mixed"}),
        asking("slice-untolerated", {"nvidia.com/mig-1g.10gb": "1"}),
    ],
    ids=lambda pod: pod["metadata"]["name"],
)
def test_the_fit_check_places_units_as_the_scheduler_does(
    devices: Kubesim, pod: dict[str, Any]
) -> None:
    check = fit_check_run(manifest=json.dumps(pod))
    (verdict,) = check.report.workloads[0].cluster
    node, message = create(devices, pod)
    assert (node is not None) == verdict.fits, (node, message, verdict)
    if node is not None:
        assert node in verdict.nodes_fit
    else:
        assert message.startswith(f"0/{verdict.nodes_total} nodes are available: ")
        assert reasons_of(message) == dict(verdict.reasons)
