"""kubesim's workload model: jobs arriving as pods through its own scheduler, queueing, running
and ending the way kubelets report each kind of failure, on a clock that runs fast, the same
with the same seed; and the pools of `kubesim.workload_scenarios` giving their known answers.

The pod fields checked here are the kubelet's and the scheduler's own strings
(kubernetes/kubernetes: pkg/kubelet/eviction/helpers.go `Reason = "Evicted"`,
nodeLowMessageFmt; pkg/kubelet/images/image_manager.go `Back-off pulling image %q`;
pkg/kubelet/kuberuntime `CreateContainerConfigError`; pkg/kubelet/status/status_manager.go
TerminatePod's `ContainerStatusUnknown`; pkg/kubelet/active_deadline.go `DeadlineExceeded`;
pkg/scheduler/framework/preemption `%s: preempting to accommodate a higher priority pod`,
`PreemptionByScheduler`).
"""

from __future__ import annotations

import collections
import json
import re
import shutil
import subprocess
import sys
import time
import urllib.parse
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from kubesim import backfill, dcgm, workload
from kubesim.clock import Clock, parse_rfc3339
from kubesim.cluster import Cluster
from kubesim.dcgm import Exporter
from kubesim.scenario import load_scenario
from kubesim.scheduling import node_gpus
from kubesim.seeding import seed
from kubesim.store import Store
from kubesim.workload_runner import WorkloadRunner
from kubesim.workload_scenarios import (
    DEMO,
    DEMO_ANSWERS,
    FAILURE_CATEGORY,
    INSIGHTS,
    INSIGHTS_ANSWERS,
    INSIGHTS_SEED,
    serve_arguments,
)
from tests.kubesim.conftest import http
from tests.kubesim_process import Kubesim, kubesim_server
from tests.servers import prometheus_server, wait_for

DAY = 86400.0
PARTS = ("major", "minor", "rev")
START = 1_790_035_200.0  # a UTC midnight (a Monday)


# The history as replayed at start, before any test runs the clock live: on a fast clock a
# pod's wait includes the real time the scheduler thread took to get to it (on a busy
# machine, a tenth of a second is six simulated minutes at 3,600 times).
REPLAYED: list[dict[str, Any]] = []


CLOCK_START = "2026-06-01T03:00:00Z"


@pytest.fixture(scope="module")
def sim(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Kubesim]:
    """The insights scenario with two days (and today so far) of its workload run."""
    workdir = tmp_path_factory.mktemp("workload")
    extra = serve_arguments(
        "insights", days=2, retention_days=5, openmetrics=str(workdir / "history")
    )
    # A fixed start: which jobs arrive in the hours a test runs the clock on depends on
    # the hour of the day, and these tests must not.
    extra += ["--clock-start", CLOCK_START]
    with kubesim_server(workdir, scenario="insights", extra=extra) as server:
        REPLAYED[:] = records(server)
        yield server


def records(sim: Kubesim) -> list[dict[str, Any]]:
    return http(sim, "GET", "/kubesim/workload/history").json()  # type: ignore[no-any-return]


def pods(sim: Kubesim) -> dict[str, dict[str, Any]]:
    items = http(sim, "GET", "/api/v1/pods").json()["items"]
    return {f"{p['metadata']['namespace']}/{p['metadata']['name']}": p for p in items}


def pool_of(record: dict[str, Any]) -> str:
    return next(c.pool for c in INSIGHTS if c.name == record["job_class"]) or ""


def container_state(pod: dict[str, Any]) -> dict[str, Any]:
    return pod["status"]["containerStatuses"][0]["state"]  # type: ignore[no-any-return]


def condition(pod: dict[str, Any], kind: str) -> dict[str, Any] | None:
    return next((c for c in pod["status"].get("conditions") or [] if c["type"] == kind), None)


def in_process(classes: tuple[workload.JobClass, ...], scenario: str, days: float) -> Cluster:
    cluster = Cluster(store=Store(Clock()))
    cluster.store.clock.set_now(START)
    seed(cluster, load_scenario(scenario))
    runner = WorkloadRunner(cluster, classes, seed=INSIGHTS_SEED, retention=DAY)
    runner.start(START)
    cluster.timers.run_until(START + days * DAY)
    cluster.runner = runner  # type: ignore[attr-defined]
    return cluster


# --- the model ---


def test_the_same_seed_plans_the_same_jobs_and_another_seed_others() -> None:
    job_class = INSIGHTS[2]
    first = workload.plan_window(job_class, 7, START, START + DAY)
    assert first == workload.plan_window(job_class, 7, START, START + DAY)
    assert first != workload.plan_window(job_class, 8, START, START + DAY)
    # About the class's rate: 4 an hour, 96 a day.
    assert job_class.arrivals_per_hour == 4.0
    assert 72 <= len(first) <= 120
    assert all(START <= job.arrival < START + DAY for job in first)


def test_a_cluster_replays_the_same_history_with_the_same_seed() -> None:
    def history() -> list[tuple[Any, ...]]:
        runner = in_process(INSIGHTS, "insights", 1).runner  # type: ignore[attr-defined]
        return [
            (r.name, r.node, r.slots, r.created, r.scheduled, r.finished, r.phase, r.reason)
            for r in runner.records.values()
        ]

    first = history()
    assert len(first) > 300
    assert first == history()


def test_run_times_follow_the_class_median_and_p90() -> None:
    job_class = workload.JobClass(
        "t", "ns", "team", "training", run_median=3600, run_p90=7200, arrivals_per_hour=50
    )
    runs = sorted(j.run_seconds for j in workload.plan_window(job_class, 1, START, START + DAY))
    median, p90 = runs[len(runs) // 2], runs[int(len(runs) * 0.9)]
    assert 3200 < median < 4000
    assert 6300 < p90 < 8100


# --- over HTTP: pods as the kubelet and the scheduler leave them ---


def test_finished_pods_stay_as_objects_with_their_times(sim: Kubesim) -> None:
    listed = pods(sim)
    finished = [r for r in records(sim) if r["finished"] and not r["deleted"]]
    assert len(finished) > 500
    for record in finished[:50]:
        pod = listed[f"{record['namespace']}/{record['name']}"]
        assert pod["status"]["phase"] == record["phase"]
        assert pod["spec"]["nodeName"] == record["node"]
        assert pod["metadata"]["labels"]["workload-type"] in ("training", "inference", "mixed")
        assert pod["metadata"]["labels"]["team"]
        assert condition(pod, "PodScheduled")["status"] == "True"  # type: ignore[index]
        assert condition(pod, "Ready")["reason"] == "PodCompleted"  # type: ignore[index]


def test_oom_killed_is_reason_oomkilled_exit_137(sim: Kubesim) -> None:
    listed = pods(sim)
    oom = [r for r in records(sim) if r["outcome"] == workload.OOM_KILLED and r["finished"]]
    assert oom
    pod = listed[f"{oom[0]['namespace']}/{oom[0]['name']}"]
    assert pod["status"]["phase"] == "Failed"
    terminated = container_state(pod)["terminated"]
    assert terminated["reason"] == "OOMKilled"
    assert terminated["exitCode"] == 137
    assert terminated["startedAt"] < terminated["finishedAt"]


def test_cuda_out_of_memory_is_exit_1_with_the_message(sim: Kubesim) -> None:
    listed = pods(sim)
    cuda = [r for r in records(sim) if r["outcome"] == workload.CUDA_OOM and r["finished"]]
    assert cuda
    pod = listed[f"{cuda[0]['namespace']}/{cuda[0]['name']}"]
    assert pod["status"]["phase"] == "Failed"
    terminated = container_state(pod)["terminated"]
    assert (terminated["reason"], terminated["exitCode"]) == ("Error", 1)
    assert "CUDA out of memory" in terminated["message"]
    assert pod["spec"]["containers"][0]["terminationMessagePolicy"] == "FallbackToLogsOnError"


def test_a_gpu_fault_shows_its_xid_on_the_pods_gpu_in_the_exporter(sim: Kubesim) -> None:
    faults = [r for r in records(sim) if r["outcome"] == workload.GPU_FAULT and r["finished"]]
    assert faults
    for record in faults:
        assert record["started"] <= record["xid_at"] <= record["finished"]
    # The exporter keeps each GPU's last XID: the latest fault on a GPU is the one it shows.
    latest: dict[tuple[str, int], dict[str, Any]] = {}
    for record in sorted(faults, key=lambda r: r["xid_at"]):
        latest[(record["node"], record["slots"][0])] = record
    (node, slot), record = next(iter(latest.items()))
    page = http(sim, "GET", "/kubesim/workload").json()
    assert page["xids"] >= len(faults)
    with urllib.request.urlopen(f"{sim.metrics_url}/metrics/node/{node}", timeout=10) as answer:
        text = answer.read().decode()
    line = next(
        line
        for line in text.splitlines()
        if line.startswith("DCGM_FI_DEV_XID_ERRORS{") and f'gpu="{slot}",' in line
    )
    assert f'err_code="{record["xid"]}"' in line
    assert line.endswith(f" {record['xid']}")
    pod = pods(sim)[f"{record['namespace']}/{record['name']}"]
    terminated = container_state(pod)["terminated"]
    assert (terminated["reason"], terminated["exitCode"]) == ("Error", 1)
    assert workload.XID_CUDA_ERRORS[record["xid"]] in terminated["message"]


def test_evicted_is_the_eviction_managers_status(sim: Kubesim) -> None:
    evicted = [r for r in records(sim) if r["outcome"] == workload.EVICTED and r["finished"]]
    assert evicted
    pod = pods(sim)[f"{evicted[0]['namespace']}/{evicted[0]['name']}"]
    status = pod["status"]
    assert (status["phase"], status["reason"]) == ("Failed", "Evicted")
    assert status["message"].startswith("The node was low on resource: memory. ")
    assert re.search(r"Container main was using \d+Gi, request is \d+Gi", status["message"])
    target = condition(pod, "DisruptionTarget")
    assert target is not None
    assert (target["status"], target["reason"]) == ("True", "TerminationByKubelet")
    assert target["message"] == status["message"]
    assert container_state(pod)["terminated"]["exitCode"] == 137
    events = http(
        sim,
        "GET",
        f"/api/v1/namespaces/{pod['metadata']['namespace']}/events"
        f"?fieldSelector=involvedObject.name={pod['metadata']['name']},reason=Evicted",
    ).json()["items"]
    if events:  # events expire (an hour, 5,000 at most), as a real API server's do
        assert events[0]["type"] == "Warning"
        assert events[0]["source"]["component"] == "kubelet"


def test_preempted_carries_the_schedulers_disruption_condition(sim: Kubesim) -> None:
    preempted = [r for r in records(sim) if r["outcome"] == workload.PREEMPTED and r["finished"]]
    assert preempted
    pod = pods(sim)[f"{preempted[0]['namespace']}/{preempted[0]['name']}"]
    target = condition(pod, "DisruptionTarget")
    assert target is not None
    assert target["reason"] == "PreemptionByScheduler"
    assert target["message"] == "default-scheduler: preempting to accommodate a higher priority pod"
    assert pod["status"]["phase"] == "Failed"
    assert container_state(pod)["terminated"]["exitCode"] == 137


def test_image_problems_wait_then_fail_at_the_deadline(sim: Kubesim) -> None:
    listed = pods(sim)
    for outcome in (workload.IMAGE_PULL, workload.CONFIG_ERROR):
        ended = [r for r in records(sim) if r["outcome"] == outcome and r["finished"]]
        assert ended, outcome
        record = ended[0]
        assert record["started"] is None  # the container never ran
        assert record["waiting_reason"] in ("ImagePullBackOff", "CreateContainerConfigError")
        pod = listed[f"{record['namespace']}/{record['name']}"]
        status = pod["status"]
        assert (status["phase"], status["reason"]) == ("Failed", "DeadlineExceeded")
        assert status["message"] == "Pod was active on the node longer than the specified deadline"
        terminated = container_state(pod)["terminated"]
        assert terminated == {
            "exitCode": 137,
            "reason": "ContainerStatusUnknown",
            "message": "The container could not be located when the pod was terminated",
        }


def test_a_watch_sees_each_waiting_reason_go_by(sim: Kubesim) -> None:
    since = http(sim, "GET", "/api/v1/pods?limit=1").json()["metadata"]["resourceVersion"]
    http(sim, "POST", "/kubesim/clock", {"advance": 6 * 3600})
    stream = http(
        sim,
        "GET",
        f"/api/v1/namespaces/team-misc/pods?watch=true&resourceVersion={since}&timeoutSeconds=1",
        timeout=30,
    ).body.decode()
    waiting: dict[str, dict[str, Any]] = {}
    for line in stream.splitlines():
        pod = json.loads(line)["object"]
        for status in pod["status"].get("containerStatuses") or []:
            state = status["state"].get("waiting")
            if state:
                waiting.setdefault(state["reason"], state)
    assert set(waiting) >= {"ErrImagePull", "ImagePullBackOff", "CreateContainerConfigError"}
    assert waiting["ErrImagePull"]["message"].startswith("rpc error: code = NotFound")
    assert re.fullmatch(r'Back-off pulling image "[^"]+"', waiting["ImagePullBackOff"]["message"])
    assert re.fullmatch(
        r'secret "[a-z0-9-]+-token" not found', waiting["CreateContainerConfigError"]["message"]
    )
    # The kubelet's own words in its events, as `kubectl describe pod` shows them.
    events = http(
        sim, "GET", "/api/v1/namespaces/team-misc/events?fieldSelector=reason=Failed"
    ).json()["items"]
    messages = {e["message"] for e in events}
    assert "Error: ErrImagePull" in messages
    assert "Error: ImagePullBackOff" in messages
    assert any(re.fullmatch(r'Error: secret "[a-z0-9-]+" not found', m) for m in messages)


def test_a_job_that_fits_nowhere_queues_in_the_schedulers_words(sim: Kubesim) -> None:
    listed = pods(sim)
    waiting = [
        p
        for p in listed.values()
        if p["metadata"]["namespace"] == "team-queue" and not p["spec"].get("nodeName")
    ]
    assert waiting
    pod = waiting[0]
    assert pod["status"]["phase"] == "Pending"
    scheduled = condition(pod, "PodScheduled")
    assert scheduled is not None
    assert (scheduled["status"], scheduled["reason"]) == ("False", "Unschedulable")
    # kube-scheduler sorts the "count reason" strings as strings: "13 ..." before "2 ...".
    assert scheduled["message"] == (
        "0/15 nodes are available: 13 node(s) didn't match Pod's node affinity/selector, "
        "2 Insufficient nvidia.com/gpu. preemption: 0/15 nodes are available: "
        "13 Preemption is not helpful for scheduling, "
        "2 No preemption victims found for incoming pod."
    )
    name = pod["metadata"]["name"]
    events = http(
        sim,
        "GET",
        f"/apis/events.k8s.io/v1/namespaces/team-queue/events"
        f"?fieldSelector=regarding.name={name},reason=FailedScheduling",
    ).json()["items"]
    assert events
    assert events[0]["reportingController"] == "default-scheduler"
    assert events[0]["note"].startswith("0/15 nodes are available:")
    # Queued jobs start when GPUs free up: creation to scheduling takes a while.
    waited = [
        r["scheduled"] - r["created"]
        for r in records(sim)
        if r["job_class"] == "queue-train" and r["scheduled"]
    ]
    assert max(waited) > 1800


def test_the_clock_brings_new_jobs(sim: Kubesim) -> None:
    before = {r["name"] for r in records(sim)}
    was = parse_rfc3339(http(sim, "GET", "/kubesim/clock").json()["now"])
    now = parse_rfc3339(http(sim, "POST", "/kubesim/clock", {"advance": 3600}).json()["now"])
    new = [r for r in records(sim) if r["name"] not in before]
    assert new
    # Each arrived at its own moment of the hour the clock ran through.
    assert all(was <= r["created"] <= now for r in new)
    assert len({int(r["created"]) for r in new}) > 1


def test_a_fast_clock_runs_the_workload_live(sim: Kubesim) -> None:
    """At 3,600 times real speed the timer thread, the scheduler and the kubelet go on by
    themselves: jobs arrive, bind and end without anyone advancing the clock."""
    before = {r["name"]: r for r in records(sim)}
    http(sim, "POST", "/kubesim/clock", {"scale": 3600})
    try:

        def moved() -> bool:
            now = records(sim)
            new = [r for r in now if r["name"] not in before]
            ended = [r for r in new if r["finished"]]
            return bool(ended)

        wait_for(moved, timeout=60, what="jobs arriving and ending on a fast clock")
    finally:
        http(sim, "POST", "/kubesim/clock", {"scale": 1})
    pod = next(
        p
        for p in pods(sim).values()
        if p["metadata"]["name"] not in before
        and p["metadata"].get("labels", {}).get(workload.CLASS_LABEL)
        and p["status"]["phase"] in ("Succeeded", "Failed")
    )
    assert condition(pod, "PodScheduled")["status"] == "True"  # type: ignore[index]


# --- the scenarios' known answers ---


def test_each_insights_pool_gives_its_known_answer(sim: Kubesim) -> None:
    history = REPLAYED
    by_pool: dict[str, list[dict[str, Any]]] = collections.defaultdict(list)
    for record in history:
        by_pool[pool_of(record)].append(record)
    span = max(r["created"] for r in history) - min(r["created"] for r in history)
    for pool, answer in INSIGHTS_ANSWERS.items():
        rows = by_pool[pool]
        held = sum(
            r["gpus"] * ((r["finished"] or r["started"] or 0) - (r["started"] or 0))
            for r in rows
            if r["started"]
        )
        share = held / (answer.gpus * span)
        assert share < 0.1 if answer.idle else share > 0.2, (pool, share)
        waits = sorted(r["scheduled"] - r["created"] for r in rows if r["scheduled"])
        p90 = waits[int(len(waits) * 0.9)]
        assert p90 > 600 if answer.queues else p90 < 60, (pool, p90)
        failed = [r for r in rows if r["phase"] == "Failed"]
        outcomes = {r["outcome"] for r in failed}
        assert outcomes <= answer.failure_outcomes, pool
        categories = collections.Counter(FAILURE_CATEGORY[r["outcome"]] for r in failed)
        dominant = categories.most_common(1)[0][0] if categories else None
        if answer.dominant_failure:
            assert dominant == answer.dominant_failure, (pool, categories)
        else:
            assert dominant not in ("oom", "gpu_fault"), (pool, categories)
    misc = {r["outcome"] for r in by_pool["misc-pool"] if r["phase"] == "Failed"}
    assert misc == INSIGHTS_ANSWERS["misc-pool"].failure_outcomes


def test_gpu_models_and_drivers_as_the_exporter_and_feature_discovery_give_them(
    sim: Kubesim,
) -> None:
    nodes = http(sim, "GET", "/api/v1/nodes").json()["items"]
    with urllib.request.urlopen(f"{sim.metrics_url}/metrics", timeout=10) as answer:
        text = answer.read().decode()
    for pool, answer in INSIGHTS_ANSWERS.items():
        members = [n for n in nodes if n["metadata"]["labels"].get("gpu-pool") == pool]
        assert len(members) == answer.nodes
        drivers = {
            ".".join(n["metadata"]["labels"][f"nvidia.com/cuda.driver.{p}"] for p in PARTS)
            for n in members
        }
        assert drivers == answer.drivers, pool
        names = {n["metadata"]["name"] for n in members}
        seen = set()
        for line in text.splitlines():
            if not line.startswith("DCGM_FI_DEV_FB_USED{"):
                continue
            labels = dict(re.findall(r'(\w+)="([^"]*)"', line))
            if labels["Hostname"] in names:
                seen.add((labels["modelName"], labels["DCGM_FI_DRIVER_VERSION"]))
        assert {m for m, _ in seen} == answer.gpu_models, pool
        assert {d for _, d in seen} == answer.drivers, pool


def test_the_demo_has_intruders_and_pods_that_never_fit() -> None:
    cluster = in_process(DEMO, "demo", 2)
    pods_now = cluster.store.objects["pods"]
    pending = {key.split("/")[1] for key in cluster.pending}
    assert DEMO_ANSWERS.pending_pods <= pending
    intruders = [
        e.obj
        for e in pods_now.values()
        if e.obj["metadata"].get("labels", {}).get(workload.CLASS_LABEL)
        == DEMO_ANSWERS.intruder_class
    ]
    assert intruders
    for pod in intruders:
        node = cluster.store.objects["nodes"][pod["spec"]["nodeName"]].obj
        assert node["metadata"]["labels"]["gpu-pool"] == DEMO_ANSWERS.intruded_pool
        taint = node["spec"]["taints"][0]["key"]
        assert taint not in {t.get("key") for t in pod["spec"].get("tolerations") or []}


def test_finished_pods_go_after_the_retention() -> None:
    cluster = in_process(INSIGHTS, "insights", 0.5)
    runner = cluster.runner  # type: ignore[attr-defined]
    first = next(r for r in runner.records.values() if r.finished)
    key = f"{first.namespace}/{first.name}"
    assert key in cluster.store.objects["pods"]
    cluster.timers.run_until(first.finished + DAY + 1)
    assert key not in cluster.store.objects["pods"]
    assert runner.records[key].deleted == pytest.approx(first.finished + DAY, abs=1)


def test_backfilled_history_is_queryable_in_prometheus(sim: Kubesim, tmp_path: Path) -> None:
    promtool = shutil.which("promtool")
    if promtool is None:
        pytest.skip("no promtool (Debian's prometheus package has it)")
    history = sim.kubeconfig.parent / "history"
    wait_for(lambda: (history / "complete").exists(), timeout=120, what="the history's samples")
    written = json.loads((history / "complete").read_text())
    assert written["samples"]["gpu_util.om"] > 0
    assert written["start"] < written["end"]
    data = tmp_path / "prom" / "data"
    for source in sorted(history.glob("*.om")):
        argv = [promtool, "tsdb", "create-blocks-from", "openmetrics"]
        subprocess.run([*argv, "--max-block-duration=1000h", str(source), str(data)], check=True)
    stamps = [r["created"] for r in records(sim)]
    middle = (min(stamps) + max(stamps)) / 2
    with prometheus_server(tmp_path / "prom") as prometheus:

        def query(expression: str) -> list[dict[str, Any]]:
            url = f"{prometheus.url}/api/v1/query?" + urllib.parse.urlencode(
                {"query": expression, "time": str(middle)}
            )
            with urllib.request.urlopen(url, timeout=30) as answer:
                return json.loads(answer.read())["data"]["result"]  # type: ignore[no-any-return]

        # Every GPU of the cluster has a sample at any moment of the history.
        count = query("count(DCGM_FI_DEV_GPU_UTIL)")
        assert int(count[0]["value"][1]) == 112
        # The pool built to be idle is, over the day around that moment.
        idle = query('avg(avg_over_time(DCGM_FI_DEV_GPU_UTIL{Hostname=~"idle-.*"}[12h]))')
        assert float(idle[0]["value"][1]) < 10
        busy = query('avg(avg_over_time(DCGM_FI_DEV_GPU_UTIL{Hostname=~"queue-.*"}[12h]))')
        assert float(busy[0]["value"][1]) > 60
        # The workload's pods, as a ServiceMonitor's scrape labels them.
        held = query('count by (exported_namespace) (DCGM_FI_DEV_FB_USED{exported_pod!=""})')
        assert {r["metric"]["exported_namespace"] for r in held} >= {"team-queue"}
        faults = query('count(last_over_time(DCGM_FI_DEV_XID_ERRORS{err_code!="0"}[3d]))')
        assert int(faults[0]["value"][1]) >= 1


def test_the_backfill_ends_where_the_live_exporter_goes_on() -> None:
    """Each GPU's last backfilled holder is the pod the exporter reports on it now (the demo's
    own pods included, on nodes no job was ever bound to): the same series carry on."""
    cluster = in_process(DEMO, "demo", 1)
    runner = cluster.runner  # type: ignore[attr-defined]
    end = START + DAY
    exporter = Exporter(cluster)
    taken = backfill.snapshot(
        runner, exporter, start=START, end=end, step=300, target_labels={"job": "dcgm-exporter"}
    )
    checked = 0
    for name, found in cluster.store.objects["nodes"].items():
        holders = exporter.holders(name, node_gpus(found.obj))
        for slot, holder in enumerate(holders):
            spans = [h for h in taken.held.get((name, slot), []) if h.start <= end - 1 < h.end]
            backfilled = re.search(r'exported_pod="([^"]+)"', spans[0].labels) if spans else None
            live = holder.obj["metadata"]["name"] if holder else None
            assert (backfilled.group(1) if backfilled else None) == live, (name, slot)
            checked += 1
    assert checked == 192


def test_the_backfill_has_only_the_fields_the_exporter_collects(tmp_path: Path) -> None:
    cluster = in_process(INSIGHTS, "insights", 0.25)
    exporter = Exporter(cluster, counters=["DCGM_FI_DEV_GPU_UTIL", "DCGM_FI_DEV_XID_ERRORS"])
    taken = backfill.snapshot(
        cluster.runner,  # type: ignore[attr-defined]
        exporter,
        start=START,
        end=START + DAY / 4,
        step=300,
        target_labels={"job": "dcgm-exporter"},
    )
    written = backfill.write_files(tmp_path, taken)
    assert set(written) == {"gpu_util.om", "xid_errors.om"}
    assert sorted(p.name for p in tmp_path.glob("*.om")) == ["gpu_util.om", "xid_errors.om"]
    # 112 GPUs, one sample each 5 minutes of the 6 hours.
    assert written["gpu_util.om"] == 112 * 72
    text = (tmp_path / "gpu_util.om").read_text()
    assert text.endswith("# EOF\n")
    assert text.count("DCGM_FI_DEV_GPU_UTIL{") == 112 * 72


def _samples(text: str, metric: str) -> dict[tuple[str, str], float]:
    """(labels without the metric name, time) -> value, for every sample of `metric`."""
    found = {}
    for line in text.splitlines():
        if line.startswith(metric + "{"):
            labels, value, at = line[len(metric) :].rsplit(" ", 2)
            found[(labels, at)] = float(value)
    return found


def test_the_backfill_has_temperature_and_power_as_the_exporter_computes_them(
    tmp_path: Path,
) -> None:
    """Every figure the node page charts has its history: temperature and power follow the
    utilisation sample of the same GPU at the same moment, as the live exporter's do."""
    cluster = in_process(INSIGHTS, "insights", 0.25)
    exporter = Exporter(cluster)
    taken = backfill.snapshot(
        cluster.runner,  # type: ignore[attr-defined]
        exporter,
        start=START,
        end=START + DAY / 8,
        step=300,
        target_labels={"job": "dcgm-exporter"},
    )
    written = backfill.write_files(tmp_path, taken)
    assert {"gpu_temp.om", "power_usage.om"} <= set(written)
    util = _samples((tmp_path / "gpu_util.om").read_text(), "DCGM_FI_DEV_GPU_UTIL")
    temp = _samples((tmp_path / "gpu_temp.om").read_text(), "DCGM_FI_DEV_GPU_TEMP")
    power = _samples((tmp_path / "power_usage.om").read_text(), "DCGM_FI_DEV_POWER_USAGE")
    assert len(util) == 112 * 36 and set(util) <= set(temp) and set(util) <= set(power)
    assert {v for v in util.values()} != {0.0}  # some GPUs worked
    for (labels, at), value in util.items():
        # The file rounds utilisation; temperature and power follow the unrounded figure,
        # so they may differ by what half a percent moves them. The GPU's model is in its
        # labels (modelName), which is what the exporter's power curve reads.
        assert abs(temp[labels, at] - dcgm.temperature(value)) <= 1, labels
        assert abs(power[labels, at] - dcgm.power_draw(labels, value)) <= 4, labels


def test_the_clock_starts_where_it_is_told_and_the_history_ends_there(sim: Kubesim) -> None:
    now = parse_rfc3339(http(sim, "GET", "/kubesim/clock").json()["now"])
    start = parse_rfc3339(CLOCK_START)
    assert now >= start  # it runs on from there (and the tests here advance it)
    assert now < time.time() - 30 * 86400  # not today: the history is that start's
    created = [float(r["created"]) for r in REPLAYED]
    # Two days replayed from the start of the UTC day, up to the start.
    assert start - 3 * 86400 <= min(created) and max(created) <= start


def test_a_clock_start_that_is_not_a_utc_time_is_refused_in_one_line() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "kubesim", "serve", "--clock-start", "yesterday"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 2
    assert "argument --clock-start: 'yesterday' is not a UTC time" in done.stderr


def test_a_mig_instances_history_is_its_engine_activity(tmp_path: Path) -> None:
    """DCGM reports no GPU_UTIL for a MIG instance: its history is engine activity (the
    ratio of its utilisation), as the live exporter reports it; whole GPUs keep GPU_UTIL."""
    cluster = in_process((), "mig", 0.0)
    exporter = Exporter(cluster)
    taken = backfill.snapshot(
        cluster.runner,  # type: ignore[attr-defined]
        exporter,
        start=START,
        end=START + DAY / 24,
        step=300,
        target_labels={"job": "dcgm-exporter"},
    )
    written = backfill.write_files(tmp_path, taken)
    instances = sum(1 for gpu in taken.gpus if gpu[4])
    assert instances > 0
    engine = _samples(
        (tmp_path / "gr_engine_active.om").read_text(), "DCGM_FI_PROF_GR_ENGINE_ACTIVE"
    )
    assert written["gr_engine_active.om"] == len(engine) == instances * 12
    assert all('GPU_I_ID="' in labels for labels, _ in engine)
    assert all(0.0 <= value <= 1.0 for value in engine.values())
    util = _samples((tmp_path / "gpu_util.om").read_text(), "DCGM_FI_DEV_GPU_UTIL")
    assert not any('GPU_I_ID="' in labels for labels, _ in util)
    # Without a MIG instance there is no engine activity file at all.
    plain = backfill.write_files(
        tmp_path / "plain",
        backfill.snapshot(
            in_process((), "demo", 0.0).runner,  # type: ignore[attr-defined]
            exporter,
            start=START,
            end=START + DAY / 24,
            step=300,
            target_labels={},
        ),
    )
    assert "gr_engine_active.om" not in plain
    assert not (tmp_path / "plain" / "gr_engine_active.om").exists()
