"""docs/deploy.md: its values examples render, and it stands on its own."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

from tests.deploy.chart import CHART, ROOT, render

GUIDE = (ROOT / "docs/deploy.md").read_text()
VALUE_KEYS = set(yaml.safe_load((CHART / "values.yaml").read_text()))


def values_examples() -> list[str]:
    blocks = re.findall(r"```yaml\n(.*?)```", GUIDE, re.DOTALL)
    return [
        b
        for b in blocks
        if isinstance(yaml.safe_load(b), dict) and set(yaml.safe_load(b)) <= VALUE_KEYS
    ]


def test_the_guide_has_values_examples() -> None:
    assert len(values_examples()) >= 5


@pytest.mark.parametrize("example", values_examples())
def test_every_values_example_in_the_guide_renders(example: str, tmp_path: Path) -> None:
    values = tmp_path / "values.yaml"
    values.write_text(example)
    assert render(values)


def test_the_guide_names_every_setting_the_chart_sets() -> None:
    for name in (
        "DCGM_NODE_LABEL",
        "LOG_FORMAT",
        "METRICS_TOKEN",
        "OIDC_ROLE_MAP",
        "LOCAL_LOGIN_ENABLED",
        "KUBE_IN_CLUSTER",
        "DJANGO_BEHIND_TLS_PROXY",
        "exported_pod",
        "hostname",
    ):
        assert name in GUIDE, name


def test_the_guide_stands_on_its_own() -> None:
    assert "../shared" not in GUIDE
    assert "the articles" not in GUIDE.lower()
