"""Rendering the Helm chart with the real helm binary (scripts/install-helm.sh installs it)."""

from __future__ import annotations

import functools
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
CHART = ROOT / "deploy/helm/gpu-pool-portal"
VALUES_ALL = Path(__file__).with_name("values-all.yaml")
RELEASE = "rel"
NAMESPACE = "gpu-portal"

Doc = dict[str, Any]


def helm() -> str:
    installed = ROOT / ".venv/bin/helm"
    if installed.is_file():
        return str(installed)
    found = shutil.which("helm")
    if found is None:
        pytest.skip("helm is not installed: run scripts/install-helm.sh (make test does)")
    return found


def run_helm(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([helm(), *args], capture_output=True, text=True, timeout=60)


def template_args(values: tuple[Path, ...], sets: tuple[str, ...]) -> list[str]:
    args = ["template", RELEASE, str(CHART), "--namespace", NAMESPACE]
    for path in values:
        args += ["--values", str(path)]
    for item in sets:
        args += ["--set", item]
    return args


@functools.cache
def render(*values: Path, sets: tuple[str, ...] = ()) -> tuple[Doc, ...]:
    result = run_helm(*template_args(values, sets))
    assert result.returncode == 0, result.stderr
    return tuple(doc for doc in yaml.safe_load_all(result.stdout) if doc)


def render_error(*values: Path, sets: tuple[str, ...] = ()) -> str:
    """helm template's message for values it must refuse."""
    result = run_helm(*template_args(values, sets))
    assert result.returncode != 0, "helm template accepted values it should refuse"
    return result.stderr


def default_docs() -> tuple[Doc, ...]:
    return render()


def all_on_docs() -> tuple[Doc, ...]:
    return render(VALUES_ALL)


def of_kind(docs: tuple[Doc, ...], kind: str) -> list[Doc]:
    return [doc for doc in docs if doc["kind"] == kind]


def named(docs: tuple[Doc, ...], kind: str, name: str) -> Doc:
    matches = [doc for doc in of_kind(docs, kind) if doc["metadata"]["name"] == name]
    assert len(matches) == 1, f"{kind}/{name}: {len(matches)} rendered"
    return matches[0]


def deployment(docs: tuple[Doc, ...], component: str) -> Doc:
    return named(docs, "Deployment", f"{RELEASE}-gpu-pool-portal-{component}")


def pod_specs(docs: tuple[Doc, ...]) -> Iterator[tuple[str, Doc]]:
    """(a name for messages, pod spec) of every Deployment and Job."""
    for doc in docs:
        if doc["kind"] in {"Deployment", "Job"}:
            yield f"{doc['kind']}/{doc['metadata']['name']}", doc["spec"]["template"]["spec"]


def containers(docs: tuple[Doc, ...]) -> Iterator[tuple[str, Doc]]:
    for where, spec in pod_specs(docs):
        for container in spec.get("initContainers", []) + spec["containers"]:
            yield f"{where}/{container['name']}", container
