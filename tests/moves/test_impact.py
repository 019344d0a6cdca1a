"""The move preview's impact: pods evicted or left, Pending pods let start, gang capacity."""

from __future__ import annotations

import json

import pytest
from django.test import Client
from django.utils import timezone

from pools import moves
from pools.models import Pool
from pools.moves.impact import EVICTED, LEFT, move_impact
from tests.factories import demo_inventory, gpu_node
from tests.fit.rows import TOLERATE_TRAINING, TRAINING_AFFINITY, gpu_pod
from tests.moves_helpers import user_in

pytestmark = pytest.mark.django_db


@pytest.fixture
def demo(db):  # type: ignore[no-untyped-def]
    demo_inventory()
    gpu_pod("notebook-a100-reserve-000", "research", node="a100-reserve-000")
    gpu_pod("big-train", gpus=8, affinity=TRAINING_AFFINITY, tolerations=TOLERATE_TRAINING)


def impact_of(nodes: list[str], destination: str, drain_policy: str):  # type: ignore[no-untyped-def]
    ask = moves.MoveAsk(
        node_names=nodes,
        destination=Pool.objects.get(name=destination),
        reason="impact",
        drain_policy=drain_policy,
    )
    plan = moves.move_plan(ask=ask, now=timezone.now())
    return move_impact(plan, drain_policy=drain_policy)


def test_drain_first_evicts_and_lets_the_pending_job_start(demo):  # type: ignore[no-untyped-def]
    impact = impact_of(["a100-reserve-000"], "training", "drain-first")
    (fate,) = impact.pods["a100-reserve-000"]
    assert (fate.pod, fate.fate) == ("research/notebook-a100-reserve-000", EVICTED)
    assert impact.would_start == ["ml-training/big-train"]
    changes = {c.pool: c for c in impact.pools}
    assert (
        changes["training"].before.whole_free_nodes,
        changes["training"].after.whole_free_nodes,
    ) == (0, 1)
    assert changes["training"].after.largest_free_block == 8
    assert changes["mixed"].role == "source"
    assert changes["mixed"].after.nodes == changes["mixed"].before.nodes - 1
    assert impact.warnings == []
    assert impact.units == []  # whole GPUs only: no other kind changes


def test_leave_running_keeps_the_pod_and_the_queue_does_not_shrink(demo):  # type: ignore[no-untyped-def]
    impact = impact_of(["a100-reserve-000"], "training", "leave-running")
    (fate,) = impact.pods["a100-reserve-000"]
    assert fate.fate == LEFT
    assert impact.would_start == []
    assert impact.warnings == [
        "training's pending queue would not shrink: none of its 1 pending pod would start "
        "on the moved nodes."
    ]


def test_a_source_below_its_running_gang_is_warned(demo):  # type: ignore[no-untyped-def]
    for i in (1, 2):
        gpu_pod(
            f"sweep-{i}",
            "research",
            gpus=7,
            node=f"a100-reserve-00{i}",
            owner_kind="Job",
            owner_name="sweep",
        )
    moved = [f"a100-reserve-00{i}" for i in range(2, 9)]
    impact = impact_of(moved, "training", "leave-running")
    # Two reserve nodes stay (16 GPUs): the gang of 14 can still start there.
    assert not any("sweep" in w for w in impact.warnings)
    impact = impact_of([*moved, "a100-reserve-001"], "training", "leave-running")
    assert impact.warnings[-1] == (
        "mixed would fall below what its running gang Job research/sweep needs: the gang holds "
        "14 GPUs, the pool would have 8."
    )


def test_preview_page_and_dry_run_api_show_the_impact(demo):  # type: ignore[no-untyped-def]
    client = Client()
    client.force_login(user_in("requesters", "rita"))
    form = {
        "nodes": "a100-reserve-000",
        "destination": "training",
        "reason": "more training",
        "drain_policy": "drain-first",
        "drain_deadline_minutes": "30",
        "preview": "1",
    }
    html = client.post("/moves/new/", form).content.decode()
    assert 'data-evicted="research/notebook-a100-reserve-000"' in html
    assert 'data-would-start="ml-training/big-train"' in html
    assert 'data-impact-pool="training"' in html
    response = client.post(
        "/api/v1/moves/dry-run/",
        json.dumps(
            {
                "nodes": ["a100-reserve-000"],
                "destination": "training",
                "drain_policy": "drain-first",
            }
        ),
        content_type="application/json",
    )
    assert response.status_code == 200, response.content
    impact = response.json()["impact"]
    assert impact["would_start"] == ["ml-training/big-train"]
    assert impact["pods"]["a100-reserve-000"][0]["fate"] == "evicted"
    training = next(p for p in impact["pools"] if p["pool"] == "training")
    assert training["after"]["whole_free_nodes"] == 1


def test_a_gang_that_loses_pods_and_cannot_restart_is_warned(demo):  # type: ignore[no-untyped-def]
    for i in (1, 2):
        gpu_pod(
            f"sweep-{i}",
            "research",
            gpus=7,
            node=f"a100-reserve-00{i}",
            owner_kind="Job",
            owner_name="sweep",
        )
    # Room elsewhere: draining reserve-001 evicts sweep-1, and the 7 GPUs free on each
    # other reserve node are enough for the gang to start again.
    impact = impact_of(["a100-reserve-001"], "training", "drain-first")
    assert not any("sweep" in w for w in impact.warnings)
    for i in (0, 3, 4, 5, 6, 7, 8):
        gpu_pod(f"filler-{i}", "research", gpus=8, node=f"a100-reserve-00{i}")
    impact = impact_of(["a100-reserve-001"], "training", "drain-first")
    assert impact.warnings[-1] == (
        "Job research/sweep loses pods to the move and needs 14 GPUs to start again; mixed "
        "would have 8."
    )
    many = [f"a100-reserve-00{i}" for i in (0, 1, 3, 4, 5, 6, 7, 8)]
    impact = impact_of(many, "training", "drain-first")
    assert impact.warnings[-1] == (
        "mixed would fall below what its running gang Job research/sweep needs: the gang "
        "holds 14 GPUs, the pool would have 8."
    )


def test_a_noexecute_destination_taint_evicts_the_pods_that_do_not_tolerate_it(demo):  # type: ignore[no-untyped-def]
    Pool.objects.filter(name="training").update(taint_effect="NoExecute")
    gpu_pod(
        "tolerant",
        "research",
        node="a100-reserve-000",
        tolerations=[{"key": "workload-training", "operator": "Exists"}],
    )
    gpu_pod(
        "noschedule-only",
        "research",
        node="a100-reserve-000",
        tolerations=TOLERATE_TRAINING,  # effect NoSchedule: no cover for NoExecute
    )
    impact = impact_of(["a100-reserve-000"], "training", "leave-running")
    fates = {f.pod: (f.fate, f.why) for f in impact.pods["a100-reserve-000"]}
    assert fates == {
        "research/notebook-a100-reserve-000": (
            EVICTED,
            "does not tolerate the taint workload-training=true:NoExecute",
        ),
        "research/noschedule-only": (
            EVICTED,
            "does not tolerate the taint workload-training=true:NoExecute",
        ),
        "research/tolerant": (LEFT, ""),
    }


def test_a_move_that_mixes_gpu_models_into_a_pool_is_warned(demo):  # type: ignore[no-untyped-def]
    # The default pools accept any model: nothing refuses the H100 in an A100 pool.
    assert Pool.objects.get(name="training").accepted_gpu_models == []
    impact = impact_of(["h100-infer-000"], "training", "leave-running")
    (warning,) = [w for w in impact.warnings if "would mix" in w]
    assert warning.startswith(
        "training would mix GPU models: h100-infer-000 brings NVIDIA-H100-80GB-HBM3, its "
        "nodes have NVIDIA-A100-SXM4-80GB."
    )
    # Same model, no warning; into an empty pool, nothing to mix with.
    assert not [
        w
        for w in impact_of(["a100-reserve-000"], "training", "leave-running").warnings
        if "would mix" in w
    ]
    html = (
        client_for_requester()
        .post(
            "/moves/new/",
            {
                "nodes": "h100-infer-000",
                "destination": "training",
                "reason": "more",
                "drain_policy": "leave-running",
                "drain_deadline_minutes": "30",
                "preview": "1",
            },
        )
        .content.decode()
    )
    assert "training would mix GPU models" in html


def test_a_move_that_mixes_drivers_into_a_pool_is_warned(demo):  # type: ignore[no-untyped-def]
    driver = "nvidia.com/cuda.driver-version.full"
    gpu_node("a100-drv-000", "training", extra_labels={driver: "535.104.05"})
    gpu_node("a100-drv-001", "mixed", extra_labels={driver: "550.54.15"})
    gpu_node("a100-drv-002", "mixed", extra_labels={driver: "535.104.05"})
    mixing = [
        w for w in impact_of(["a100-drv-001"], "training", "leave-running").warnings if "mix" in w
    ]
    assert mixing == [
        "training would mix driver versions: a100-drv-001 brings 550.54.15, its nodes have "
        "535.104.05. Jobs asking for any GPU land on either, and capacity moves between pools "
        "only help where node specs match."
    ]
    assert not [
        w for w in impact_of(["a100-drv-002"], "training", "leave-running").warnings if "mix" in w
    ]


def client_for_requester() -> Client:
    client = Client()
    client.force_login(user_in("requesters", "rita"))
    return client


def test_mig_nodes_into_a_pool_of_whole_gpu_workloads_are_warned_with_the_pods(demo):  # type: ignore[no-untyped-def]
    from pools.models import Node

    # a100-reserve-000, split into 56 1g.10gb instances as the inventory records it.
    Node.objects.filter(name="a100-reserve-000").update(
        devices={
            "model": "NVIDIA-A100-SXM4-80GB",
            "memory_mib": 81920,
            "gpus": 8,
            "mig_gpus": 8,
            "units": [["mig", "nvidia.com/gpu", "1g.10gb", "", 1, 56]],
            "operator": {},
        }
    )
    gpu_pod("llm-worker-0", "team", node="a100-train-000", gpus=8)
    impact = impact_of(["a100-reserve-000"], "training", "leave-running")
    (warning,) = [w for w in impact.warnings if "whole GPUs" in w]
    assert "training's workloads run on whole GPUs (team/llm-worker-0" in warning
    assert "(a100-reserve-000: MIG 1g.10gb)" in warning
    # A node of whole GPUs brings no such warning.
    whole = impact_of(["a100-train-drift-000"], "inference", "leave-running").warnings
    assert not [w for w in whole if "whole GPUs" in w]
