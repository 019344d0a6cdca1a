"""A node that left the cluster: its page says so, and shows no readiness, allocation or
"check dcgm-exporter" advice as if it were there; dates are written one way."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest
from django.test import Client
from django.utils import timezone

from pools.models import Node
from tests.factories import Pod, gpu_node
from tests.moves_helpers import user_in

pytestmark = pytest.mark.django_db
# Django's default DATETIME_FORMAT ("Dec. 1, 2026, 7:38 p.m.") and a 12-hour clock.
OTHER_WAYS = re.compile(r"\b(a\.m\.|p\.m\.|AM|PM)\b|\b[A-Z][a-z]{2}\.? \d{1,2}, \d{4}")


def node_page(name: str) -> str:
    client = Client()
    client.force_login(user_in("viewers", "vera"))
    response = client.get(f"/nodes/{name}/")
    assert response.status_code == 200
    return response.content.decode()


def test_a_gone_nodes_page_says_it_left_and_nothing_as_if_it_were_there(settings) -> None:  # type: ignore[no-untyped-def]
    settings.PROMETHEUS_URL = ""
    gone_at = timezone.now() - timedelta(hours=3)
    node = gpu_node("a100-old-000", "training", pods=(Pod("train", "ml", 1, "Job"),))
    Node.objects.filter(pk=node.pk).update(gone_at=gone_at, last_seen=gone_at)
    html = node_page(node.name)
    head = html.split('id="node-live"')[0]
    assert f"gone since {timezone.localtime(gone_at):%Y-%m-%d %H:%M}" in head
    assert "left the cluster" in html
    assert "Ready" not in head and "GPUs allocated" not in head
    assert "check that dcgm-exporter runs" not in html
    assert "Metrics unavailable" not in html and "GPU figures unavailable" not in html
    assert "data-live-url" not in html  # nothing to refresh on a node that is gone
    assert not OTHER_WAYS.search(html), OTHER_WAYS.search(html)


def test_a_present_nodes_page_still_says_how_it_is(settings) -> None:  # type: ignore[no-untyped-def]
    settings.PROMETHEUS_URL = ""
    node = gpu_node("a100-new-000", "training")
    html = node_page(node.name)
    assert "Ready" in html and "GPUs allocated" in html and "gone since" not in html
    assert "data-live-url" in html


def test_the_page_carries_its_time_zone_for_the_times_its_script_writes(settings) -> None:  # type: ignore[no-untyped-def]
    settings.TIME_ZONE = "Europe/Paris"
    node = gpu_node("a100-new-000", "training")
    assert '<html lang="en" data-time-zone="Europe/Paris">' in node_page(node.name)
