"""Links out to the team's Grafana: URL templates checked at start-up, shown where set."""

from __future__ import annotations

import html
import re

import pytest
from django.test import Client

from pools.core.links import link, template_problem
from pools.models import Node
from portal.env import EnvError, env_link_template
from tests.factories import demo_inventory
from tests.moves_helpers import user_in

NODE_URL = "https://grafana.example.com/d/dcgm?orgId=1&var-Hostname={node}"


def test_a_value_is_percent_encoded_and_cannot_add_a_parameter() -> None:
    assert link(NODE_URL, "node", "gpu-1&var-x=y") == (
        "https://grafana.example.com/d/dcgm?orgId=1&var-Hostname=gpu-1%26var-x%3Dy"
    )


@pytest.mark.parametrize(
    ("template", "problem"),
    [
        ("https://grafana/d/dcgm", "expected the placeholder {node}"),
        ("https://grafana/d/dcgm?h={host}", "only {node} may be used, found {host}"),
        ("https://grafana/d/dcgm?h={node", "cannot read the template"),
        ("https://grafana/d/dcgm?h={node!r}", "{node} takes no format spec or conversion"),
        ("ftp://grafana/{node}", "expected an http:// or https:// URL with a host"),
        ("https:///{node}", "expected an http:// or https:// URL with a host"),
    ],
)
def test_bad_templates_are_refused_with_the_reason(template: str, problem: str) -> None:
    assert (template_problem(template, "node") or "").startswith(problem)


def test_the_variable_is_checked_at_start_up() -> None:
    assert env_link_template("GRAFANA_NODE_URL", "node", {}) is None
    assert env_link_template("GRAFANA_NODE_URL", "node", {"GRAFANA_NODE_URL": NODE_URL}) == NODE_URL
    with pytest.raises(EnvError, match=r"^GRAFANA_POOL_URL: expected the placeholder \{pool\}"):
        env_link_template("GRAFANA_POOL_URL", "pool", {"GRAFANA_POOL_URL": "https://g/d/pools"})


def _grafana_href(page: str) -> str | None:
    found = re.search(r'<a href="([^"]*)"[^>]*data-link="grafana"', page)
    return html.unescape(found.group(1)) if found else None


@pytest.mark.django_db
def test_node_and_pool_pages_link_out_only_where_set(settings) -> None:  # type: ignore[no-untyped-def]
    demo_inventory()
    node = Node.objects.filter(pool__name="training").first()
    assert node is not None
    client = Client()
    client.force_login(user_in("viewers"))
    assert _grafana_href(client.get(f"/nodes/{node.name}/").content.decode()) is None
    assert _grafana_href(client.get("/pools/training/").content.decode()) is None

    settings.GRAFANA_NODE_URL = NODE_URL
    settings.GRAFANA_POOL_URL = "https://grafana.example.com/d/pools?var-pool={pool}"
    assert _grafana_href(client.get(f"/nodes/{node.name}/").content.decode()) == (
        f"https://grafana.example.com/d/dcgm?orgId=1&var-Hostname={node.name}"
    )
    assert _grafana_href(client.get("/pools/training/").content.decode()) == (
        "https://grafana.example.com/d/pools?var-pool=training"
    )
