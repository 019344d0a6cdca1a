"""The watcher lists DRA's objects every DRA_SYNC_SECONDS while it leads, and the nodes'
DRA units reach their rows without a full sync."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from pools.models import DraSnapshot, Node
from tests.edges.inventory.test_watch_inventory import eventually, watcher
from tests.kubesim_process import Kubesim, kubesim_server


@pytest.fixture
def dra_cluster(settings, tmp_path: Path) -> Iterator[Kubesim]:  # type: ignore[no-untyped-def]
    with kubesim_server(tmp_path / "sim", scenario="dra") as sim:
        settings.KUBECONFIG = str(sim.kubeconfig)
        settings.KUBE_CONTEXT = ""
        yield sim


def dra_units(node: str) -> list[object] | None:
    return Node.objects.filter(name=node).values_list("dra_units", flat=True).first()


@pytest.mark.django_db(transaction=True)
def test_the_watcher_lists_dra_objects_again_and_again(
    dra_cluster: Kubesim, tmp_path: Path
) -> None:
    with watcher(tmp_path, DRA_SYNC_SECONDS="1"):
        eventually(
            lambda: dra_units("h100-dra-000") == [["gpu.nvidia.com", "gpu", "", 4, 0]],
            "the DRA units in the node's row",
        )
        assert dra_units("a100-plugin-000") == []
        first = DraSnapshot.objects.get().listed_at
        eventually(lambda: DraSnapshot.objects.get().listed_at != first, "a second listing")
    assert dra_cluster.count("list", resource="resourceslices") >= 2
