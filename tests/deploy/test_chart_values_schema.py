"""values.schema.json refuses a misspelt key at every level the chart reads, not only at a
few (helm names the level and the key), and the web pods' disruption budget may not keep
every web pod: one that does blocks every drain of a node running one."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.deploy.chart import CHART, render, render_error

SCHEMA = json.loads((CHART / "values.schema.json").read_text())
VALUES = yaml.safe_load((CHART / "values.yaml").read_text())


def closed_levels(schema: dict[str, Any], path: tuple[str, ...] = ()) -> Iterator[tuple[str, ...]]:
    """Every level of the values whose keys the schema lists (the free-form maps it leaves
    open: annotations, labels, nodeSelector, affinity, security contexts, peers)."""
    if "properties" in schema:
        yield path
        for key, sub in schema["properties"].items():
            yield from closed_levels(sub, (*path, key))


def test_every_level_with_known_keys_refuses_others() -> None:
    open_levels = [
        path
        for path in closed_levels(SCHEMA)
        if "properties" in _at(SCHEMA, path)
        and _at(SCHEMA, path).get("additionalProperties") is not False
    ]
    assert open_levels == []


def _at(schema: dict[str, Any], path: tuple[str, ...]) -> dict[str, Any]:
    for key in path:
        schema = schema["properties"][key]
    return schema


def _value(path: tuple[str, ...]) -> Any:
    found: Any = VALUES
    for key in path:
        if not isinstance(found, dict) or key not in found:
            return None
        found = found[key]
    return found


MAP_LEVELS = [path for path in closed_levels(SCHEMA) if path and isinstance(_value(path), dict)]


@pytest.mark.parametrize("path", [".".join(p) for p in MAP_LEVELS])
def test_a_misspelt_key_is_refused_naming_its_level(path: str) -> None:
    error = render_error(sets=(f"{path}.misspeltKey=1",))
    assert f"at '/{path.replace('.', '/')}': additional properties 'misspeltKey' not allowed" in (
        error
    ), error


@pytest.mark.parametrize(
    ("sets", "where", "key"),
    [
        ("web.replica=3", "/web", "replica"),
        ("serviceMonitor.label.release=kps", "/serviceMonitor", "label"),
        ("ingress.host=portal.example.com", "/ingress", "host"),
        ("misspeltTopLevel=1", "", "misspeltTopLevel"),
    ],
)
def test_the_reported_misspellings_are_refused(sets: str, where: str, key: str) -> None:
    assert f"at '{where}': additional properties '{key}' not allowed" in render_error(sets=(sets,))


def test_a_misspelt_key_inside_a_list_item_is_refused(tmp_path: Path) -> None:
    values = tmp_path / "values.yaml"
    values.write_text(
        yaml.safe_dump(
            {
                "ingress": {
                    "enabled": True,
                    "hosts": [{"host": "portal.example.com", "path": "/"}],
                    "tls": [{"secretName": "tls", "host": ["portal.example.com"]}],
                }
            }
        )
    )
    error = render_error(values)
    assert "at '/ingress/hosts/0': additional properties 'path' not allowed" in error
    assert "at '/ingress/tls/0': additional properties 'host' not allowed" in error


@pytest.mark.parametrize(
    ("value", "replicas", "message"),
    [
        ("2", 2, "2 is not below web.replicas (2)"),
        ("5", 3, "5 is not below web.replicas (3)"),
        ("100%", 2, "100% of web.replicas (2) keeps all 2"),
        ("60%", 2, "60% of web.replicas (2) keeps all 2 (rounded up)"),
    ],
)
def test_a_budget_that_keeps_every_web_pod_is_refused(
    value: str, replicas: int, message: str
) -> None:
    error = render_error(
        sets=(f"web.replicas={replicas}", f"web.podDisruptionBudget.minAvailable={value}")
    )
    assert f"web.podDisruptionBudget.minAvailable: {message}" in error
    assert "no node running a web pod could ever be drained" in error


def test_a_budget_below_the_replicas_is_kept() -> None:
    for value, replicas in (("1", 2), ("2", 3), ("50%", 2), ("66%", 3)):
        docs = render(
            sets=(f"web.replicas={replicas}", f"web.podDisruptionBudget.minAvailable={value}")
        )
        (budget,) = [d for d in docs if d["kind"] == "PodDisruptionBudget"]
        assert str(budget["spec"]["minAvailable"]) == value
