"""The inventory against kubesim: the Node rows match the scenario exactly."""

from __future__ import annotations

import collections
from io import StringIO

import pytest
from django.core.management import call_command
from django.db import connection
from django.db.models import Count, Sum
from django.test.utils import CaptureQueriesContext

from pools.inventory import drift_recompute, inventory_refresh_node, inventory_sync
from pools.kube.nodes import read_node
from pools.kube.patcher import apply_pool
from pools.models import Node, Pool
from tests.factories import demo_inventory
from tests.kubesim_process import Kubesim

# The cluster is kubesim's API server, then the real control plane.
pytestmark = pytest.mark.both_backends


@pytest.mark.django_db
def test_inventory_matches_the_demo_scenario(cluster: Kubesim) -> None:
    report = inventory_sync()
    assert (report.nodes_listed, report.gpu_nodes, report.gone) == (25, 25, 0)
    counts = dict(Node.objects.values_list("pool__name").annotate(n=Count("id")))
    assert counts == {"training": 5, "inference": 8, "mixed": 10, None: 2}
    assert sorted(Node.objects.filter(pool=None).values_list("name", flat=True)) == [
        "gpu-new-000",
        "gpu-new-001",
    ]
    totals = Node.objects.aggregate(gpus=Sum("gpu_count"), allocated=Sum("gpu_allocated"))
    # 23 eight-GPU nodes and two four-GPU nodes; pods: 4x8 + 4 + 5x5 + 9x1 + 3x4 + 2x2 (the
    # two eval jobs that landed on the drifted node).
    assert totals == {"gpus": 23 * 8 + 2 * 4, "allocated": 32 + 4 + 25 + 9 + 12 + 4}
    drifted = Node.objects.get(drifted=True)
    assert drifted.name == "a100-train-drift-000"
    assert drifted.drift["taints_added"] == ["workload-training=true:NoSchedule"]
    down = Node.objects.get(name="a100-reserve-down-000")
    assert (down.ready, down.gpu_allocated) == (False, 0)
    # Only the GPU operator's DaemonSet pods, which stay on a node that is not ready.
    assert sorted((p["owner_kind"], p["gpus"]) for p in down.pods) == [("DaemonSet", 0)] * 2
    infer = Node.objects.get(name="a100-infer-000")
    assert infer.gpu_model == "NVIDIA-A100-SXM4-80GB"
    assert (infer.gpu_memory_mib, infer.gpu_allocatable, infer.gpu_allocated) == (81920, 8, 5)
    assert infer.pods[0] == {
        "name": "chat-serving-a100-infer-000-0",
        "namespace": "ml-serving",
        "gpus": 2,
        "owner_kind": "ReplicaSet",
        "phase": "Running",
    }
    assert {t["key"] for t in infer.taints} == {"workload-inference"}


@pytest.mark.django_db
def test_vanished_nodes_are_marked_gone_and_come_back(cluster: Kubesim) -> None:
    inventory_sync()
    cluster.core().delete_node("gpu-new-001")
    assert inventory_sync().gone == 1
    gone = Node.objects.get(name="gpu-new-001")
    assert gone.gone_at is not None
    assert Node.objects.present().count() == 24
    cluster.core().create_node(
        {"metadata": {"name": "gpu-new-001"}, "status": {"capacity": {"nvidia.com/gpu": "4"}}}
    )
    inventory_sync()
    assert Node.objects.get(name="gpu-new-001").gone_at is None


def statements(captured: CaptureQueriesContext) -> collections.Counter[str]:
    """The statements by kind: "INSERT pools_node", "UPDATE pools_gpupod", ... (an
    executemany counts once: one prepared statement, its rows sent together)."""
    kinds: collections.Counter[str] = collections.Counter()
    for query in captured.captured_queries:
        # An executemany is logged once, as "<n> times: <statement>".
        sql = query["sql"].split(" times: ", 1)[-1].replace("INSERT OR IGNORE ", "INSERT ")
        verb = sql.split()[0]
        after = {"SELECT": " FROM ", "INSERT": "INSERT INTO ", "DELETE": "DELETE FROM "}
        marker = after.get(verb, f"{verb} ")
        table = sql.split(marker, 1)[1].split()[0].strip('"')
        kinds[f"{verb} {table}"] += 1
    return kinds


# One read of the pools; after the listing, one update for gone nodes (after reading which
# they are: a read of pools_node counted with the pages'), one to give newly bound pods
# their node's pool, one to mark vanished pods deleted, one to forget old ones.
FIXED = {
    "SELECT pools_pool": 1,
    "UPDATE pools_node": 1,
    "UPDATE pools_gpupod": 2,
    "DELETE pools_gpupod": 1,
}


@pytest.mark.django_db
def test_a_sync_costs_a_constant_number_of_statements_per_page(cluster: Kubesim, settings) -> None:  # type: ignore[no-untyped-def]
    settings.INVENTORY_PAGE_SIZE = 5
    with CaptureQueriesContext(connection) as small_pages:
        inventory_sync()
    settings.INVENTORY_PAGE_SIZE = 100
    with CaptureQueriesContext(connection) as one_page:
        inventory_sync()
    # One bulk upsert per page of nodes, each raising the inventory's version (one upsert
    # of its row) and comparing the page's nodes with their open stays (two reads), and one
    # per page of pods that holds GPU pods. No stay changes on the second sync: no write.
    assert statements(one_page) == {
        **FIXED,
        "SELECT pools_node": 2,
        "SELECT pools_poolstay": 1,
        "INSERT pools_node": 1,
        "INSERT pools_inventoryversion": 1,
        "INSERT pools_gpupod": 1,
        # DRA's objects, listed after the nodes: one row read (whose nodes had DRA units)
        # and written; no node holds DRA devices here, so no node is read for them.
        "SELECT pools_drasnapshot": 1,
        "INSERT pools_drasnapshot": 1,
    }
    small = statements(small_pages)
    assert small.pop("INSERT pools_drasnapshot") == small.pop("SELECT pools_drasnapshot") == 1
    assert small["INSERT pools_node"] == small["INSERT pools_inventoryversion"] == 25 // 5
    # The first sight of every node: its stay opened, one statement a page, after reading
    # which nodes had one (the open ones, and any).
    assert small["INSERT pools_poolstay"] == 25 // 5
    assert small.pop("SELECT pools_poolstay") == 2 * 25 // 5
    assert small.pop("SELECT pools_node") == 25 // 5 + 1
    # 86 pods in 18 pages, of which the DaemonSet pods (no GPU) fill some alone.
    assert 36 // 5 <= small["INSERT pools_gpupod"] <= 86 // 5 + 1
    assert {k: v for k, v in small.items() if not k.startswith("INSERT")} == FIXED
    assert cluster.count("list", resource="nodes") == 5 + 1
    assert cluster.count("list", resource="pods") == 18 + 1


@pytest.mark.django_db
def test_pool_key_is_a_setting(cluster: Kubesim, settings) -> None:  # type: ignore[no-untyped-def]
    settings.POOL_LABEL_KEY = "workload-type"
    # With workload-type as the pool key, the demo's pools still resolve by value, but each
    # pool's own workload-type label is now the key: redefine the pools' labels to match.
    Pool.objects.update(labels={})
    inventory_sync()
    assert Node.objects.get(name="a100-infer-000").pool.name == "inference"


@pytest.mark.django_db
def test_a_move_refreshes_its_node_at_once(cluster: Kubesim) -> None:
    inventory_sync()
    pools = {p.name: p.spec() for p in Pool.objects.all()}
    result = apply_pool("gpu-new-000", pools["training"], list(pools.values()))
    row = inventory_refresh_node(result.raw)
    assert row is not None
    assert row.pool.name == "training" and not row.drifted
    assert row.resource_version == read_node("gpu-new-000")["metadata"]["resourceVersion"]


@pytest.mark.django_db
def test_editing_a_pool_shows_its_nodes_as_drifted_without_touching_them(cluster: Kubesim) -> None:
    inventory_sync()
    Pool.objects.filter(name="inference").update(
        labels={"workload-type": "inference", "latency": "strict"}
    )
    assert drift_recompute() == 8 + 1
    row = Node.objects.get(name="h100-infer-000")
    assert row.drift["labels_added"] == {"latency": "strict"}
    assert cluster.count("patch") == 0


@pytest.mark.django_db
def test_unknown_pool_label_is_flagged(cluster: Kubesim) -> None:
    cluster.core().patch_node("gpu-new-000", {"metadata": {"labels": {"gpu-pool": "legacy"}}})
    inventory_sync()
    row = Node.objects.get(name="gpu-new-000")
    assert (row.pool, row.pool_label, row.drifted) == (None, "legacy", True)
    assert row.drift == {"unknown_pool": "legacy"}


@pytest.mark.django_db
def test_management_command(cluster: Kubesim) -> None:
    out = StringIO()
    call_command("sync_inventory", stdout=out)
    # 36 workload pods, of which two wait unbound (Pending) and belong to no node yet, and
    # the device plugin and dcgm-exporter DaemonSet pods on each of the 25 nodes.
    assert "25 GPU nodes (of 25 listed), 84 pods, 0 marked gone, 36 GPU pods" in out.getvalue()


# What the workflow and the pages read of a node; the factory leaves out the Feature
# Discovery labels no rule reads, the CPU and memory figures, and the DaemonSet pods (the
# device plugin and dcgm-exporter on every node, with generated names).
DECIDING_FIELDS = [
    "name",
    "pool_id",
    "pool_label",
    "gpu_model",
    "gpu_count",
    "gpu_memory_mib",
    "gpu_allocatable",
    "gpu_allocated",
    "ready",
    "cordoned",
    "taints",
    "drifted",
    "drift",
    "pods",
]
DECIDING_LABELS = {"gpu-pool", "workload-type", "batch-scheduling", "nvidia.com/gpu.product"}


def stored_nodes() -> dict[str, dict[str, object]]:
    rows = {}
    for row in Node.objects.values(*DECIDING_FIELDS, "labels"):
        labels = row.pop("labels")
        row["pods"] = [p for p in row["pods"] if p["owner_kind"] != "DaemonSet"]
        # A taint list's order means nothing, and the real node lifecycle controller writes
        # the unreachable NoSchedule and NoExecute taints in either order.
        row["taints"] = sorted(row["taints"] or [], key=lambda t: (t["key"], t["effect"]))
        rows[row["name"]] = {
            **row,
            "labels": {k: v for k, v in labels.items() if k in DECIDING_LABELS},
        }
    return rows


@pytest.mark.django_db
def test_the_row_factory_stores_what_a_sync_of_the_demo_scenario_stores(cluster: Kubesim) -> None:
    """The model-level tests stand on tests.factories.demo_inventory(): it must agree with
    a real sync of the same scenario."""
    inventory_sync()
    synced = stored_nodes()
    Node.objects.all().delete()
    demo_inventory()
    assert stored_nodes() == synced
