"""The drills' checks and the system-reserved readiness check (pure), on observations whose
right answer is known, and as properties over any observation."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from pools.core.drills import (
    GpuFaultObservation,
    NodeJoinObservation,
    NodeShape,
    NoRoomObservation,
    TimeoutObservation,
    gpu_fault_checks,
    jobs_on_node,
    joining_node,
    no_room_checks,
    node_join_checks,
    timeout_checks,
)
from pools.core.insights.readiness import Status, system_reserved
from pools.core.insights.records import InsightNode
from pools.core.snapshot import is_gpu_node, node_snapshot

GIB = 1024**3


def fault(**changes: object) -> GpuFaultObservation:
    base = {
        "node": "n1",
        "gpu": 0,
        "xid": 79,
        "xid_seen": 79,
        "metrics_error": "",
        "pods_before": ("ml/a",),
        "pods_still": (),
        "pending_before": 0,
        "pending_during": 0,
        "spare_nodes": 1,
        "restored": True,
    }
    return GpuFaultObservation(**{**base, **changes})  # type: ignore[arg-type]


def statuses(checks: list) -> dict[str, str]:  # type: ignore[type-arg]
    return {c.name: str(c.status) for c in checks}


def test_a_gpu_fault_the_portal_missed_or_could_not_read() -> None:
    assert statuses(gpu_fault_checks(fault(xid_seen=0)))["flagged"] == "fail"
    unknown = gpu_fault_checks(fault(xid_seen=None, metrics_error="connection refused"))[0]
    assert unknown.status == Status.UNKNOWN and "connection refused" in unknown.detail


def test_jobs_that_stay_on_the_faulty_node_are_named() -> None:
    stayed = gpu_fault_checks(fault(pods_before=("ml/a", "ml/b"), pods_still=("ml/b",)))[1]
    assert stayed.status == Status.FAIL and "ml/b" in stayed.detail and "ml/a" not in stayed.detail


@given(
    seen=st.one_of(st.none(), st.integers(0, 200)),
    still=st.integers(0, 3),
    pending=st.tuples(st.integers(0, 5), st.integers(0, 5)),
    spare=st.integers(0, 3),
    restored=st.booleans(),
)
def test_a_gpu_fault_passes_only_when_every_check_does(  # type: ignore[no-untyped-def]
    seen, still, pending, spare, restored
) -> None:
    o = fault(
        xid_seen=seen,
        pods_still=tuple(f"ml/p{i}" for i in range(still)),
        pending_before=pending[0],
        pending_during=pending[1],
        spare_nodes=spare,
        restored=restored,
    )
    checks = statuses(gpu_fault_checks(o))
    assert list(checks) == ["flagged", "jobs_moved", "room", "restored"]
    all_pass = all(s == "pass" for s in checks.values())
    grew = pending[1] > pending[0]
    assert all_pass == (seen == 79 and still == 0 and (not grew or spare > 0) and restored)


def test_a_new_node_seen_in_a_pool_is_not_recognised_as_unassigned() -> None:
    o = NodeJoinObservation("drill-new-node-1", True, "training", 300, removed=True)
    recognised = node_join_checks(o)[0]
    assert recognised.status == Status.FAIL and "pool training" in recognised.detail


def test_the_joining_node_is_an_unassigned_gpu_node_nothing_lands_on() -> None:
    raw = joining_node("drill-new-node-7", NodeShape("NVIDIA-L40S", 4, 46068), 7)
    snapshot = node_snapshot(raw)
    assert is_gpu_node(raw) and snapshot.gpu_count == 4 and snapshot.gpu_model == "NVIDIA-L40S"
    assert "gpu-pool" not in snapshot.labels
    assert snapshot.taints == [{"key": "gpu-portal/drill", "value": "7", "effect": "NoSchedule"}]
    assert snapshot.cpu_allocatable_milli < snapshot.cpu_capacity_milli


def node(name: str, cpu: tuple[int, int], memory: tuple[int, int]) -> InsightNode:
    return InsightNode(
        name,
        "training",
        8,
        cpu_capacity=cpu[0],
        cpu_allocatable=cpu[1],
        memory_capacity=memory[0],
        memory_allocatable=memory[1],
    )


def test_system_reserved_lists_each_node_with_what_it_lacks() -> None:
    nodes = [
        node("ok", (96_000, 95_000), (1024 * GIB, 1000 * GIB)),
        node("no-cpu", (96_000, 96_000), (1024 * GIB, 1000 * GIB)),
        node("none", (96_000, 96_000), (1024 * GIB, 1024 * GIB)),
        node("old-row", (0, 96_000), (0, 1024 * GIB)),
    ]
    check = system_reserved(nodes)
    assert check.status == Status.FAIL
    assert check.concerned == [
        "no-cpu (CPU: nothing reserved)",
        "none (CPU: nothing reserved; memory: nothing reserved)",
    ]
    assert "Capacity unknown for old-row" in check.detail
    passing = system_reserved(nodes[:1])
    assert passing.status == Status.PASS and "1 CPU on ok" in passing.detail
    assert "24.0 GiB on ok" in passing.detail
    assert system_reserved(nodes[3:]).status == Status.UNKNOWN


def test_daemonset_and_static_pods_are_not_jobs_that_should_leave_a_faulty_node() -> None:
    pods = [
        {"namespace": "gpu-operator", "name": "nvidia-dcgm-exporter-x1", "owner_kind": "DaemonSet"},
        {"namespace": "gpu-operator", "name": "nvidia-device-plugin-x1", "owner_kind": "DaemonSet"},
        {"namespace": "kube-system", "name": "kube-proxy-n1", "owner_kind": "Node"},
        {"namespace": "ml", "name": "train-0", "owner_kind": "Job"},
        {"namespace": "ml", "name": "serve-1", "owner_kind": "ReplicaSet"},
        {"namespace": "ml", "name": "bare", "owner_kind": ""},
    ]
    assert jobs_on_node(pods) == ["ml/bare", "ml/serve-1", "ml/train-0"]


def no_room(**changes: object) -> NoRoomObservation:
    refused = "0/5 nodes are available: 5 Insufficient nvidia.com/gpu."
    base = {
        "pod": "default/drill-no-room-1",
        "gpus": 5,
        "largest_free": 4,
        "bound_to": "",
        "scheduler_message": refused,
        "portal_message": refused,
        "fit_fits": False,
        "fit_message": "0/5 nodes are available: 5 Insufficient nvidia.com/gpu.",
        "removed": True,
    }
    return NoRoomObservation(**{**base, **changes})  # type: ignore[arg-type]


def _statuses(o: NoRoomObservation) -> dict[str, Status]:
    return {c.name: c.status for c in no_room_checks(o)}


def test_a_pod_kept_pending_for_want_of_gpus_everywhere_passes_every_check() -> None:
    assert set(_statuses(no_room()).values()) == {Status.PASS}


def test_each_place_that_does_not_say_lack_of_gpus_fails_its_own_check() -> None:
    bound = _statuses(no_room(bound_to="a100-train-000", scheduler_message=""))
    assert bound["scheduler_refuses"] == Status.FAIL
    other = _statuses(no_room(scheduler_message="0/5 nodes are available: 5 node(s) had taint"))
    assert other["scheduler_refuses"] == Status.FAIL
    unseen = no_room(portal_message=None)
    assert _statuses(unseen)["portal_shows"] == Status.FAIL
    detail = next(c.detail for c in no_room_checks(unseen) if c.name == "portal_shows")
    assert "is the watcher running" in detail
    assert _statuses(no_room(fit_fits=True))["fit_says_no_room"] == Status.FAIL
    assert _statuses(no_room(fit_fits=None, fit_message=""))["fit_says_no_room"] == Status.FAIL
    left = next(c for c in no_room_checks(no_room(removed=False)) if c.name == "removed")
    assert (
        left.status == Status.FAIL
        and "kubectl delete pod -n default drill-no-room-1" in left.detail
    )


def timed_out(**changes: object) -> TimeoutObservation:
    base = {
        "pod": "default/drill-timeout-1",
        "deadline_seconds": 15,
        "started": True,
        "phase": "Failed",
        "cluster_reason": "DeadlineExceeded",
        "portal_reason": "DeadlineExceeded",
        "portal_cause": "timeout",
        "removed": True,
    }
    return TimeoutObservation(**{**base, **changes})  # type: ignore[arg-type]


def _timeout_statuses(o: TimeoutObservation) -> dict[str, Status]:
    return {c.name: c.status for c in timeout_checks(o)}


def test_a_job_failed_at_its_deadline_and_counted_a_timeout_passes() -> None:
    assert set(_timeout_statuses(timed_out()).values()) == {Status.PASS}


def test_a_deadline_nothing_enforced_or_a_timeout_read_as_other_fails_its_check() -> None:
    running = timed_out(phase="Running", cluster_reason="", portal_reason=None, portal_cause=None)
    assert _timeout_statuses(running)["cluster_ends_it"] == Status.FAIL
    detail = next(c.detail for c in timeout_checks(running) if c.name == "cluster_ends_it")
    assert "nothing enforces activeDeadlineSeconds" in detail
    never = next(
        c.detail
        for c in timeout_checks(timed_out(started=False, phase="Pending"))
        if c.name == "cluster_ends_it"
    )
    assert "never started" in never
    other = timed_out(portal_reason="Error", portal_cause="other")
    assert _timeout_statuses(other)["reported_as_timeout"] == Status.FAIL
    assert (
        _timeout_statuses(timed_out(portal_reason=None, portal_cause=None))["reported_as_timeout"]
        == Status.FAIL
    )
