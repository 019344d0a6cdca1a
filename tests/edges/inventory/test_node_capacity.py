"""Node capacity in the inventory, from kubesim: the sync and the watcher keep each node's
CPU and memory capacity beside its allocatable, and its pod slots; the readiness check "nodes
reserve CPU and memory for system daemons" passes or fails per node from them. The demo's
nodes advertise allocatable equal to capacity (nothing reserved) until a test reserves some."""

from __future__ import annotations

from pathlib import Path

import pytest
from django.test import Client
from django.utils import timezone

from pools.fit.cluster import fit_cluster
from pools.insights.gather import pool_readiness
from pools.inventory import inventory_sync
from pools.models import Node, Pool
from tests.edges.inventory.test_watch_inventory import eventually, listed, watcher
from tests.kubesim_process import Kubesim
from tests.moves_helpers import user_in

# The cluster is kubesim's API server, then the real control plane.
pytestmark = pytest.mark.both_backends

GIB = 1024**3


def reserve(cluster: Kubesim, node: str, *, cpu: str, memory: str, pods: str = "110") -> None:
    """What a kubelet with systemReserved/kubeReserved reports: allocatable below capacity."""
    cluster.core().patch_node_status(
        node, {"status": {"allocatable": {"cpu": cpu, "memory": memory, "pods": pods}}}
    )


def reserved_check(pool: str) -> dict[str, object]:
    checks = pool_readiness(Pool.objects.get(name=pool), now=timezone.now())
    check = next(c for c in checks if c.name == "system_reserved")
    return {"status": str(check.status), "concerned": check.concerned, "detail": check.detail}


@pytest.mark.django_db
def test_the_sync_stores_capacity_allocatable_and_pod_slots(cluster: Kubesim) -> None:
    reserve(cluster, "a100-train-001", cpu="93", memory="1030Gi", pods="64")
    inventory_sync()
    node = Node.objects.get(name="a100-train-001")
    assert (node.cpu_capacity_milli, node.cpu_allocatable_milli) == (96_000, 93_000)
    assert (node.memory_capacity_bytes, node.memory_allocatable_bytes) == (
        1056 * GIB,
        1030 * GIB,
    )
    assert node.pods_allocatable == 64
    assert Node.objects.get(name="a100-train-000").pods_allocatable == 110
    # The fit check counts the node's own pod slots.
    snapshot = fit_cluster().snapshot
    slots = {n.name: n.max_pods for n in snapshot.nodes}
    assert (slots["a100-train-001"], slots["a100-train-000"]) == (64, 110)


@pytest.mark.django_db
def test_the_check_lists_the_nodes_that_reserve_nothing(cluster: Kubesim) -> None:
    inventory_sync()
    drifted = "a100-train-drift-000"
    check = reserved_check("training")
    assert check["status"] == "fail"
    assert check["concerned"] == [f"{drifted} (CPU: nothing reserved; memory: nothing reserved)"]
    viewer = Client()
    viewer.force_login(user_in("viewers", "capacity-viewer"))
    page = viewer.get("/pools/training/insights/").content.decode()
    row = page.split('data-check="system_reserved"')[1].split("</tr>")[0]
    assert "fail" in row and f"{drifted} (CPU: nothing reserved" in row
    assert reserved_check("inference")["status"] == "pass"
    reserve(cluster, drifted, cpu="95500m", memory="1056Gi")  # CPU only
    inventory_sync()
    assert reserved_check("training")["concerned"] == [f"{drifted} (memory: nothing reserved)"]
    reserve(cluster, drifted, cpu="95500m", memory="1048Gi")
    inventory_sync()
    check = reserved_check("training")
    assert check["status"] == "pass", check
    assert f"0.5 CPU on {drifted}" in str(check["detail"])
    assert f"8.0 GiB on {drifted}" in str(check["detail"])


@pytest.mark.django_db(transaction=True)
def test_the_watcher_keeps_capacity_and_pod_slots(cluster: Kubesim, tmp_path: Path) -> None:
    with watcher(tmp_path) as w:
        eventually(lambda: listed(w) and Node.objects.count() == 25, "the first list")
        assert Node.objects.get(name="a100-infer-000").cpu_capacity_milli == 96_000
        reserve(cluster, "a100-infer-000", cpu="90", memory="1000Gi", pods="32")
        eventually(
            lambda: Node.objects.get(name="a100-infer-000").pods_allocatable == 32,
            "the new pod slots in the row",
        )
    node = Node.objects.get(name="a100-infer-000")
    assert (node.cpu_capacity_milli, node.cpu_allocatable_milli) == (96_000, 90_000)
    assert node.memory_capacity_bytes - node.memory_allocatable_bytes == 56 * GIB
