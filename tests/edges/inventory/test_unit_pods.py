"""Pods that ask for MIG instances or shared GPUs are GPU pods, as those asking for whole
GPUs are: the inventory keeps them with what they ask for by resource, the pending list and
its page show them, a drain evicts them, a move's preview counts them, and the fit check
knows which priority holds the instances. On kubesim's `devices` scenario (single- and
mixed-strategy MIG, time-sliced and MPS GPUs, whole GPUs)."""

from __future__ import annotations

import pytest
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from pools.fit.cluster import OTHER_PODS, fit_cluster
from pools.fit.pending import FIT_CHECK, SCHEDULER, pending_pods
from pools.kube import drain
from pools.models import GpuPod, Node
from pools.moves.impact import EVICTED
from tests.edges.fit.test_devices_agreement import devices  # noqa: F401  (a fixture)
from tests.kubesim_process import Kubesim
from tests.moves.test_impact import impact_of
from tests.moves_helpers import user_in

pytestmark = pytest.mark.django_db
SLICE = "nvidia.com/mig-1g.10gb"


def _rows(prefix: str) -> list[GpuPod]:
    return list(GpuPod.objects.live().filter(name__startswith=prefix))


def test_pods_of_every_gpu_unit_are_kept_with_what_they_ask_for(devices: Kubesim) -> None:  # noqa: F811
    slices = _rows("slice-serving")
    assert slices
    assert {(p.gpus, p.units, p.asks) for p in slices} == {(0, 1, "1 MIG 1g.10gb")}
    assert all(p.unit_requests == {SLICE: 1} for p in slices)
    # What the rows hold on a node is what its pods request of the resource.
    node = slices[0].node_name
    held = sum(p.units for p in slices if p.node_name == node)
    assert held == Node.objects.get(name=node).resources_requested[SLICE]

    shares = _rows("batch-infer")
    assert shares
    assert {(p.gpus, p.units, p.asks) for p in shares} == {(0, 1, "1 shared GPU")}
    assert all(p.unit_requests == {"nvidia.com/gpu.shared": 1} for p in shares)

    # A time-sliced replica is advertised as nvidia.com/gpu: a GPU as far as pods can tell.
    notebooks = _rows("notebook")
    assert notebooks
    assert {(p.gpus, p.units, p.asks) for p in notebooks} == {(1, 1, "1 GPU")}
    assert all(p.unit_requests == {} for p in notebooks)

    (big,) = _rows("big-slice")
    assert (big.phase, big.node_name, big.units, big.asks) == ("Pending", "", 1, "1 MIG 4g.71gb")


def test_a_pod_waiting_for_a_mig_profile_is_on_the_pending_list(devices: Kubesim) -> None:  # noqa: F811
    waiting = {p.pod.name: p for p in pending_pods(now=timezone.now())}
    big = waiting["big-slice"]
    assert not big.fits_now
    assert "Insufficient nvidia.com/mig-4g.71gb" in big.reason
    assert big.reason_from in (FIT_CHECK, SCHEDULER)

    client = Client()
    client.force_login(user_in("viewers", "vera"))
    html = client.get("/pending/").content.decode()
    assert 'data-pod="ml-serving/big-slice"' in html
    assert "ml-serving/big-slice · 1 MIG 4g.71gb" in html


def test_a_drain_evicts_the_pods_holding_mig_instances_and_shares(devices: Kubesim) -> None:  # noqa: F811
    for prefix in ("slice-serving", "batch-infer"):
        rows = _rows(prefix)
        node = rows[0].node_name
        expected = sorted(f"{p.namespace}/{p.name}" for p in rows if p.node_name == node)
        listed = drain.gpu_pods_on(node)
        assert sorted(str(p) for p in listed) == expected
        assert all(p.units == 1 for p in listed)


def test_a_drain_first_move_preview_evicts_the_mig_pods(devices: Kubesim) -> None:  # noqa: F811
    node = _rows("slice-serving")[0].node_name
    impact = impact_of([node], "training", "drain-first")
    fates = impact.pods[node]
    assert fates
    assert {(f.fate, f.gpus, f.asks) for f in fates} == {(EVICTED, 0, "1 MIG 1g.10gb")}
    assert impact.as_dict()["pods"][node][0]["asks"] == "1 MIG 1g.10gb"
    # What the move changes of each kind: the node's 56 instances leave inference for
    # training, with the ones its pods hold.
    changes = {(u.pool, u.role, u.kind): u for u in impact.units}
    held = Node.objects.get(name=node).resources_requested[SLICE]
    source = changes[("inference", "source", "MIG 1g.10gb")]
    assert source.before.units - source.after.units == 56
    assert source.before.allocated - source.after.allocated == held
    target = changes[("training", "destination", "MIG 1g.10gb")]
    assert (target.before.units, target.after.units, target.after.allocated) == (0, 56, held)
    assert {"pool": "training", "role": "destination", "kind": "MIG 1g.10gb"}.items() <= (
        impact.as_dict()["units"][-1].items()
    )
    rita = Client()
    rita.force_login(user_in("requesters", "rita"))
    form = {"nodes": node, "destination": "training", "reason": "r", "drain_policy": "drain-first"}
    html = rita.post("/moves/new/", {**form, "drain_deadline_minutes": "30", "preview": "1"})
    row = html.content.decode().split('data-impact-units="training/MIG 1g.10gb"')[1]
    assert "<td>0 → 56</td>" in row.split("</tr>")[0]


def test_the_fit_check_knows_what_gpu_pods_hold_of_mig_instances(devices: Kubesim) -> None:  # noqa: F811
    node = _rows("slice-serving")[0].node_name
    with CaptureQueriesContext(connection) as queries:
        cluster = fit_cluster()
    # One query more than a cluster of whole GPUs: what the GPU pods hold of MIG and shares.
    assert sum("unit_requests" in q["sql"] for q in queries) == 1
    fit_node = cluster.snapshot.nodes[cluster.snapshot.index[node]]
    gpu_pods = [p for p in fit_node.pods if p.name != OTHER_PODS]
    others = [p for p in fit_node.pods if p.name == OTHER_PODS]
    held = sum(dict(p.requests.extended).get(SLICE, 0) for p in gpu_pods)
    assert held == Node.objects.get(name=node).resources_requested[SLICE] > 0
    # The node's other pods no longer stand for the instances its GPU pods hold.
    assert all(dict(p.requests.extended).get(SLICE, 0) == 0 for p in others)
