"""The three views of failures agree over the demo's own history: the workload profiles, a
pool's insights and the advisor count the inference pool's failed pods the same way, and
as many as kubesim's record says failed there.

kubesim runs the demo scenario with its demo workload, six whole days replayed to
today's UTC midnight and the clock stopped there (the same jobs at any hour); the
inventory fills the pod history from it. No Prometheus: the GPU faults are read from the
pods' own CUDA and driver messages, the same input for every view."""

from __future__ import annotations

import collections
import json
import urllib.request
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import pytest

from kubesim.workload_scenarios import DEMO, serve_arguments
from pools.core.insights.failures import Cause, cause_breakdown
from pools.inventory import inventory_sync
from tests.api.conftest import api
from tests.kubesim_process import ADMIN_TOKEN, Kubesim, kubesim_server

pytestmark = pytest.mark.django_db

HISTORY_DAYS = 6
DAYS = 7
REPLAY_END = datetime.now(UTC).strftime("%Y-%m-%dT00:00:00Z")
# The demo's inference pool runs one class of the workload, in its own namespace.
(CANARY,) = [c for c in DEMO if c.pool == "inference" and c.failures]


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Kubesim]:
    extra = serve_arguments("demo", days=HISTORY_DAYS, end=REPLAY_END)
    with kubesim_server(tmp_path_factory.mktemp("demo-history"), extra=extra) as sim:
        yield sim


def _record(sim: Kubesim) -> list[dict[str, Any]]:
    request = urllib.request.Request(
        f"{sim.url}/kubesim/workload/history", headers={"Authorization": f"Bearer {ADMIN_TOKEN}"}
    )
    with urllib.request.urlopen(request, timeout=30) as response:
        return json.loads(response.read())  # type: ignore[no-any-return]


def test_profiles_insights_and_the_advisor_agree_over_the_demo_history(
    demo: Kubesim,
    settings,
    token_for,  # type: ignore[no-untyped-def]
) -> None:
    settings.KUBECONFIG = str(demo.kubeconfig)
    settings.KUBE_CONTEXT = ""
    settings.KUBE_IN_CLUSTER = False
    settings.PROMETHEUS_URL = ""
    inventory_sync()
    client = api(token_for("viewers"))
    insights = client.get(f"/api/v1/pools/inference/insights/?days={DAYS}").json()["failures"]
    by_pool = {Cause(c): n for c, n in insights["counts"].items() if n}
    profiles = client.get(f"/api/v1/profiles/?days={DAYS}&by=namespace").json()["profiles"]
    serving = collections.Counter[Cause]()
    for profile in profiles:
        if profile["owner"] == CANARY.namespace:
            serving.update({Cause(c): n for c, n in profile["failures"].items() if n})
    # The record's own count: the canary's pods that failed, by kubesim.
    failed = [r for r in _record(demo) if r["job_class"] == CANARY.name and r["phase"] == "Failed"]
    assert len(failed) >= 3, "six days of the demo hold failed canary pods"
    assert dict(serving) == by_pool
    assert sum(by_pool.values()) == insights["total"] == len(failed)
    # The advisor, investigating the pool's GPU faults, says the same counts.
    advice = client.get(f"/api/v1/advice/?days={DAYS}").json()["advice"]
    said = [
        line
        for item in advice
        if "inference" in item["pools"]
        for line in item["evidence"]
        if line.startswith("Failures by cause:")
    ]
    assert said == [f"Failures by cause: {cause_breakdown(by_pool)}."]
