"""Pools and nodes belong to a cluster: two clusters may each have a `training` pool and a
node of the same name, every lookup by name finds the current cluster's (?cluster= on pages
and the API, pools.core.cluster_scope elsewhere), and a move never crosses clusters."""

from __future__ import annotations

import io
import json

import pytest
from django.core.checks import run_checks
from django.core.exceptions import ValidationError
from django.core.management import CommandError, call_command
from django.test import Client

from pools.common.cluster_access import current_cluster
from pools.core.cluster_scope import cluster_scope
from pools.core.clusters import ClusterAccess
from pools.fleet import services
from pools.models import AuditEvent, MoveRequest, Node, Pool
from pools.moves.plan import pool_facts
from tests.api.conftest import api
from tests.factories import demo_inventory, gpu_node
from tests.moves_helpers import user_in

pytestmark = pytest.mark.django_db
JSON = "application/json"
EAST = "us-east"
B200 = ("NVIDIA-B200", 8, 183359)


@pytest.fixture
def two_clusters(settings) -> None:  # type: ignore[no-untyped-def]
    """The portal's own cluster with the demo inventory, and us-east with a `training` pool
    and a node named like one of the demo's."""
    settings.OTHER_CLUSTERS = {EAST: ClusterAccess(EAST, colour="#2ca02c")}
    demo_inventory()
    with cluster_scope(EAST):
        services.pool_save(
            pool=Pool(name="training", display_name="Training (east)", labels={"team": "east"})
        )
        services.pool_save(pool=Pool(name="spare", display_name="Spare", labels={"s": "1"}))
        gpu_node("a100-train-000", "training", gpu=B200)
        gpu_node("b200-east-000", "training", gpu=B200)
        gpu_node("b200-east-001", None, gpu=B200)


def post(client: Client, path: str, body: object):  # type: ignore[no-untyped-def]
    return client.post(path, json.dumps(body), content_type=JSON)


def test_each_cluster_finds_its_own_pool_and_node_by_name(two_clusters, settings) -> None:  # type: ignore[no-untyped-def]
    home = settings.CLUSTER_NAME
    assert Pool.everywhere.filter(name="training").count() == 2
    assert Node.everywhere.filter(name="a100-train-000").count() == 2
    assert Pool.objects.get(name="training").cluster == home
    assert Node.objects.get(name="a100-train-000").gpu_model != "NVIDIA-B200"
    with cluster_scope(EAST):
        assert Pool.objects.get(name="training").display_name == "Training (east)"
        east = Node.objects.get(name="a100-train-000")
        assert (east.cluster, east.gpu_model, east.pool.cluster) == (EAST, "NVIDIA-B200", EAST)
        assert sorted(Node.objects.values_list("name", flat=True)) == [
            "a100-train-000",
            "b200-east-000",
            "b200-east-001",
        ]
    # Writing one cluster's node left the other's as it was.
    assert Node.objects.get(name="a100-train-000").pool.display_name != "Training (east)"


def test_a_pool_name_is_unique_in_its_cluster_only(two_clusters) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(ValidationError) as refused:
        services.pool_save(pool=Pool(name="training", display_name="Again", labels={"t": "x"}))
    assert refused.value.message_dict["name"] == ["A pool named 'training' exists already."]
    assert Pool.everywhere.filter(name="training").count() == 2


def test_the_api_answers_for_the_cluster_a_request_names(two_clusters, token_for, settings) -> None:  # type: ignore[no-untyped-def]
    client = api(token_for("viewers"))
    east = client.get(f"/api/v1/nodes/?cluster={EAST}").json()
    assert [(n["name"], n["cluster"]) for n in east["results"]] == [
        ("a100-train-000", EAST),
        ("b200-east-000", EAST),
        ("b200-east-001", EAST),
    ]
    home = client.get("/api/v1/nodes/?pool=training").json()["results"]
    assert home and {n["cluster"] for n in home} == {settings.CLUSTER_NAME}
    pools = client.get(f"/api/v1/pools/?cluster={EAST}").json()
    assert [(p["name"], p["cluster"], p["node_count"]) for p in pools] == [
        ("spare", EAST, 0),
        ("training", EAST, 2),
    ]
    detail = client.get(f"/api/v1/nodes/a100-train-000/?cluster={EAST}").json()
    assert (detail["cluster"], detail["gpu_model"]) == (EAST, "NVIDIA-B200")


def test_a_cluster_not_served_is_a_404_naming_it(two_clusters, token_for) -> None:  # type: ignore[no-untyped-def]
    response = api(token_for("viewers")).get("/api/v1/nodes/?cluster=nowhere")
    assert response.status_code == 404
    error = response.json()["error"]
    assert error["code"] == "unknown_cluster"
    assert error["fields"] == {"cluster": "No cluster named 'nowhere' is served here."}
    page = Client()
    page.force_login(user_in("viewers", "vera"))
    assert page.get("/nodes/a100-train-000/?cluster=nowhere").status_code == 404
    # The audit log reads every cluster's events, and names even one no longer served.
    assert page.get("/audit/?cluster=nowhere").status_code == 200


def test_a_move_across_clusters_is_refused_and_writes_nothing(two_clusters, token_for) -> None:  # type: ignore[no-untyped-def]
    moves, events = MoveRequest.objects.count(), AuditEvent.objects.count()
    requester = api(token_for("requesters"))
    body = {"nodes": ["b200-east-001"], "destination": "mixed", "reason": "more room"}
    refused = post(requester, "/api/v1/moves/", body)
    assert refused.status_code in (400, 409), refused.json()
    checks = refused.json()["error"]["fields"]["checks"]
    assert [c["code"] for c in checks] == ["other_cluster"]
    assert checks[0]["message"] == (
        f"b200-east-001 is a node of cluster {EAST}, and pool mixed is in cluster default: a "
        f"move stays inside its cluster. Move it to a pool of {EAST}, or send the work to "
        f"cluster {EAST} instead."
    )
    assert (MoveRequest.objects.count(), AuditEvent.objects.count()) == (moves, events)
    # In its own cluster the same node moves: the check is about clusters, not the node.
    east = post(requester, f"/api/v1/moves/?cluster={EAST}", {**body, "destination": "spare"})
    assert east.status_code == 201, east.json()
    move = MoveRequest.everywhere.get(pk=east.json()["id"])  # east's, not in this scope
    assert (move.destination.cluster, move.items.get().node.cluster) == (EAST, EAST)
    # Its page, opened from the portal's own cluster (a link in a message), opens in east.
    page = Client()
    page.force_login(user_in("viewers", "vera"))
    opened = page.get(f"/moves/{move.pk}/")
    assert (opened.status_code, opened["Location"]) == (302, f"/moves/{move.pk}/?cluster={EAST}")
    assert page.get(opened["Location"]).status_code == 200
    assert page.get("/moves/999999/").status_code == 404


def test_a_pools_minimum_counts_its_own_clusters_nodes(two_clusters) -> None:  # type: ignore[no-untyped-def]
    home_members = Node.objects.present().filter(pool__name="training").count()
    home = pool_facts(list(Pool.objects.filter(name="training")))["training"]
    with cluster_scope(EAST):
        east = pool_facts(list(Pool.objects.filter(name="training")))["training"]
    assert (east.present_nodes, east.cluster) == (2, EAST)
    assert home_members != 2 and home.present_nodes == home_members


def test_a_renamed_cluster_is_reported_and_carried_over(settings) -> None:  # type: ignore[no-untyped-def]
    demo_inventory()
    before = (Pool.objects.count(), Node.objects.count())
    settings.CLUSTER_NAME = "eu-west"
    assert (Pool.objects.count(), Node.objects.count()) == (0, 0)  # kept under "default"
    warnings = [m for m in run_checks(include_deployment_checks=True) if m.id == "pools.W002"]
    assert [w.msg for w in warnings] == [
        f"{before[0]} pools and {before[1]} nodes are kept for cluster 'default', which this "
        "portal does not serve (it serves eu-west)."
    ]
    assert "manage.py rename_cluster default <its name>" in warnings[0].hint

    with pytest.raises(CommandError, match="'Eu West' is not a DNS label"):
        call_command("rename_cluster", "default", "Eu West")
    assert Pool.objects.count() == 0  # nothing carried over
    out = io.StringIO()
    call_command("rename_cluster", "default", "eu-west", stdout=out)
    assert out.getvalue() == f"default → eu-west: {before[0]} pools, {before[1]} nodes.\n"
    assert (Pool.objects.count(), Node.objects.count()) == before
    assert not [m for m in run_checks(include_deployment_checks=True) if m.id == "pools.W002"]
    event = AuditEvent.objects.get(action="cluster.renamed")
    assert (event.before, event.after) == ({"cluster": "default"}, {"cluster": "eu-west"})


def test_a_rename_onto_names_taken_changes_nothing(two_clusters, settings) -> None:  # type: ignore[no-untyped-def]
    home = settings.CLUSTER_NAME
    with pytest.raises(CommandError) as refused:
        call_command("rename_cluster", EAST, home)
    assert str(refused.value) == (
        f"Cluster {home!r} already has pool training, node a100-train-000: rename nothing, "
        "and retire or rename those first."
    )
    assert Pool.everywhere.filter(cluster=EAST).count() == 2
    assert Node.everywhere.filter(cluster=EAST).count() == 3


def mig_node(name: str) -> Node:
    """An unassigned A100 node split into 56 MIG 1g.10gb instances, 5 of them held."""
    node = gpu_node(name, None, gpu=("NVIDIA-A100-SXM4-80GB-MIG-1g.10gb", 56, 9728))
    node.gpu_allocatable, node.gpu_allocated = 0, 0
    node.devices = {
        "model": "NVIDIA-A100-SXM4-80GB",
        "memory_mib": 81920,
        "gpus": 8,
        "mig_gpus": 8,
        "units": [["mig", "nvidia.com/mig-1g.10gb", "1g.10gb", "", 1, 56]],
    }
    node.resources_requested = {"nvidia.com/mig-1g.10gb": 5}
    node.save()
    return node


def test_the_fleet_shows_every_cluster_with_its_pools_in_constant_queries(  # type: ignore[no-untyped-def]
    two_clusters, token_for, settings, django_assert_max_num_queries
) -> None:
    with cluster_scope(EAST):
        mig_node("a100-mig-000")
    client = api(token_for("viewers"))
    client.get("/api/v1/fleet/")  # the token and its user remembered
    # Nodes of whole GPUs grouped, the others one by one, pools, one lease a cluster, the token.
    with django_assert_max_num_queries(7):
        fleet = client.get("/api/v1/fleet/").json()
    clusters = {c["name"]: c for c in fleet["clusters"]}
    assert list(clusters) == [settings.CLUSTER_NAME, EAST]
    east = clusters[EAST]
    assert [(p["name"], p["tally"]["nodes"], p["tally"]["gpus"]) for p in east["pools"]] == [
        ("spare", 0, 0),
        ("training", 2, 16),
        ("", 2, 16),  # the MIG node's 8 physical GPUs, not its 56 instances
    ]
    unassigned = east["pools"][-1]["tally"]["units"]
    assert unassigned == [
        {"kind": "whole GPU", "units": 8, "allocated": 0},
        {"kind": "MIG 1g.10gb", "units": 56, "allocated": 5},
    ]
    home_nodes = Node.objects.present().count()
    assert clusters[settings.CLUSTER_NAME]["tally"]["nodes"] == home_nodes
    assert fleet["total"]["nodes"] == home_nodes + 4
    b200 = next(m for m in fleet["models"] if m["gpu_model"] == "NVIDIA-B200")
    assert b200["gpus_by_cluster"] == {settings.CLUSTER_NAME: 0, EAST: 24}
    # The MIG node counts under its physical model, its instances as their own kind.
    a100 = next(m for m in fleet["models"] if m["gpu_model"] == "NVIDIA-A100-SXM4-80GB")
    mig = next(k for k in a100["kinds"] if k["kind"] == "MIG 1g.10gb")
    assert (mig["units"], mig["allocated"], mig["units_by_cluster"][EAST]) == (56, 5, 56)
    assert a100["gpus_by_cluster"][EAST] == 8
    assert not any("MIG" in m["gpu_model"] for m in fleet["models"])

    page = Client()
    page.force_login(user_in("viewers", "vera"))
    html = page.get("/fleet/").content.decode()
    assert f'data-fleet-cluster="{EAST}"' in html and 'data-fleet-pool="us-east/training"' in html
    assert 'data-fleet-kind="NVIDIA-A100-SXM4-80GB/MIG 1g.10gb"' in html
    assert "5 of 56 MIG 1g.10gb" in html


def test_a_page_named_for_a_cluster_keeps_to_it_and_says_so(two_clusters, settings) -> None:  # type: ignore[no-untyped-def]
    page = Client()
    page.force_login(user_in("viewers", "vera"))
    home = page.get("/pools/").content.decode()
    assert f'data-cluster="{settings.CLUSTER_NAME}"' in home
    assert f'data-cluster-link="{EAST}"' in home  # the switch to the other cluster
    east = page.get(f"/pools/?cluster={EAST}").content.decode()
    assert f'data-cluster="{EAST}"' in east and 'data-pool-row="spare"' in east
    # The session remembers it: the next page without ?cluster= is still east's.
    after = page.get("/pools/").content.decode()
    assert 'data-pool-row="spare"' in after and 'data-pool-row="inference"' not in after
    back = page.get(f"/pools/?cluster={settings.CLUSTER_NAME}").content.decode()
    assert 'data-pool-row="inference"' in back
    # A cluster no longer served is forgotten, not a 404 on every page.
    page.get(f"/pools/?cluster={EAST}")
    settings.OTHER_CLUSTERS = {}
    assert page.get("/pools/").status_code == 200


def test_a_periodic_step_runs_once_in_each_clusters_scope(two_clusters, settings) -> None:  # type: ignore[no-untyped-def]
    from pools.tasks import each_cluster

    seen = each_cluster(lambda: (current_cluster(), Pool.objects.count()))
    assert [name for name, _ in seen] == [settings.CLUSTER_NAME, EAST]
    assert seen[1][1] == 2
    with cluster_scope(EAST):  # a task sent for one cluster runs for it alone
        assert each_cluster(current_cluster) == [EAST]
    # One cluster's failure does not keep the next from its turn; the task still fails.
    ran = []

    def step() -> str:
        ran.append(current_cluster())
        if current_cluster() == settings.CLUSTER_NAME:
            raise RuntimeError("API server unreachable")
        return current_cluster()

    with pytest.raises(RuntimeError, match="unreachable"):
        each_cluster(step)
    assert ran == [settings.CLUSTER_NAME, EAST]


def test_a_role_scoped_to_a_cluster_holds_there_only_in_the_one_permission_check(  # type: ignore[no-untyped-def]
    two_clusters, settings
) -> None:
    from django.contrib.auth.models import User

    from portal.sso.accounts import user_roles_apply

    user = User.objects.create_user("eve", password="x")
    role_map = {"gpu-admins-east": frozenset({f"pool-admins@{EAST}"}), "all": {"viewers"}}
    user_roles_apply(user=user, groups=["gpu-admins-east", "all"], role_map=role_map)
    assert set(user.groups.values_list("name", flat=True)) == {f"pool-admins@{EAST}", "viewers"}
    client = Client()
    client.force_login(user)
    body = json.dumps({"name": "batch", "display_name": "Batch", "labels": {"b": "1"}})
    home = client.post("/api/v1/pools/", body, content_type=JSON)
    assert home.status_code == 403  # a viewer in the portal's own cluster
    east = client.post(f"/api/v1/pools/?cluster={EAST}", body, content_type=JSON)
    assert east.status_code == 201, east.json()
    assert Pool.everywhere.get(name="batch").cluster == EAST
    # The pages ask the same function: the east pool form is open, the home one is not.
    assert client.get(f"/pools/new/?cluster={EAST}").status_code == 200
    assert client.get(f"/pools/new/?cluster={settings.CLUSTER_NAME}").status_code == 403


def test_search_covers_every_cluster_the_reader_may_see(two_clusters, settings) -> None:  # type: ignore[no-untyped-def]
    """a100-train-000 is a node of both clusters: a viewer everywhere finds both, the page's
    own cluster first, each linking to its cluster; a viewer of us-east alone finds east's."""
    from django.contrib.auth.models import Group, User

    home = settings.CLUSTER_NAME
    page = Client()
    page.force_login(user_in("viewers", "vera"))
    body = page.get("/api/v1/search/", {"q": "a100-train-000"}).json()
    assert [(n["cluster"], n["pool"]) for n in body["nodes"]] == [
        (home, "training"),
        (EAST, "training"),
    ]
    from_east = page.get("/api/v1/search/", {"q": "a100-train-000", "cluster": EAST}).json()
    assert [n["cluster"] for n in from_east["nodes"]] == [EAST, home]
    pools = page.get("/api/v1/search/", {"q": "training"}).json()["pools"]
    assert [(p["cluster"], p["display_name"]) for p in pools] == [
        (home, "Training"),
        (EAST, "Training (east)"),
    ]
    html = page.get("/search/", {"q": "a100-train-000"}).content.decode()
    assert f'data-hit="{EAST}/a100-train-000"' in html
    assert f'href="/nodes/a100-train-000/?cluster={EAST}"' in html
    assert f'href="/nodes/a100-train-000/?cluster={home}"' in html

    east_only = User.objects.create_user("ed")
    east_only.groups.add(Group.objects.get_or_create(name=f"viewers@{EAST}")[0])
    page.force_login(east_only)
    found = page.get("/api/v1/search/", {"q": "train", "cluster": EAST}).json()
    assert {n["cluster"] for n in found["nodes"]} == {EAST}
    assert {p["cluster"] for p in found["pools"]} == {EAST}


def test_a_new_cluster_is_given_the_pools_another_has(two_clusters, settings) -> None:  # type: ignore[no-untyped-def]
    out = io.StringIO()
    call_command("copy_pools", settings.CLUSTER_NAME, EAST, stdout=out)
    assert out.getvalue() == f"Pools copied from default to {EAST}: inference, mixed, shared.\n"
    home = Pool.objects.get(name="inference")
    with cluster_scope(EAST):
        copy = Pool.objects.get(name="inference")
        assert Pool.objects.get(name="training").display_name == "Training (east)"  # kept
    assert (copy.labels, copy.taint, copy.min_nodes) == (home.labels, home.taint, home.min_nodes)
    assert copy.pk != home.pk and copy.nodes.count() == 0
    again = io.StringIO()
    call_command("copy_pools", settings.CLUSTER_NAME, EAST, stdout=again)
    assert again.getvalue().endswith("none (it has them all).\n")
    with pytest.raises(CommandError, match="no cluster named 'nowhere' is served here"):
        call_command("copy_pools", settings.CLUSTER_NAME, "nowhere")


B200_POD = """
apiVersion: v1
kind: Pod
metadata: {name: big-b200, namespace: ml}
spec:
  nodeSelector: {nvidia.com/gpu.product: NVIDIA-B200}
  containers:
  - name: main
    image: trainer
    resources: {limits: {nvidia.com/gpu: 1}}
"""


def test_the_fleet_fit_check_names_the_cluster_and_pool_that_take_the_job(  # type: ignore[no-untyped-def]
    two_clusters, token_for, settings
) -> None:
    client = api(token_for("viewers"))
    answer = post(client, "/api/v1/fit/fleet/", {"manifest": B200_POD})
    assert answer.status_code == 200, answer.json()
    fits = answer.json()
    assert [(f["cluster"], f["fits_now"]) for f in fits] == [
        (EAST, True),
        (settings.CLUSTER_NAME, False),
    ]
    assert fits[0]["pools_fitting_now"] == ["training"]  # east's, of B200 nodes
    assert fits[1]["pools_fitting_now"] == []
    # Each cluster's own check, as POST /api/v1/fit/ answers there.
    alone = post(client, f"/api/v1/fit/?cluster={EAST}", {"manifest": B200_POD}).json()
    assert alone["workloads"][0]["fits_now"] is True
    bad = post(client, "/api/v1/fit/fleet/", {"manifest": "kind: [Pod"})
    assert bad.status_code == 400 and bad.json()["error"]["code"] == "invalid_manifest"


def fleet_fit_rows(html: str) -> dict[str, str]:
    """The fit page's "Across the fleet" rows in their order: each cluster's row, as HTML."""
    section = html.split('id="fleet-fit"', 1)[1].split("</section>", 1)[0]
    return {row.split('"', 1)[0]: row for row in section.split('data-fleet-fit="')[1:]}


def fit_result_row(html: str, pool: str) -> str:
    """A pool's row of the fit page's detailed result."""
    result = html.split('id="fit-result"', 1)[1]
    return result.split(f'<tr data-pool="{pool}">', 1)[1].split("</tr>", 1)[0]


def test_the_fit_page_answers_across_the_fleet_and_checks_in_the_cluster_chosen(  # type: ignore[no-untyped-def]
    two_clusters, settings, django_assert_max_num_queries
) -> None:
    home = settings.CLUSTER_NAME
    page = Client()
    page.force_login(user_in("viewers", "vera"))
    page.get("/fit/")
    # The page checking a manifest in one cluster reads 8 (session, user, roles, the fit
    # check's pools, nodes and the GPU pods on them, the Pending pods' names, the inventory
    # lease); each further cluster adds its own fit check's 3, whatever its size.
    with django_assert_max_num_queries(8 + 3 * (len(settings.OTHER_CLUSTERS))):
        response = page.post("/fit/", {"manifest": B200_POD})
    assert response.status_code == 200
    html = response.content.decode()
    assert html.index('id="fleet-fit"') < html.index('id="fit-result"')
    rows = fleet_fit_rows(html)
    assert list(rows) == [EAST, home]  # where it lands now first
    assert '<span class="state-ok">fits now</span>' in rows[EAST]
    assert '<td data-label="Fits now in">training</td>' in rows[EAST]
    assert '<span class="state-bad">does not fit now</span>' in rows[home]
    assert '<td data-label="Fits now in">—</td>' in rows[home]
    for cluster, row in rows.items():
        assert f'<form method="post" action="/fit/?cluster={cluster}"' in row
        assert "metadata: {name: big-b200, namespace: ml}" in row  # the manifest, carried
    # The detailed result is the page's own cluster's, where no node has a B200.
    assert 'state-ok">fits now' not in fit_result_row(html, "training")

    east = page.post(f"/fit/?cluster={EAST}", {"manifest": B200_POD})
    assert east.status_code == 200
    east_html = east.content.decode()
    assert 'state-ok">fits now' in fit_result_row(east_html, "training")
    assert "(detailed below)" in fleet_fit_rows(east_html)[EAST]
    # Its fix downloads from there, one cluster's check alone.
    download = page.post(f"/fit/?cluster={EAST}", {"manifest": B200_POD, "download": "training"})
    assert download["Content-Disposition"] == 'attachment; filename="manifest-training.yaml"'

    # A manifest that cannot be read is refused once, as in one cluster.
    bad = page.post("/fit/", {"manifest": "kind: [Pod"})
    assert bad.status_code == 400
    assert len(bad.context["form"].errors["manifest"]) == 1
    assert 'id="fleet-fit"' not in bad.content.decode()


def test_the_fit_page_of_a_portal_serving_one_cluster_has_no_fleet_section(  # type: ignore[no-untyped-def]
    settings, django_assert_max_num_queries
) -> None:
    assert not settings.OTHER_CLUSTERS
    demo_inventory()
    page = Client()
    page.force_login(user_in("viewers", "vera"))
    page.get("/fit/")
    with django_assert_max_num_queries(8):  # as before the fleet section: one fit check
        response = page.post("/fit/", {"manifest": B200_POD})
    assert response.status_code == 200
    html = response.content.decode()
    assert 'id="fit-result"' in html and 'id="fleet-fit"' not in html
