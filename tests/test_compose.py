"""docker-compose.yml cannot run here (no Docker engine); it is checked by parsing instead."""

from __future__ import annotations

import re
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent


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
    assert re.search(r"^USER portal$", text, re.MULTILINE)
    assert "FROM python:3.11" in text
