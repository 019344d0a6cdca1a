"""The Grafana dashboard (deploy/grafana/portal.json): a valid dashboard model whose every
PromQL expression names metrics the portal exports and parses (promtool), with a panel for
each of them."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path
from typing import Any

import pytest
from django.test import Client
from prometheus_client.parser import text_string_to_metric_families

from tests.metrics_scrape import TOKEN
from tests.servers import RedisServer, require_program

ROOT = Path(__file__).resolve().parents[3]
DASHBOARD = ROOT / "deploy/grafana/portal.json"
DATASOURCE = {"type": "prometheus", "uid": "${datasource}"}
# Grafana's own variables, as Grafana fills them in before sending a query.
GRAFANA_VARIABLES = {"$__rate_interval": "1m", "$__interval": "1m", "$__range": "1h", "$job": ".*"}
SUFFIXES = {"histogram": ("_bucket", "_count", "_sum"), "counter": ("_total",), "gauge": ("",)}


def dashboard() -> dict[str, Any]:
    return json.loads(DASHBOARD.read_text())


def panels() -> list[dict[str, Any]]:
    return [p for p in dashboard()["panels"] if p["type"] != "row"]


def expressions() -> list[str]:
    return [target["expr"] for panel in panels() for target in panel["targets"]]


def exported_series(settings) -> dict[str, str]:  # type: ignore[no-untyped-def]
    """Every series name /metrics exports, to the metric family it belongs to."""
    settings.METRICS_TOKEN = TOKEN
    response = Client().get("/metrics", HTTP_AUTHORIZATION=f"Bearer {TOKEN}")
    assert response.status_code == 200
    return {
        family.name + suffix: family.name
        for family in text_string_to_metric_families(response.content.decode())
        if family.name.startswith("portal_")
        for suffix in SUFFIXES[family.type]
    }


def test_the_dashboard_is_a_grafana_dashboard_model() -> None:
    model = dashboard()
    assert model["uid"] == "gpu-pool-portal" and model["title"]
    assert isinstance(model["schemaVersion"], int) and model["schemaVersion"] >= 36
    variables = {v["name"]: v for v in model["templating"]["list"]}
    assert variables["datasource"]["type"] == "datasource"
    assert variables["datasource"]["query"] == "prometheus"
    ids = [p["id"] for p in model["panels"]]
    assert len(ids) == len(set(ids))
    for panel in model["panels"]:
        grid = panel["gridPos"]
        assert set(grid) == {"h", "w", "x", "y"} and grid["x"] + grid["w"] <= 24, panel["title"]
    for panel in panels():
        assert panel["datasource"] == DATASOURCE, panel["title"]  # never a fixed data source
        assert panel["targets"] and panel["description"], panel["title"]
        for target in panel["targets"]:
            assert target["datasource"] == DATASOURCE and target["refId"], panel["title"]


@pytest.mark.django_db
def test_every_expression_names_exported_metrics_and_every_metric_has_a_panel(
    settings,  # type: ignore[no-untyped-def]
    redis: RedisServer,  # the queue's length is read from it
) -> None:
    exported = exported_series(settings)
    used = set()
    for expr in expressions():
        names = set(re.findall(r"\bportal_[a-z_]+\b", expr))
        assert names, expr
        unknown = names - exported.keys()
        assert not unknown, f"{expr} names metrics the portal does not export: {unknown}"
        used |= {exported[name] for name in names}
    families = set(exported.values())
    assert len(families) >= 12
    assert families - used == set(), "metrics without a panel"


def concrete(expr: str) -> str:
    for variable, value in GRAFANA_VARIABLES.items():
        expr = expr.replace(variable, value)
    assert "$" not in expr, expr
    return expr


def test_promtool_parses_every_expression(tmp_path: Path) -> None:
    promtool = require_program("promtool")
    rules = {
        "groups": [
            {
                "name": "dashboard",
                "rules": [
                    {"record": f"dashboard:expression_{i}", "expr": concrete(expr)}
                    for i, expr in enumerate(expressions())
                ],
            }
        ]
    }
    path = tmp_path / "dashboard-rules.yml"
    path.write_text(json.dumps(rules))  # JSON is YAML
    result = subprocess.run(
        [promtool, "check", "rules", str(path)], capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"SUCCESS: {len(expressions())} rules found" in result.stdout


def test_promtool_would_refuse_a_broken_expression(tmp_path: Path) -> None:
    promtool = require_program("promtool")
    path = tmp_path / "broken.yml"
    broken = {"record": "dashboard:broken", "expr": "sum by (le (rate(portal_moves[1m]))"}
    path.write_text(json.dumps({"groups": [{"name": "x", "rules": [broken]}]}))
    result = subprocess.run([promtool, "check", "rules", str(path)], capture_output=True, text=True)
    assert result.returncode != 0
