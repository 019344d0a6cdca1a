"""The patcher against kubesim: one guarded PATCH, nothing more, nothing unmanaged touched."""

from __future__ import annotations

import itertools
import logging
from datetime import datetime

import pytest
import urllib3

from pools.core.desired import PoolSpec
from pools.core.taints import Taint
from pools.kube import patcher
from pools.kube.errors import KubeRefused, KubeUnavailable
from pools.kube.nodes import read_node
from pools.kube.patcher import PatchConflict, apply_pool, plan
from pools.models import Pool
from tests.kubesim_process import Kubesim
from tests.servers import wait_for

pytestmark = pytest.mark.both_backends


def specs() -> tuple[dict[str, PoolSpec], list[PoolSpec]]:
    pools = [p.spec() for p in Pool.objects.all()]
    return {p.name: p for p in pools}, pools


@pytest.mark.django_db
def test_training_to_inference_changes_exactly_the_managed_keys(cluster: Kubesim) -> None:
    by_name, pools = specs()
    core = cluster.core()
    core.patch_node(
        "a100-train-000",
        {
            "metadata": {"labels": {"team": "vision"}},
            "spec": {
                "taints": [
                    {"key": "workload-training", "value": "true", "effect": "NoSchedule"},
                    {"key": "nvidia.com/maintenance", "effect": "PreferNoSchedule"},
                ]
            },
        },
    )
    before = core.read_node("a100-train-000")

    result = apply_pool("a100-train-000", by_name["inference"], pools)

    assert result.patched
    after = core.read_node("a100-train-000")
    changed = {
        k
        for k in set(before.metadata.labels) | set(after.metadata.labels)
        if before.metadata.labels.get(k) != after.metadata.labels.get(k)
    }
    assert changed == {"gpu-pool", "workload-type", "batch-scheduling"}
    assert after.metadata.labels["gpu-pool"] == "inference"
    assert after.metadata.labels["team"] == "vision"
    assert after.metadata.labels["nvidia.com/gpu.product"] == "NVIDIA-A100-SXM4-80GB"
    assert [(t.key, t.value, t.effect) for t in after.spec.taints] == [
        ("nvidia.com/maintenance", None, "PreferNoSchedule"),
        ("workload-inference", "true", "NoSchedule"),
    ]
    assert cluster.count("patch", name="a100-train-000") == 2  # ours and the setup's
    assert result.diff.taints_removed == (Taint("workload-training", "true", "NoSchedule"),)


@pytest.mark.django_db
def test_a_second_identical_run_sends_no_patch(cluster: Kubesim) -> None:
    by_name, pools = specs()
    first = apply_pool("gpu-new-000", by_name["training"], pools)
    second = apply_pool("gpu-new-000", by_name["training"], pools)
    assert first.patched and not second.patched
    assert second.diff.is_empty
    assert cluster.count("patch", name="gpu-new-000") == 1
    assert cluster.count("get", name="gpu-new-000") == 2


@pytest.mark.django_db
def test_the_plan_reads_and_sends_nothing(cluster: Kubesim) -> None:
    by_name, pools = specs()
    _, _, diff = plan(read_node("a100-train-drift-000"), by_name["training"], pools)
    assert diff.taints_added == (Taint("workload-training", "true", "NoSchedule"),)
    assert cluster.count("patch") == 0


@pytest.mark.kubesim_only("injects 409 conflicts into chosen PATCHes")
@pytest.mark.django_db
def test_a_concurrent_writer_causing_409_is_handled(cluster: Kubesim) -> None:
    by_name, pools = specs()
    cluster.control("faults", {"conflicts": {"gpu-new-001": 2}})
    result = apply_pool("gpu-new-001", by_name["inference"], pools)
    assert result.patched and result.conflicts == 2
    codes = [
        e["responseStatus"]["code"]
        for e in cluster.audit_events()
        if e["verb"] == "patch" and e["objectRef"]["name"] == "gpu-new-001"
    ]
    assert codes == [409, 409, 200]
    node = cluster.core().read_node("gpu-new-001")
    assert node.metadata.labels["gpu-pool"] == "inference"
    assert "kubesim.io/concurrent-writer" in node.metadata.annotations  # the other write kept


@pytest.mark.kubesim_only("marks a node NotReady just before a write, through the API server")
@pytest.mark.django_db
def test_system_taints_survive_the_409_they_cause_untouched(cluster: Kubesim) -> None:
    """The node lifecycle controller taints a node between our read and our PATCH: the
    PATCH meets a 409, and the retry keeps the controller's taint exactly as it wrote it."""
    by_name, pools = specs()
    cluster.control("faults", {"ready_before_write": {"a100-train-000": "False"}})
    result = apply_pool("a100-train-000", by_name["inference"], pools)
    assert result.patched and result.conflicts == 1
    taints = {(t.key, t.effect): t for t in cluster.core().read_node("a100-train-000").spec.taints}
    assert set(taints) == {
        ("node.kubernetes.io/not-ready", "NoSchedule"),
        ("workload-inference", "NoSchedule"),
    }
    assert taints[("node.kubernetes.io/not-ready", "NoSchedule")].time_added is not None


@pytest.mark.django_db
def test_a_cordoned_nodes_unschedulable_taint_keeps_its_time(cluster: Kubesim) -> None:
    by_name, pools = specs()
    core = cluster.core()
    core.patch_node("gpu-new-000", {"spec": {"unschedulable": True}})
    # A real cluster's node lifecycle controller adds the taint a moment after the cordon.
    wait_for(
        lambda: core.read_node("gpu-new-000").spec.taints, timeout=30, what="the cordon's taint"
    )
    (system,) = core.read_node("gpu-new-000").spec.taints
    apply_pool("gpu-new-000", by_name["training"], pools)
    after = {t.key: t for t in core.read_node("gpu-new-000").spec.taints}
    assert set(after) == {"node.kubernetes.io/unschedulable", "workload-training"}
    assert after["node.kubernetes.io/unschedulable"].time_added == system.time_added


@pytest.mark.kubesim_only("injects 409 conflicts into every PATCH")
@pytest.mark.django_db
def test_endless_conflicts_give_up_with_a_clear_error(cluster: Kubesim, settings) -> None:  # type: ignore[no-untyped-def]
    settings.PATCH_MAX_CONFLICTS = 2
    by_name, pools = specs()
    cluster.control("faults", {"conflicts": {"gpu-new-001": 10}})
    with pytest.raises(PatchConflict, match="changed under us 3 times"):
        apply_pool("gpu-new-001", by_name["inference"], pools)
    assert "gpu-pool" not in cluster.core().read_node("gpu-new-001").metadata.labels


def node_requests(sim: Kubesim) -> list[dict]:  # type: ignore[type-arg]
    """kubesim's audit log of the requests about nodes, in the order they were served."""
    return [e for e in sim.audit_events() if e.get("objectRef", {}).get("resource") == "nodes"]


def waits_after_refusals(sim: Kubesim) -> list[float]:
    """For each 429 or 503 kubesim answered about a node, the seconds until the client's next
    request arrived."""
    waits = []
    for answered, following in itertools.pairwise(node_requests(sim)):
        if answered["responseStatus"]["code"] in (429, 503):
            waits.append(
                (
                    at(following["requestReceivedTimestamp"]) - at(answered["stageTimestamp"])
                ).total_seconds()
            )
    return waits


def at(timestamp: str) -> datetime:
    return datetime.strptime(timestamp, "%Y-%m-%dT%H:%M:%S.%fZ")


@pytest.mark.kubesim_only("injects 5xx and 429 answers into the API server")
@pytest.mark.django_db
@pytest.mark.parametrize("status", [503, 429, 500])
def test_transient_errors_are_retried_then_succeed(
    cluster: Kubesim,
    status: int,
    caplog,  # type: ignore[no-untyped-def]
) -> None:
    by_name, pools = specs()
    cluster.control(
        "faults",
        {
            "fail_next": [
                {"status": status, "count": 2, "verb": "patch"},
                {"status": status, "count": 1, "verb": "get"},
            ]
        },
    )
    with caplog.at_level(logging.WARNING, logger="pools.kube.retry"):
        result = apply_pool("gpu-new-000", by_name["mixed"], pools)
    assert result.patched
    codes = [(e["verb"], e["responseStatus"]["code"]) for e in node_requests(cluster)]
    assert codes == [("get", status), ("get", 200), *[("patch", status)] * 2, ("patch", 200)]
    assert len(caplog.records) == 3  # each retry is logged, with its wait
    if status in (429, 503):  # kubesim sends Retry-After: 1, a floor for the backoff
        waits = waits_after_refusals(cluster)
        assert len(waits) == 3 and min(waits) >= 1.0, waits


@pytest.mark.kubesim_only("injects 503 answers into the API server")
@pytest.mark.django_db
def test_transient_errors_give_up_after_the_bound(cluster: Kubesim, settings) -> None:  # type: ignore[no-untyped-def]
    settings.PATCH_MAX_RETRIES = 2
    by_name, pools = specs()
    cluster.control("faults", {"fail_next": [{"status": 503, "count": 10, "verb": "patch"}]})
    with pytest.raises(
        KubeUnavailable,
        match=r"patching node gpu-new-000: API server answered "
        r"503.*gave up after 3 attempts",
    ):
        apply_pool("gpu-new-000", by_name["mixed"], pools)
    assert cluster.count("patch") == 3


@pytest.mark.kubesim_only("drops the API server's connection mid-request")
@pytest.mark.django_db
def test_a_dropped_connection_is_retried(cluster: Kubesim) -> None:
    by_name, pools = specs()
    cluster.control("faults", {"fail_next": [{"status": "drop", "count": 1, "verb": "patch"}]})
    result = apply_pool("gpu-new-000", by_name["mixed"], pools)
    assert result.patched
    assert cluster.count("patch", name="gpu-new-000") >= 1


@pytest.mark.django_db
def test_403_fails_at_once_with_the_servers_message(cluster: Kubesim, settings) -> None:  # type: ignore[no-untyped-def]
    settings.KUBE_CONTEXT = cluster.readonly_context
    by_name, pools = specs()
    with pytest.raises(KubeRefused) as caught:
        apply_pool("gpu-new-000", by_name["training"], pools)
    assert caught.value.status == 403
    assert str(caught.value) == (
        'patching node gpu-new-000: API server answered 403 Forbidden: nodes "gpu-new-000" is '
        f'forbidden: User "{cluster.readonly_user}" cannot patch resource "nodes" in API group '
        '"" at the cluster scope'
    )
    assert cluster.count("patch") == 1  # no retry of a permanent error


@pytest.mark.django_db
def test_a_missing_node_is_a_clear_404(cluster: Kubesim) -> None:
    by_name, pools = specs()
    with pytest.raises(
        KubeRefused,
        match='reading node nope: API server answered 404 Not Found: nodes "nope" not found',
    ):
        apply_pool("nope", by_name["training"], pools)


@pytest.mark.django_db
def test_a_patch_whose_answer_is_lost_is_reported_as_applied(
    cluster: Kubesim,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The API server applies the PATCH and then hangs: the client times out, retries the
    same body, meets a 409 (its own change moved the resourceVersion) and reads the node
    back already in the target state. That change is ours, not "nothing to change"."""
    by_name, pools = specs()
    monkeypatch.setattr(patcher, "_send_patch", applied_then_timed_out(patcher._send_patch))
    result = apply_pool("gpu-new-000", by_name["mixed"], pools)
    assert result.patched and result.answer_lost and result.conflicts == 1
    assert result.diff.labels_added["gpu-pool"] == "mixed"
    assert result.before.labels.get("gpu-pool") is None
    assert result.after.labels["gpu-pool"] == "mixed"
    codes = [e["responseStatus"]["code"] for e in node_requests(cluster) if e["verb"] == "patch"]
    assert codes == [200, 409]


def applied_then_timed_out(send):  # type: ignore[no-untyped-def]
    """`send`, whose first answer is lost after the API server applied the PATCH."""
    calls = []

    def sending(name: str, body: dict) -> dict:  # type: ignore[type-arg]
        answer = send(name, body)
        calls.append(name)
        if len(calls) == 1:
            raise urllib3.exceptions.ReadTimeoutError(None, f"/api/v1/nodes/{name}", "timed out")
        return answer

    return sending
