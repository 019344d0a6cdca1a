"""kubesim's `/metrics/recorded` (what a Prometheus holding only the recorded series receives from
each cluster's own, by federation or remote-write) equals the project's recording rules,
evaluated by a real Prometheus over kubesim's raw exporter: every rule, every node, whole
GPUs and MIG instances, held and idle GPUs, an XID."""

from __future__ import annotations

import json
import re
import urllib.parse
import urllib.request
from pathlib import Path

from tests.kubesim_process import kubesim_server
from tests.servers import prometheus_server, wait_for

# Pinned, so that both sides see the same samples whenever they look: the whole node's GPUs
# busy, the MIG nodes' first instances idle (a pod holds three of them).
PINNED = {
    "a100-whole-000": 37.0,
    "a100-mig-000": 0.0,
    "a100-mig-001": 64.0,
}
SERIES = re.compile(r'^(\S+)\{Hostname="([^"]+)"[^}]*\} (\S+)$')


def recorded_page(url: str) -> dict[tuple[str, str], float]:
    with urllib.request.urlopen(f"{url}/metrics/recorded", timeout=30) as response:
        text = response.read().decode()
    found = {}
    for line in text.splitlines():
        if match := SERIES.match(line):
            found[(match.group(1), match.group(2))] = float(match.group(3))
    assert "gpu_pool_portal:rules_loaded 1" in text
    return found


def evaluated(prom_url: str) -> dict[tuple[str, str], float]:
    query = urllib.parse.urlencode({"query": '{__name__=~"Hostname:.+"}'})
    with urllib.request.urlopen(f"{prom_url}/api/v1/query?{query}", timeout=10) as response:
        result = json.loads(response.read())["data"]["result"]
    return {
        (r["metric"]["__name__"], r["metric"]["Hostname"]): float(r["value"][1]) for r in result
    }


def test_the_recorded_page_equals_the_rules(tmp_path: Path) -> None:
    with kubesim_server(tmp_path / "sim", scenario="mig") as sim:
        for node, util in PINNED.items():
            sim.control("gpus", {"node": node, "gpu": "all", "util": util})
        sim.control("gpus", {"node": "a100-whole-000", "gpu": 3, "xid": 48})
        target = sim.metrics_url.removeprefix("http://")
        with prometheus_server(tmp_path / "prom", scrape_targets=[target]) as prom:
            page = recorded_page(sim.metrics_url)
            # The rules' held-but-idle figure wants its five-minute highs: once every rule has
            # run over the pinned samples, both sides agree and stay so.
            wait_for(lambda: evaluated(prom.url) == page, timeout=60, what="the rules' figures")
    records = {record for record, _ in page}
    rules = Path(__file__).resolve().parents[3] / "deploy/prometheus/rules.yml"
    written = set(re.findall(r"record: (Hostname:\S+)", rules.read_text()))
    assert records == written
    assert {node for _, node in page} == set(PINNED)
    assert page[("Hostname:DCGM_FI_DEV_GPU_UTIL:count", "a100-mig-000")] == 56
    assert page[("Hostname:DCGM_FI_DEV_GPU_UTIL:count_held_idle", "a100-mig-000")] == 3
    assert page[("Hostname:DCGM_FI_DEV_XID_ERRORS:count_nonzero", "a100-whole-000")] == 1
