"""One portal, two clusters: two clusters with the same node names, one inventory sync for
both, and a move in the second cluster applied by a real worker to that cluster's API server
only. The portal's own cluster is kubesim's API server, then the real control plane (with
kubesim as its kubelets); the second is a kubesim process. The portal's own cluster comes
from the flat settings, the second from CLUSTERS_FILE's second entry (OTHER_CLUSTERS), as an
install describes them."""

from __future__ import annotations

import io
from pathlib import Path

import pytest
import yaml
from django.core.management import call_command
from django.db.models import Count
from django.utils import timezone

from pools import moves, tasks
from pools.core.cluster_scope import cluster_scope
from pools.core.clusters import ClusterAccess
from pools.fleet import services
from pools.models import AuditEvent, MoveRequest, Node, Pool
from tests.api.conftest import api
from tests.kubesim_process import Kubesim, kubesim_server
from tests.moves_helpers import FINAL, user_in, wait_for_state
from tests.real_cluster import RealCluster
from tests.servers import RedisServer
from tests.workers import celery_worker

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.both_backends]
EAST = "us-east"
NODE = "a100-reserve-000"  # in both clusters, in pool mixed


@pytest.fixture
def east(tmp_path: Path, cluster: Kubesim | RealCluster, settings) -> Kubesim:  # type: ignore[no-untyped-def]
    """The second cluster, served beside the portal's own (`cluster`)."""
    with kubesim_server(tmp_path / "east") as server:
        settings.OTHER_CLUSTERS = {EAST: ClusterAccess(EAST, kubeconfig=str(server.kubeconfig))}
        yield server


def east_pools() -> None:
    """The east cluster's pools: the same definitions as the portal's own defaults."""
    home = list(Pool.objects.active())
    with cluster_scope(EAST):
        for pool in home:
            services.pool_save(
                pool=Pool(
                    name=pool.name,
                    display_name=pool.display_name,
                    labels=pool.labels,
                    taint_key=pool.taint_key,
                    taint_value=pool.taint_value,
                    taint_effect=pool.taint_effect,
                )
            )


def clusters_file(tmp_path: Path, home: Kubesim | RealCluster, east: Kubesim, name: str) -> Path:
    path = tmp_path / "clusters.yaml"
    entries = [
        {"name": name, "kubeconfig": str(home.kubeconfig)},
        {"name": EAST, "kubeconfig": str(east.kubeconfig)},
    ]
    path.write_text(yaml.safe_dump({"clusters": entries}))
    return path


def test_one_sync_keeps_both_clusters_and_the_api_answers_for_each(  # type: ignore[no-untyped-def]
    cluster: Kubesim | RealCluster, east: Kubesim, token_for, settings
) -> None:
    east_pools()
    east.core().patch_node(NODE, {"metadata": {"labels": {"only-in": "east"}}})
    out = io.StringIO()
    call_command("sync_inventory", stdout=out)
    assert out.getvalue().count("Inventory synced") == 2
    counts = dict(Node.everywhere.values_list("cluster").annotate(n=Count("id")))
    assert counts == {settings.CLUSTER_NAME: 25, EAST: 25}
    client = api(token_for("viewers"))
    home = client.get(f"/api/v1/nodes/{NODE}/").json()
    there = client.get(f"/api/v1/nodes/{NODE}/?cluster={EAST}").json()
    assert (home["cluster"], there["cluster"]) == (settings.CLUSTER_NAME, EAST)
    assert "only-in" not in home["labels"] and there["labels"]["only-in"] == "east"
    assert there["pool"] == "mixed"
    # Each cluster's writer has its own lease: the clusters API says each one's freshness.
    assert client.get("/api/v1/clusters/").json()[1]["inventory"] is None  # no writer yet
    tasks.sync_inventory()  # the beat's sync: every cluster, each under its lease
    listed = client.get("/api/v1/clusters/").json()
    assert [c["name"] for c in listed] == [settings.CLUSTER_NAME, EAST]
    assert all(c["inventory"] is not None and not c["inventory"]["stale"] for c in listed)


def test_a_move_in_the_second_cluster_changes_its_node_only(  # type: ignore[no-untyped-def]
    cluster: Kubesim | RealCluster, east: Kubesim, redis: RedisServer, tmp_path: Path, settings
) -> None:
    east_pools()
    call_command("sync_inventory", stdout=io.StringIO())
    clusters = clusters_file(tmp_path, cluster, east, settings.CLUSTER_NAME)
    with cluster_scope(EAST):
        move = moves.move_request_create(
            requested_by=user_in("requesters", "rita"),
            node_names=[NODE],
            destination=Pool.objects.get(name="training"),
            reason="east needs training room",
            now=timezone.now(),
        )
        assert move.destination.cluster == EAST and move.items.get().node.cluster == EAST
        with celery_worker(tmp_path, KUBECONFIG="", KUBE_CONTEXT="", CLUSTERS_FILE=str(clusters)):
            moves.move_approve(
                request=move, approver=user_in("approvers", "arno"), now=timezone.now()
            )
            move = wait_for_state(move, FINAL)
    assert move.state == MoveRequest.State.SUCCEEDED, move.items.values_list("error")
    there = east.core().read_node(NODE)
    assert there.metadata.labels["gpu-pool"] == "training"
    assert [(t.key, t.effect) for t in there.spec.taints] == [("workload-training", "NoSchedule")]
    # The portal's own cluster has a node of the same name: untouched.
    assert cluster.core().read_node(NODE).metadata.labels["gpu-pool"] == "mixed"
    assert cluster.count("patch", name=NODE) == 0 and east.count("patch", name=NODE) >= 1
    # Recorded in the east cluster, against the east node row.
    with cluster_scope(EAST):
        assert Node.objects.get(name=NODE).pool.name == "training"
    assert Node.objects.get(name=NODE).pool.name == "mixed"
    events = AuditEvent.objects.filter(request=move).values_list("cluster", flat=True)
    assert events and set(events) == {EAST}
