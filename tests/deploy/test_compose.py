"""docker-compose.yml cannot run here (no Docker engine); it is checked by parsing instead."""

from __future__ import annotations

import importlib.util
import re
import subprocess
import sys
from pathlib import Path

import yaml

from tests.servers import require_program

ROOT = Path(__file__).resolve().parents[2]


def compose() -> dict:  # type: ignore[type-arg]
    return yaml.safe_load((ROOT / "docker-compose.yml").read_text())


def test_the_full_stack_is_declared() -> None:
    services = compose()["services"]
    assert set(services) == {
        *("web", "worker", "beat", "watcher"),
        *("redis", "postgres", "prometheus", "kubesim"),
    }
    assert services["kubesim"]["profiles"] == ["simulator"]
    for name in ("web", "worker", "beat", "watcher"):
        assert "build" in services[name], name
        env = services[name]["environment"]
        assert env["DATABASE_URL"].startswith("postgres://portal:")
        assert env["CELERY_BROKER_URL"] == "redis://redis:6379/0"
        assert services[name]["depends_on"]["postgres"]["condition"] == "service_healthy"
    assert "gunicorn portal.wsgi:application" in services["web"]["command"]
    assert services["worker"]["command"].startswith("celery -A portal worker")
    assert services["beat"]["command"].startswith("celery -A portal beat")
    assert services["watcher"]["command"] == "python manage.py watch_inventory"
    assert services["watcher"]["depends_on"]["web"]["condition"] == "service_healthy"


def test_secrets_come_from_the_environment_and_are_required() -> None:
    text = (ROOT / "docker-compose.yml").read_text()
    assert "${DJANGO_SECRET_KEY:?" in text
    assert "${POSTGRES_PASSWORD:?" in text
    assert not re.search(r"SECRET_KEY:\s*['\"]?[A-Za-z0-9]{8,}", text)


def test_mounted_files_exist() -> None:
    for service in compose()["services"].values():
        for volume in service.get("volumes", []):
            source = volume.split(":", 1)[0]
            if source.startswith("./deploy"):
                assert (ROOT / source).is_file(), source


def test_prometheus_config_keeps_exported_labels() -> None:
    config = yaml.safe_load((ROOT / "deploy/prometheus/prometheus.yml").read_text())
    job = config["scrape_configs"][0]
    assert job["honor_labels"] is False


def test_dockerfile_runs_as_non_root_and_installs_the_pinned_set() -> None:
    text = (ROOT / "Dockerfile").read_text()
    assert "pip install --no-cache-dir -r requirements.txt" in text
    assert re.search(r"^USER 10001:10001$", text, re.MULTILINE)  # numeric: portal, 10001
    assert "FROM python:3.11" in text


def test_the_compose_prometheus_loads_the_projects_recording_rules() -> None:
    config = yaml.safe_load((ROOT / "deploy/prometheus/prometheus.yml").read_text())
    mounts = dict(
        volume.rsplit(":", 1)[0].split(":", 1)
        for volume in compose()["services"]["prometheus"]["volumes"]
    )
    (rule_file,) = config["rule_files"]
    assert {v: k for k, v in mounts.items()}[rule_file] == "./deploy/prometheus/rules.yml"


def test_the_demo_prometheus_loads_the_projects_recording_rules(tmp_path: Path) -> None:
    spec = importlib.util.spec_from_file_location("demo_script", ROOT / "scripts/demo.py")
    assert spec is not None and spec.loader is not None
    demo = importlib.util.module_from_spec(spec)
    sys.modules["demo_script"] = demo  # its dataclasses look their module up
    spec.loader.exec_module(demo)
    config = tmp_path / "prometheus.yml"
    ports = {"web": 8000, "redis": 6390, "prometheus": 9091, "kubesim": 6443, "exporter": 9400}
    demo_config = demo.DemoConfig(**ports, state=tmp_path)
    token = demo.metrics_token_file(demo_config)
    assert token.stat().st_mode & 0o077 == 0 and len(token.read_text()) >= 16
    demo.prometheus_config(config, 9400, demo_config, "east")
    written = yaml.safe_load(config.read_text())
    assert written["rule_files"] == [str(ROOT / "deploy/prometheus/rules.yml")]
    # The portal's membership of that cluster, for the pool rules, with the run's token.
    (pools,) = [job for job in written["scrape_configs"] if job["job_name"] == "portal-pools"]
    assert (pools["metrics_path"], pools["params"]) == ("/metrics/pools", {"cluster": ["east"]})
    assert pools["authorization"] == {"credentials_file": str(token)}
    assert pools["static_configs"] == [{"targets": ["127.0.0.1:8000"]}]
    # promtool checks the configuration and the rule files it names.
    promtool = require_program("promtool")
    result = subprocess.run(
        [promtool, "check", "config", str(config)], capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert re.search(r"SUCCESS: [1-9][0-9]* rules found", result.stdout), result.stdout
