"""The insights end to end on kubesim's `insights` scenario, whose right answers are known
(kubesim.workload_scenarios.INSIGHTS_ANSWERS): its workload history replayed, that history's
DCGM samples imported into a real Prometheus with `promtool tsdb create-blocks-from
openmetrics` (the project's recording rules loaded, the live exporter scraped on), the
inventory filling the pod history from the simulated cluster; then every indicator read
through the API and the pages and compared with the pool's known answer and with the
workload's own record of each pod, and each advisor rule seen firing on its pool only.

The replay ends at a fixed time (today's UTC midnight) and kubesim's clock stays there, so
the pods the portal reads are exactly the ones kubesim's record lists, the same two days of
jobs at any hour; every expected figure comes from that record (or the scenario's stated
answers), none from the portal's own functions."""

from __future__ import annotations

import collections
import json
import shutil
import statistics
import subprocess
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from django.test import Client

from kubesim.workload_scenarios import FAILURE_CATEGORY, INSIGHTS, INSIGHTS_ANSWERS, serve_arguments
from pools.fleet import selectors
from pools.inventory import inventory_sync
from pools.metrics.node_figures import latest_node_metrics, reads_recorded
from pools.models import Node, Pool
from tests.api.conftest import api
from tests.insights.test_pages import session
from tests.kubesim_process import ADMIN_TOKEN, Kubesim, kubesim_server
from tests.servers import PrometheusServer, prometheus_server, wait_for, wait_rules_caught_up

pytestmark = pytest.mark.django_db

DAYS = 7  # the API's window; the history is shorter (the answers hold from one day on)
HISTORY_DAYS = 2
# The replay ends at today's UTC midnight, and kubesim's clock stays there: exactly two
# whole days of history, the same jobs whatever the hour the test runs, inside the window.
REPLAY_END = datetime.now(UTC).strftime("%Y-%m-%dT00:00:00Z")
# The indicators read a window at 720 points (README): over 7 days, one every 14 minutes.
WINDOW_STEP_SECONDS = DAYS * 86400 / 720
# What Prometheus's scrape of the exporter adds (tests.servers.prometheus_server): the
# backfilled series are the ones the live scrape continues.
SCRAPE_LABELS = "job=dcgm-exporter,namespace=gpu-operator,pod=nvidia-dcgm-exporter-sim"
# The portal's names for the workload's failure categories.
CAUSE_OF_CATEGORY = {
    "oom": "oom",
    "gpu_fault": "gpu_fault",
    "image": "image",
    "disruption": "eviction",
}
# The scenario's pools as a platform team would declare them: the queueing pool's nodes
# carry a taint its jobs tolerate; the labels are those the nodes carry.
POOLS = {
    "idle-pool": ("inference", None),
    "queue-pool": ("training", "workload-training"),
    "oom-pool": ("training", None),
    "mixed-pool": ("inference", None),
    "fault-pool": ("training", None),
    "misc-pool": ("mixed", None),
}


@dataclass
class Stack:
    sim: Kubesim
    prom: PrometheusServer
    history: list[dict[str, Any]]  # the workload's record of every pod


def _get(sim: Kubesim, path: str) -> Any:
    request = urllib.request.Request(
        f"{sim.url}{path}", headers={"Authorization": f"Bearer {ADMIN_TOKEN}"}
    )
    with urllib.request.urlopen(request, timeout=30) as response:
        return json.loads(response.read())


def _import_history(history: Path, data: Path) -> None:
    promtool = shutil.which("promtool")
    if promtool is None:
        pytest.skip("no promtool (Debian's prometheus package has it)")
    wait_for(lambda: (history / "complete").exists(), timeout=120, what="the history's samples")
    for source in sorted(history.glob("*.om")):
        argv = [promtool, "tsdb", "create-blocks-from", "openmetrics", "--max-block-duration=1000h"]
        subprocess.run([*argv, str(source), str(data)], check=True, capture_output=True)


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    workdir = tmp_path_factory.mktemp("insights-e2e")
    history = workdir / "history"
    extra = serve_arguments("insights", days=HISTORY_DAYS, openmetrics=str(history), end=REPLAY_END)
    extra += ["--history-labels", SCRAPE_LABELS]
    with kubesim_server(workdir / "kubesim", scenario="insights", extra=extra) as sim:
        _import_history(history, workdir / "prom" / "data")
        target = sim.metrics_url.removeprefix("http://")
        with prometheus_server(workdir / "prom", scrape_targets=[target]) as prom:
            wait_rules_caught_up(prom)
            yield Stack(sim, prom, _get(sim, "/kubesim/workload/history"))


@pytest.fixture
def portal(stack: Stack, settings) -> Stack:  # type: ignore[no-untyped-def]
    settings.KUBECONFIG = str(stack.sim.kubeconfig)
    settings.KUBE_CONTEXT = ""
    settings.KUBE_IN_CLUSTER = False
    settings.PROMETHEUS_URL = stack.prom.url
    # A shared machine: Prometheus gets time to answer, and each answer is asked once.
    settings.PROMETHEUS_TIMEOUT = 30
    settings.METRICS_CACHE_SECONDS = 600
    for name, (workload, taint) in POOLS.items():
        Pool.objects.create(
            name=name,
            display_name=name,
            labels={"workload-type": workload},
            taint_key=taint or "",
            taint_value="true" if taint else "",
            taint_effect="NoSchedule" if taint else "",
        )
    inventory_sync()
    return stack


POOL_OF_CLASS = {c.name: c.pool for c in INSIGHTS}


def _records(stack: Stack, pool: str) -> list[dict[str, Any]]:
    return [r for r in stack.history if POOL_OF_CLASS[r["job_class"]] == pool]


def _insights(client: Client, pool: str) -> dict[str, Any]:
    response = client.get(f"/api/v1/pools/{pool}/insights/?days={DAYS}")
    assert response.status_code == 200, response.content
    return response.json()  # type: ignore[no-any-return]


def _epoch(iso: str) -> float:
    return datetime.fromisoformat(iso).timestamp()


def test_each_pool_s_indicators_are_its_known_answers(portal: Stack, token_for) -> None:  # type: ignore[no-untyped-def]
    client = api(token_for("viewers"))
    for pool, answer in INSIGHTS_ANSWERS.items():
        body = _insights(client, pool)
        _check_utilisation(body["utilisation"], answer.idle, pool)
        _check_queue(body, _records(portal, pool), answer.queues, pool)
        _check_failures(body["failures"], _records(portal, pool), answer, pool)
        _check_replacement(body["replacement"], answer, pool)


def _check_utilisation(u: dict[str, Any], idle: bool, pool: str) -> None:
    assert u["metrics_error"] is None, pool
    # The history's samples are read, not only what the rules recorded since Prometheus
    # started: a point a step (the 7-day window's) over the two days and more of history.
    assert u["samples"] >= HISTORY_DAYS * 86400 / WINDOW_STEP_SECONDS, (pool, u["samples"])
    if idle:
        assert u["average"] < 10, (pool, u)
        assert u["below_target"] is True
        assert u["idle_node_share"] > 0.9, (pool, u)
    else:
        assert u["average"] >= 10, (pool, u)


def _check_queue(
    body: dict[str, Any], records: list[dict[str, Any]], queues: bool, pool: str
) -> None:
    q = body["queue"]
    end = _epoch(body["window"]["end"])
    waits = [(r["scheduled"] or end) - r["created"] for r in records]
    assert q["waits_seconds"]["count"] == len(records), pool
    # Kubernetes keeps times to the second: the portal's waits are the record's, rounded.
    p50, p90 = _expected_percentiles(waits)
    assert q["waits_seconds"]["p50"] == pytest.approx(p50, abs=2), pool
    assert q["waits_seconds"]["p90"] == pytest.approx(p90, abs=2), pool
    assert q["still_pending"] == sum(1 for r in records if r["scheduled"] is None), pool
    if queues:
        assert q["waits_seconds"]["p90"] > 600, pool
        # Its jobs waited while the idle pool had room: node selection, not shortage.
        assert q["by_cause"]["restricted"]["count"] == q["queued"] > 0, (pool, q)
    else:
        assert q["waits_seconds"]["p90"] < 60, (pool, q)


def _expected_percentiles(waits: list[float]) -> tuple[float, float]:
    """p50 and p90 as the README defines them (interpolated between the nearest ranks),
    computed by the standard library, not by the portal's own function."""
    if len(waits) == 1:
        return waits[0], waits[0]
    cuts = statistics.quantiles(waits, n=10, method="inclusive")
    return cuts[4], cuts[8]


def _check_failures(
    f: dict[str, Any], records: list[dict[str, Any]], answer: Any, pool: str
) -> None:
    failed = [r for r in records if r["phase"] == "Failed"]
    expected = collections.Counter(
        CAUSE_OF_CATEGORY[FAILURE_CATEGORY[r["outcome"]]] for r in failed
    )
    # Image problems count from the moment the pod cannot start. A pod that never pulled its
    # image ends at its deadline (DeadlineExceeded) with a status that no longer says why:
    # the portal knows only what it saw waiting
    # (tests/edges/inventory/test_inventory_pods.py), and the whole history here ended
    # before it first looked, so those read as timeouts.
    expected["timeout"] += expected.pop("image", 0)
    expected["image"] += sum(
        1 for r in records if r["phase"] != "Failed" and r["waiting_reason"] in IMAGE_WAITS
    )
    counts = {c: n for c, n in f["counts"].items() if n}
    # Every GPU fault is found: by the CUDA error its job reports, whether or not the
    # exporter's last XID on the GPU changed (the same code again leaves no trace there).
    assert counts == dict(+expected), (pool, f["counts"], f["examples"]["other"])
    if answer.dominant_failure:
        assert f["main_cause"] == CAUSE_OF_CATEGORY[answer.dominant_failure], (pool, f)
    else:
        assert f["main_cause"] not in ("oom", "gpu_fault"), (pool, f)


IMAGE_WAITS = {"ErrImagePull", "ImagePullBackOff", "CreateContainerConfigError"}


def _check_replacement(r: dict[str, Any], answer: Any, pool: str) -> None:
    dimensions = {d["name"]: d for d in r["dimensions"]}
    # The model as GPU feature discovery's product label spells it (spaces as dashes).
    models = {m.replace(" ", "-") for m in answer.gpu_models}
    assert set(v for v in dimensions["gpu_model"]["values"] if v) == models, pool
    assert set(v for v in dimensions["driver"]["values"] if v) == answer.drivers, pool
    if len(answer.gpu_models) == 1 and len(answer.drivers) == 1:
        assert r["odd_nodes"] == {} and r["score"] == 0, (pool, r)
        return
    # Half the nodes are A100 on one driver, half H100 on the other: one half is odd, each
    # with its model and its driver named.
    odd = set(r["odd_nodes"])
    assert odd in ({"mixed-a100-000", "mixed-a100-001"}, {"mixed-h100-000", "mixed-h100-001"})
    for what in r["odd_nodes"].values():
        assert any(w.startswith("GPU model ") for w in what), what
        assert any(w.startswith("driver version ") for w in what), what
    assert r["score"] > 0 and r["hand_score"] < r["score"]


# Each advisor rule and the pools it must name, and no other: the idle pool lends to the
# queueing one; the mixed pool is split; the faulty pool's GPUs are investigated; the only
# dedicated pool (tainted) has two nodes, too few to dedicate; no pool is built by hand.
EXPECTED_ADVICE = {
    "lend": {("idle-pool", "queue-pool")},
    "split": {("mixed-pool",)},
    "gpu_faults": {("fault-pool",)},
    "keep_shared": {("queue-pool",)},
}


def test_each_advisor_rule_fires_on_its_pool_and_no_other(portal: Stack, token_for) -> None:  # type: ignore[no-untyped-def]
    body = api(token_for("viewers")).get(f"/api/v1/advice/?days={DAYS}").json()
    fired: dict[str, set[tuple[str, ...]]] = collections.defaultdict(set)
    for advice in body["advice"]:
        fired[advice["rule"]].add(tuple(advice["pools"]))
    assert dict(fired) == EXPECTED_ADVICE
    lend = next(a for a in body["advice"] if a["rule"] == "lend")
    move = lend["move"]
    assert (move["source"], move["destination"], move["loan_days"]) == (
        "idle-pool",
        "queue-pool",
        7,
    )
    assert move["nodes"] and set(move["nodes"]) <= {"idle-000", "idle-001", "idle-002"}
    page = session("requesters").get(f"/advice/?days={DAYS}").content.decode()
    for advice in body["advice"]:
        assert f'data-advice="{advice["key"]}"' in page


def test_profiles_and_the_insights_page_read_the_same_history(portal: Stack, token_for) -> None:  # type: ignore[no-untyped-def]
    body = api(token_for("viewers")).get(f"/api/v1/profiles/?days={DAYS}&by=namespace").json()
    profiles = {p["owner"]: p for p in body["profiles"]}
    for job_class in INSIGHTS:
        records = [r for r in portal.history if r["job_class"] == job_class.name]
        profile = profiles[job_class.namespace]
        assert profile["pods"] == len(records), job_class.name
        assert profile["gpus_per_pod"]["max"] == job_class.gpus, job_class.name
        assert profile["workload_type"] == job_class.workload_type
    oom = _insights(api(token_for("viewers")), "oom-pool")["failures"]["counts"]["oom"]
    html = session("viewers").get(f"/pools/oom-pool/insights/?days={DAYS}").content.decode()
    assert f"<th>out of memory</th><td>{oom}</td>" in html


def _imported_start(stack: Stack) -> float:
    """When the imported history begins: the workload's first pod, kubesim's own record."""
    return min(float(r["created"]) for r in stack.history)


def test_the_pool_chart_draws_the_imported_history_before_the_rules_began(portal: Stack) -> None:
    """The recording rules record only from their loading (a minute ago here); the pool
    page's 7 d chart reads them where they exist and the raw series before, so it draws
    the imported days, not one dot at the rules' start."""
    pool = Pool.objects.get(name="oom-pool")
    latest_node_metrics()  # as the page does first: it finds out the rules are loaded
    assert reads_recorded("util")
    sent = len(portal.prom.queries_sent())
    history = selectors.pool_history(pool, "7d")
    assert history.error is None
    recorded, raw_before = portal.prom.queries_sent()[sent:]
    assert recorded.startswith("sum(") and raw_before.startswith("avg(")
    times = [t for t, _ in history.points]
    assert times == sorted(times) and len(set(times)) == len(times)
    # This Prometheus and its rules started minutes ago: a point older than two hours can
    # only come from the raw, imported series.
    before = [t for t in times if t < time.time() - 2 * 3600]
    # 240 points a 7 d chart, one every 42 minutes: two days of history hold about 68.
    assert len(before) > 40, (len(before), times[:3])
    assert before[0] <= _imported_start(portal) + 3 * 3600
    page = session("viewers").get("/pools/oom-pool/?span=7d").content.decode()
    assert "History unavailable" not in page and "GPU utilisation, 7d" in page


def test_every_node_chart_draws_the_imported_history(portal: Stack) -> None:
    """Utilisation, framebuffer, temperature and power each have the imported days on the
    node page's 7 d charts; XID only where a GPU faulted (none in the history is fine)."""
    node = Node.objects.filter(pool__name="oom-pool").first()
    assert node is not None
    charts = selectors.node_history(node, "7d")
    for figure in ("util", "fb_used", "temp", "power"):
        found = charts[figure]
        assert found.error is None, figure
        first = min(points[0][0] for points in found.series.values() if points)
        assert first < time.time() - 86400, figure


def test_the_history_is_the_two_whole_days_before_the_fixed_end(portal: Stack, token_for) -> None:  # type: ignore[no-untyped-def]
    """Whatever the hour the test runs: jobs from the first hours of the first day to the
    last hours of the second, none after the end (the clock stayed there)."""
    end = _epoch(REPLAY_END.replace("Z", "+00:00"))
    created = [float(r["created"]) for r in portal.history]
    assert end - HISTORY_DAYS * 86400 <= min(created) < end - (HISTORY_DAYS - 0.25) * 86400
    assert end - 0.25 * 86400 < max(created) <= end
    # The portal read the same pods: each pool's count is the record's.
    body = api(token_for("viewers")).get(f"/api/v1/profiles/?days={DAYS}&by=namespace").json()
    assert sum(p["pods"] for p in body["profiles"]) == len(portal.history)
