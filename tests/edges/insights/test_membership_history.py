"""A loan made today leaves the figures of the time before it unchanged: each node counts
in the pool it was in at each moment, on a real Prometheus holding two days of history
(imported with promtool) and the live exporter after it, through the API and the page.

Training's nodes ran at 95 % all along and mixed's at 10 %. Three mixed nodes are lent to
training through the workflow, applied to kubesim. Read over today's members, training's
week would fall to about 59 %; read by membership, it stays 95 % and mixed stays 10 %."""

from __future__ import annotations

import re
import shutil
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from django.test import Client
from django.utils import timezone

from pools import moves
from pools.fleet import selectors
from pools.inventory import inventory_sync
from pools.membership.stays import membership
from pools.metrics import insights as metrics
from pools.models import Pool, PoolStay
from pools.moves.execution import run as execution
from tests.api.conftest import api
from tests.edges.metrics.test_dashboard import scraped
from tests.insights.test_pages import session
from tests.kubesim_process import Kubesim, kubesim_server
from tests.moves_helpers import user_in
from tests.servers import PrometheusServer, prometheus_server, wait_for

pytestmark = pytest.mark.django_db

TRAINING = [f"a100-train-00{i}" for i in range(4)]
MIXED = [f"a100-reserve-00{i}" for i in range(9)]
LENT = MIXED[:3]
BUSY, QUIET = 95.0, 10.0
HISTORY = timedelta(days=2)
STEP_SECONDS = 300
DAYS = 7
# How long after its timestamp a sample may still arrive: a scrape (1 s here) and the
# recording rules' evaluation after it.
INGESTION_SECONDS = 60


@dataclass
class Stack:
    sim: Kubesim
    prom: PrometheusServer


def _history(path: Path, end: float) -> None:
    """Two days of every GPU's utilisation, a sample each five minutes, ending at `end`."""
    start = end - HISTORY.total_seconds()
    lines = ["# TYPE DCGM_FI_DEV_GPU_UTIL gauge"]
    for node, util in [(n, BUSY) for n in TRAINING] + [(n, QUIET) for n in MIXED]:
        for gpu in range(8):
            series = f'DCGM_FI_DEV_GPU_UTIL{{Hostname="{node}",gpu="{gpu}"}}'
            at = start
            while at < end:
                lines.append(f"{series} {util:g} {at:.0f}")
                at += STEP_SECONDS
    path.write_text("\n".join(lines) + "\n# EOF\n")


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    promtool = shutil.which("promtool")
    if promtool is None:
        pytest.skip("no promtool (Debian's prometheus package has it)")
    workdir = tmp_path_factory.mktemp("membership")
    with kubesim_server(workdir / "kubesim") as sim:
        for node in TRAINING + MIXED:
            util = BUSY if node in TRAINING else QUIET
            sim.control("gpus", {"node": node, "gpu": "all", "util": util})
        source = workdir / "history.om"
        _history(source, time.time() - 600)
        data = workdir / "prom" / "data"
        argv = [promtool, "tsdb", "create-blocks-from", "openmetrics", "--max-block-duration=1000h"]
        subprocess.run([*argv, str(source), str(data)], check=True, capture_output=True)
        target = sim.metrics_url.removeprefix("http://")
        with prometheus_server(workdir / "prom", scrape_targets=[target]) as prom:
            wait_for(
                lambda: scraped(
                    prom, f'max(Hostname:DCGM_FI_DEV_GPU_UTIL:max{{Hostname="{LENT[0]}"}})', QUIET
                ),
                timeout=60,
                what="the recording rules to run on the live exporter",
            )
            yield Stack(sim, prom)


@pytest.fixture
def portal(stack: Stack, settings) -> Stack:  # type: ignore[no-untyped-def]
    settings.KUBECONFIG = str(stack.sim.kubeconfig)
    settings.KUBE_CONTEXT = ""
    settings.KUBE_IN_CLUSTER = False
    settings.PROMETHEUS_URL = stack.prom.url
    settings.PROMETHEUS_TIMEOUT = 30
    settings.METRICS_CACHE_SECONDS = 0
    settings.INSIGHTS_CACHE_SECONDS = 0
    settings.PATCH_BACKOFF_SECONDS = 0.01
    inventory_sync()
    return stack


def _lend(nodes: list[str]) -> None:
    """Lend `nodes` to training for three days: asked, approved by someone else, applied."""
    request = moves.move_request_create(
        requested_by=user_in("requesters", "rita"),
        node_names=nodes,
        destination=Pool.objects.get(name="training"),
        reason="training queues",
        loan_until=timezone.now() + timedelta(days=3),
        now=timezone.now(),
    )
    moves.move_approve(request=request, approver=user_in("approvers", "arno"), now=timezone.now())
    assert execution.execute_items(execution.start_request(request.pk)) == []
    request.refresh_from_db()
    assert request.state == request.State.SUCCEEDED, list(request.items.values("state", "error"))


def _figures(client: Client, pool: str) -> dict[str, Any]:
    response = client.get(f"/api/v1/pools/{pool}/insights/?days={DAYS}")
    assert response.status_code == 200, response.content
    return response.json()  # type: ignore[no-any-return]


def _page_average(page: Client, pool: str) -> str:
    html = page.get(f"/pools/{pool}/insights/?days={DAYS}").content.decode()
    found = re.search(r"<th>Average</th><td[^>]*>([^<]+)<", html)
    assert found, html[:2000]
    return found.group(1).strip()


def _training_week(end: float) -> list[tuple[float, float]]:
    """Training's average a step over the week to `end`, by the membership recorded now."""
    span, step = metrics.window_span(DAYS)
    start = end - span.total_seconds()
    members = membership(*(datetime.fromtimestamp(t, UTC) for t in (start, end)))
    series = metrics.pool_series(
        {"training": members.members("training", start, end)},
        span=span,
        step=step,
        end=datetime.fromtimestamp(end, UTC),
    )
    assert series.error is None
    return series.average["training"]


def test_a_loan_made_today_leaves_the_weeks_figures_before_it_unchanged(
    portal: Stack, token_for
) -> None:  # type: ignore[no-untyped-def]
    client, page = api(token_for("viewers")), session("viewers")
    before = {pool: _figures(client, pool)["utilisation"] for pool in ("training", "mixed")}
    assert before["training"]["average"] == pytest.approx(BUSY, abs=0.5)
    assert before["mixed"]["average"] == pytest.approx(QUIET, abs=0.5)
    page_before = _page_average(page, "training")
    end = time.time()
    chart_before = _training_week(end)

    lent_at = time.time()
    _lend(LENT)
    lent = PoolStay.objects.filter(node_name__in=LENT, until__isnull=True)
    assert sorted(lent.values_list("pool_label", flat=True)) == ["training"] * 3

    after = {pool: _figures(client, pool) for pool in ("training", "mixed")}
    for pool in ("training", "mixed"):
        # The points since the loan are a few of the week's hundreds: the averages hold.
        assert after[pool]["utilisation"]["average"] == pytest.approx(
            before[pool]["average"], abs=0.5
        ), pool
    assert _page_average(page, "training") == page_before
    # Every point of the week up to the loan is what it was, to the last digit. The last
    # minute before the first read is left out: a scrape begun before it (and the rule run
    # on it) may land in Prometheus after it, and change those points whatever the pools.
    settled = end - INGESTION_SECONDS
    assert [p for p in _training_week(end) if p[0] < settled] == [
        p for p in chart_before if p[0] < settled
    ]
    assert len([p for p in chart_before if p[0] < settled]) > 100
    # The pool page's chart too: before the loan, training's nodes alone.
    drawn = selectors.pool_history(Pool.objects.get(name="training"), "7d")
    assert drawn.error is None
    earlier = [value for at, value in drawn.points if at < lent_at - 60]
    assert len(earlier) > 60 and all(v == pytest.approx(BUSY, abs=0.5) for v in earlier)
    # The loan shows as three nodes that joined training, and left mixed, at the moment
    # the move recorded, after the loan was asked.
    joined = {c["node"]: c for c in after["training"]["members"]["changes"]}
    assert set(joined) == set(LENT)
    for node, change in joined.items():
        assert change["left"] is None
        at = datetime.fromisoformat(change["joined"]).timestamp()
        stay = PoolStay.objects.get(node_name=node, until__isnull=True)
        assert at == pytest.approx(stay.since.timestamp(), abs=1e-3) and at >= lent_at - 1
    assert {c["node"] for c in after["mixed"]["members"]["changes"]} == set(LENT)
    assert after["training"]["members"]["nodes"] == len(TRAINING) + 1 + len(LENT)  # + drift node
    html = page.get(f"/pools/training/insights/?days={DAYS}").content.decode()
    assert all(f'data-node="{n}"' in html for n in LENT)
