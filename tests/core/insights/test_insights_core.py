"""The insights' pure rules over plain records: percentiles, failure classification, the
queue's room, concurrency, gaps."""

from __future__ import annotations

import statistics
from collections import Counter

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pools.core.insights.failures import (
    Cause,
    XidErrors,
    classify,
    failed,
    failure_report,
    xid_during_run,
)
from pools.core.insights.profiles import concurrency, workload_profiles
from pools.core.insights.queueing import NodeMembership, QueueCause, queue_report
from pools.core.insights.records import HistoryPod, InsightNode, Window
from pools.core.insights.replacement import node_traits
from pools.core.insights.scheduling import pod_scheduling, wanted_pool
from pools.core.insights.stats import percentile, spread
from pools.core.insights.utilisation import idle_nodes_each_step, job_history
from pools.metrics.insights import xid_onsets


def record(**fields: object) -> HistoryPod:
    base: dict[str, object] = {
        "namespace": "ml",
        "name": "job",
        "node": "n1",
        "pool": "training",
        "phase": "Failed",
        "gpus": 1,
        "cpu_milli": 0,
        "memory_bytes": 0,
        "team": "",
        "workload_type": "",
        "created": 0.0,
        "scheduled": 1.0,
        "started": 2.0,
        "finished": 100.0,
        "reason": "",
        "exit_code": 1,
        "message": "",
        "waiting_reason": "",
        "restarts": 0,
    }
    return HistoryPod(**{**base, **fields})  # type: ignore[arg-type]


@given(st.lists(st.floats(-1e6, 1e6), min_size=2, max_size=50))
def test_median_is_the_statistics_median(values: list[float]) -> None:
    assert percentile(sorted(values), 50) == pytest.approx(statistics.median(values), abs=1e-6)


@given(st.lists(st.floats(0, 100), min_size=1, max_size=50), st.floats(0, 100))
def test_a_percentile_lies_between_the_extremes(values: list[float], q: float) -> None:
    found = percentile(sorted(values), q)
    assert found is not None and min(values) - 1e-9 <= found <= max(values) + 1e-9


def test_empty_values_have_no_percentile() -> None:
    assert percentile([], 90) is None
    assert spread([]).count == 0


def test_classification_keeps_the_causes_apart() -> None:
    assert classify(record(reason="OOMKilled", exit_code=137)) == Cause.OOM
    assert classify(record(message="RuntimeError: CUDA error: out of memory")) == Cause.OOM
    assert classify(record(message="NVRM: Xid 79, GPU has fallen off the bus")) == Cause.GPU_FAULT
    assert classify(record(reason="UnexpectedAdmissionError")) == Cause.GPU_FAULT
    assert (
        classify(record(waiting_reason="ImagePullBackOff", phase="Pending", started=None))
        == Cause.IMAGE
    )
    assert classify(record(reason="CreateContainerConfigError")) == Cause.IMAGE
    assert classify(record(reason="Evicted")) == Cause.EVICTION
    assert classify(record(reason="Preempting")) == Cause.EVICTION
    assert classify(record(reason="Error")) == Cause.OTHER
    assert classify(record(reason="Error"), xid_during_run=True) == Cause.GPU_FAULT
    # The job asked for too much: an XID at the same time does not make it the GPU's fault.
    assert classify(record(reason="OOMKilled"), xid_during_run=True) == Cause.OOM


@pytest.mark.parametrize(
    ("fields", "cause"),
    [
        ({"message": "RuntimeError: CUDA error: unspecified launch failure"}, Cause.GPU_FAULT),
        (
            {"message": "CUDA driver version is insufficient for CUDA runtime version"},
            Cause.GPU_FAULT,
        ),
        (
            {"message": "Failed to initialize NVML: Driver/library version mismatch"},
            Cause.GPU_FAULT,
        ),
        ({"reason": "OutOfnvidia.com/gpu", "started": None, "exit_code": None}, Cause.RESOURCES),
        ({"reason": "OutOfcpu", "started": None, "exit_code": None}, Cause.RESOURCES),
        ({"reason": "DeadlineExceeded", "exit_code": 137}, Cause.TIMEOUT),
        ({"reason": "Error", "message": "ValueError: no such config"}, Cause.OTHER),
    ],
)
def test_the_seeds_classes_are_all_kept_apart(fields: dict[str, object], cause: Cause) -> None:
    pod = record(**fields)
    assert failed(pod) and classify(pod) == cause


_REASONS = st.sampled_from(
    ["", "Error", "OOMKilled", "Evicted", "DeadlineExceeded", "OutOfnvidia.com/gpu"]
)
_MESSAGES = st.sampled_from(["", "CUDA error: unspecified launch failure", "CUDA out of memory"])


@st.composite
def _pods(draw: st.DrawFn) -> HistoryPod:
    created = draw(st.floats(0, 1000))
    started = draw(st.one_of(st.none(), st.floats(created, created + 100)))
    finished = draw(st.one_of(st.none(), st.floats(started or created, 1200)))
    return record(
        namespace=draw(st.sampled_from(["a", "b"])),
        name=f"p{draw(st.integers(0, 10**6))}",
        node=draw(st.sampled_from(["n1", "n2"])),
        phase=draw(st.sampled_from(["Failed", "Succeeded", "Running", "Pending"])),
        created=created,
        started=started,
        finished=finished,
        reason=draw(_REASONS),
        exit_code=draw(st.sampled_from([None, 0, 1, 137])),
        message=draw(_MESSAGES),
        waiting_reason=draw(st.sampled_from(["", "ErrImagePull"])),
    )


@given(st.lists(_pods(), max_size=30), st.floats(0, 1000))
def test_the_profiles_count_the_failures_the_report_counts(
    pods: list[HistoryPod], start: float
) -> None:
    """However the pods fall around the window, the profiles' failures add up to the pool's
    report, class by class: one classifier, one rule for which failures are the window's."""
    window = Window(start, start + 400)
    xids = XidErrors({"n1": [500.0]}, 60.0)
    report = failure_report(pods, window, xids=xids)
    summed: Counter[Cause] = Counter()
    for profile in workload_profiles(pods, window, xids=xids):
        summed.update(profile.failures)
    assert {c: n for c, n in report.counts.items() if n} == dict(summed)


def test_a_pod_that_succeeded_did_not_fail() -> None:
    assert not failed(record(phase="Succeeded", exit_code=0))
    assert failed(
        record(phase="Pending", exit_code=None, waiting_reason="ErrImagePull", started=None)
    )
    # An image pull that failed once, then the container ran and succeeded.
    assert not failed(record(phase="Succeeded", exit_code=0, waiting_reason="ImagePullBackOff"))


def test_an_xid_counts_only_while_the_pod_ran_on_its_node() -> None:
    pod = record(node="n1", started=100.0, finished=200.0)
    assert xid_during_run(pod, {"n1": [150.0]})
    assert not xid_during_run(pod, {"n1": [50.0, 250.0]})
    assert not xid_during_run(pod, {"n2": [150.0]})
    assert xid_during_run(record(started=100.0, finished=None), {"n1": [1e9]})


def test_an_xid_seen_at_the_step_after_the_run_ended_counts() -> None:
    """An XID kills its job within seconds: read a step at a time, the new error shows at
    the first step after the pod ended. It appeared at most one step before that."""
    pod = record(node="n1", started=100.0, finished=200.0)
    assert xid_during_run(pod, {"n1": [750.0]}, step=600.0)
    assert not xid_during_run(pod, {"n1": [850.0]}, step=600.0)
    assert not xid_during_run(pod, {"n1": [90.0]}, step=600.0)


def test_xid_onsets_are_the_steps_where_a_gpu_s_last_xid_appears_or_changes() -> None:
    # The exporter keeps a GPU's last XID: one error shows at every later step.
    values = {0.0: 79.0, 600.0: 79.0, 1200.0: 79.0, 2400.0: 79.0, 3000.0: 48.0, 3600.0: 48.0}
    # At the window's first step the error is older than the window; after a gap (the
    # exporter restarted) it is new again; then another code.
    assert xid_onsets(values, 600.0, first=0.0) == [2400.0, 3000.0]


def test_concurrency_peak_and_typical() -> None:
    window = Window(0.0, 100.0)
    # Two pods at once for 10 s, one for 60 s, none for 30 s: typically one.
    peak, typical = concurrency([(0.0, 70.0), (10.0, 20.0)], window)
    assert (peak, typical) == (2, 1.0)
    assert concurrency([], window) == (0, None)


def test_gaps_are_between_jobs_on_one_node_with_overlaps_merged() -> None:
    pods = [
        record(node="n1", started=0.0, finished=10.0),
        record(node="n1", started=5.0, finished=20.0),
        record(node="n1", started=50.0, finished=60.0),
        record(node="n2", started=0.0, finished=100.0),
    ]
    history = job_history(pods, {"n1": 8, "n2": 8, "n3": 8}, Window(0.0, 100.0))
    assert history.gaps == [30.0]
    assert history.busy_share == (30 + 100) / 300
    # n3 never runs a job: a node is always empty.
    assert history.empty_node_share == 1.0
    assert history.allocated_share == (10 + 15 + 10 + 100) / 2400


def test_a_node_is_empty_while_fewer_nodes_than_the_pool_run_jobs() -> None:
    pods = [
        record(node="n1", started=0.0, finished=60.0),
        record(node="n2", started=30.0, finished=100.0),
    ]
    history = job_history(pods, {"n1": 1, "n2": 1}, Window(0.0, 100.0))
    assert history.empty_node_share == 0.7  # both busy from 30 to 60 only


def test_the_pool_a_pod_asks_for() -> None:
    affinity = {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [
                    {"matchExpressions": [{"key": "gpu-pool", "operator": "In", "values": ["a"]}]}
                ]
            }
        }
    }
    assert wanted_pool({}, affinity, "gpu-pool") == "a"
    assert wanted_pool({"gpu-pool": "b"}, None, "gpu-pool") == "b"
    assert wanted_pool({}, None, "gpu-pool") == ""
    tolerations = [{"key": "workload-a", "operator": "Exists", "effect": "NoSchedule"}]
    scheduling = pod_scheduling({}, affinity, tolerations)
    assert scheduling.tolerates("workload-a", "true", "NoSchedule")
    assert not scheduling.tolerates("workload-b", "true", "NoSchedule")


def test_a_step_without_an_idle_node_counts_zero_idle_nodes_on_the_chart() -> None:
    average = [(0.0, 40.0), (60.0, 10.0), (120.0, 80.0)]
    # Prometheus returns no sample where no node was idle (the count of an empty set).
    assert idle_nodes_each_step(average, [(60.0, 2.0)]) == [(0.0, 0.0), (60.0, 2.0), (120.0, 0.0)]
    # No utilisation reported at a step: nothing is known, nothing is drawn.
    assert idle_nodes_each_step([], [(60.0, 2.0)]) == []


def test_a_queue_grows_across_the_history_not_across_an_empty_window() -> None:
    """A history younger than the window: its halves are those of the history."""
    window = Window(0.0, 1000.0)
    pods = [
        record(pool="p", created=at, scheduled=at + 120, finished=None)
        for at in (800.0, 850.0, 910.0, 960.0)
    ]
    q = queue_report(pods, [], "p", window)
    assert q.queued == 4
    assert (q.first_half, q.second_half) == (2, 2) and not q.growing


def test_readiness_messages_count_in_words_not_in_parentheses() -> None:
    from pools.core.insights.readiness import LoanFact, loans_end

    one_open = loans_end([LoanFact(move_id=7, loan_until=2000.0, nodes=1)], now=1000.0)
    assert one_open.detail == "1 open loan, each with an end still ahead."
    overdue = loans_end([LoanFact(move_id=7, loan_until=None, nodes=1)], now=1000.0)
    assert overdue.detail == "1 loan past the end set and not returned."
    assert overdue.concerned == ["move #7 (1 node)"]


def test_room_on_unassigned_nodes_is_its_own_cause_not_node_selection() -> None:
    """Unassigned nodes carry no pool's labels, so no pool's pod is steered there: a pod
    that waited while only they had room waited for nodes no pool holds, not for its node
    selection (and not for a shortage: the cluster had the room)."""
    window = Window(0.0, 10_000.0)
    busy = record(pool="p", node="n1", gpus=8, created=0.0, scheduled=1.0, finished=None)
    waited = record(pool="p", node="n1", gpus=8, created=100.0, scheduled=7300.0, finished=None)
    nodes = [NodeMembership("n1", 8, "p"), NodeMembership("u1", 8, None)]
    q = queue_report([busy, waited], nodes, "p", window)
    assert q.queued == 1
    assert q.count(QueueCause.UNASSIGNED) == 1
    assert (q.count(QueueCause.SHORTAGE), q.count(QueueCause.RESTRICTED)) == (0, 0)
    # The same free node in another pool is room the pod's selection kept it from.
    elsewhere = [NodeMembership("n1", 8, "p"), NodeMembership("q1", 8, "q")]
    q = queue_report([busy, waited], elsewhere, "p", window)
    assert (q.count(QueueCause.SHORTAGE), q.count(QueueCause.RESTRICTED)) == (0, 1)


def test_free_gpus_in_pieces_are_fragmentation_not_shortage() -> None:
    """Two 8-GPU nodes each half used hold 8 free GPUs, but an 8-GPU pod fits on neither:
    it waited for fragmentation. With one of them full, the pool had 4 free: shortage."""
    window = Window(0.0, 10_000.0)
    half = [
        record(pool="p", node=n, gpus=4, created=0.0, scheduled=1.0, finished=None)
        for n in ("n1", "n2")
    ]
    big = record(pool="p", node="n1", gpus=8, created=100.0, scheduled=7300.0, finished=None)
    nodes = [NodeMembership("n1", 8, "p"), NodeMembership("n2", 8, "p")]
    q = queue_report([*half, big], nodes, "p", window)
    assert q.queued == 1
    assert q.count(QueueCause.FRAGMENTED) == 1 and q.count(QueueCause.SHORTAGE) == 0
    full = record(pool="p", node="n2", gpus=4, created=0.0, scheduled=2.0, finished=None)
    q = queue_report([*half, full, big], nodes, "p", window)
    assert q.count(QueueCause.SHORTAGE) == 1 and q.count(QueueCause.FRAGMENTED) == 0


def test_fragmentation_follows_nodes_that_leave_the_pool() -> None:
    """A node lent away before the pod came takes its free GPUs with it: what is left in
    pieces is counted over the nodes the pool held then."""
    window = Window(0.0, 10_000.0)
    half = [
        record(pool="p", node=n, gpus=4, created=0.0, scheduled=1.0, finished=None)
        for n in ("n1", "n2")
    ]
    big = record(pool="p", node="n1", gpus=8, created=100.0, scheduled=7300.0, finished=None)
    lent = [NodeMembership("n1", 8, "p"), NodeMembership("n2", 8, "p", moves=((50.0, "q"),))]
    q = queue_report([*half, big], lent, "p", window)
    assert q.count(QueueCause.FRAGMENTED) == 0 and q.count(QueueCause.SHORTAGE) == 1


def _gang_world(gang: str) -> list[HistoryPod]:
    """Four 8-GPU nodes holding 4, 4, 6 and 6 GPUs: 12 free, 4 on two nodes, 2 on the
    others. Then three 4-GPU workers of one job (or of three lone pods) wait two hours."""
    held = [
        record(pool="p", node=n, gpus=g, created=0.0, scheduled=1.0, finished=None)
        for n, g in (("n1", 4), ("n2", 4), ("n3", 6), ("n4", 6))
    ]
    workers = [
        record(
            pool="p", node="n1", gpus=4, created=100.0 + i, scheduled=7300.0, finished=None,
            gang=gang,
        )
        for i in range(3)
    ]  # fmt: skip
    return [*held, *workers]


def test_a_gang_waits_as_one_so_room_for_some_of_it_is_fragmentation() -> None:
    """Two of the three workers would fit, each alone, but the job starts all three or
    none: the pool had its 12 GPUs in pieces, so the gang waited for fragmentation; three
    lone pods (no gang) each saw a node with room in their pool."""
    window = Window(0.0, 10_000.0)
    nodes = [NodeMembership(n, 8, "p") for n in ("n1", "n2", "n3", "n4")]
    gang = queue_report(_gang_world("ml/PyTorchJob/train"), nodes, "p", window)
    assert gang.queued == 3
    assert gang.count(QueueCause.FRAGMENTED) == 3 and gang.count(QueueCause.OWN_POOL_ROOM) == 0
    alone = queue_report(_gang_world(""), nodes, "p", window)
    assert alone.count(QueueCause.OWN_POOL_ROOM) == 3


def test_a_gang_too_big_for_the_pool_s_free_gpus_is_a_shortage() -> None:
    window = Window(0.0, 10_000.0)
    nodes = [NodeMembership(n, 8, "p") for n in ("n1", "n2", "n3", "n4")]
    pods = _gang_world("ml/Job/train")
    pods += [
        record(
            pool="p", node="n1", gpus=4, created=103.0 + i, scheduled=7300.0, finished=None,
            gang="ml/Job/train",
        )
        for i in range(1)
    ]  # fmt: skip
    q = queue_report(pods, nodes, "p", window)  # four workers: 16 GPUs, 12 free
    assert q.count(QueueCause.SHORTAGE) == 4


def test_the_driver_is_read_from_gfds_major_and_minor_when_nothing_else_says_it() -> None:
    gfd = {"nvidia.com/cuda.driver.major": "535", "nvidia.com/cuda.driver.minor": "104"}
    assert node_traits(InsightNode("n1", "p", 8, labels=gfd))["driver"] == "535.104"
    full = {**gfd, "nvidia.com/cuda.driver-version.full": "535.104.05"}
    assert node_traits(InsightNode("n1", "p", 8, labels=full))["driver"] == "535.104.05"
    assert node_traits(InsightNode("n1", "p", 8, labels=gfd, driver="550.54"))["driver"] == "550.54"


def test_a_mig_or_shared_nodes_gpu_model_is_its_physical_gpu() -> None:
    """GFD names a single-strategy MIG node's product with its profile and a shared GPU's
    with -SHARED: the same GPU as the pool's whole A100s, in another layout."""
    for product in ("NVIDIA-A100-SXM4-80GB-MIG-1g.10gb", "NVIDIA-A100-SXM4-80GB-SHARED"):
        traits = node_traits(InsightNode("n1", "p", 56, gpu_model=product))
        assert traits["gpu_model"] == "NVIDIA-A100-SXM4-80GB"


@pytest.mark.parametrize("reason", ["PreemptionByScheduler", "PreemptionByKubeScheduler"])
def test_a_pod_the_scheduler_preempted_failed_by_eviction(reason: str) -> None:
    """Its container says only "Error", exit 137; its DisruptionTarget condition's reason,
    which the pod's record keeps, says the scheduler evicted it."""
    assert classify(record(reason=reason, exit_code=137)) == Cause.EVICTION
