"""A pool's maintenance headroom against an API server's disruption budgets: a budget that
keeps every chat-serving pod keeps the nodes they run on from a drain, on the pool page and
in the API alike, and with the chart's account (tests/deploy/test_rbac_chart.py)."""

from __future__ import annotations

from html import unescape

import pytest
from django.test import Client

from pools.core.headroom import BUDGET
from pools.inventory import inventory_sync
from pools.maintenance.headroom import pool_headroom
from pools.models import GpuPod, Pool
from tests.api.conftest import api
from tests.edges.moves.test_drain_blocked import budget_keeping_every_chat_pod
from tests.kubesim_process import Kubesim
from tests.moves_helpers import user_in

pytestmark = [pytest.mark.django_db, pytest.mark.both_backends]


def test_a_budget_keeping_every_pod_keeps_their_nodes_from_a_drain(
    cluster: Kubesim, token_for
) -> None:  # type: ignore[no-untyped-def]
    budget_keeping_every_chat_pod(cluster)
    inventory_sync()
    pool = Pool.objects.get(name="inference")
    chat_nodes = sorted(
        {p.node_name for p in GpuPod.objects.live() if p.labels.get("app") == "chat-serving"}
    )
    assert chat_nodes

    found = pool_headroom(pool)
    assert found.budgets_error is None
    (budget,) = [b for b in found.blockers if b.kind == BUDGET]
    assert (budget.name, list(budget.nodes)) == ("ml-serving/chat", chat_nodes)
    assert budget.message.startswith("PodDisruptionBudget ml-serving/chat allows 0 disruptions")
    free = sorted(
        set(pool.nodes.filter(gone_at__isnull=True).values_list("name", flat=True))
        - set(chat_nodes)
    )
    expected = min(len(free), max(found.in_service - pool.min_nodes, 0))
    assert found.drainable_now == expected
    assert set(found.drainable) <= set(free)

    body = api(token_for("viewers")).get(f"/api/v1/pools/{pool.name}/headroom/").json()
    assert body["drainable_now"] == expected
    assert [b["name"] for b in body["blockers"] if b["kind"] == "budget"] == ["ml-serving/chat"]

    page = Client()
    page.force_login(user_in("viewers", "headroom-viewer"))
    assert (
        'data-live-url="?partial=headroom" data-live-now'
        in page.get(f"/pools/{pool.name}/").content.decode()
    )
    html = unescape(page.get(f"/pools/{pool.name}/?partial=headroom").content.decode())
    assert 'data-blocker="budget"' in html and budget.message in html
    assert f'data-figure="drainable">{expected}<' in html


def test_a_drain_first_preview_says_which_budget_would_refuse(cluster: Kubesim) -> None:
    budget_keeping_every_chat_pod(cluster)
    inventory_sync()
    chat_node = sorted(
        p.node_name for p in GpuPod.objects.live() if p.labels.get("app") == "chat-serving"
    )[0]
    rita = Client()
    rita.force_login(user_in("requesters", "rita"))
    form = {
        "nodes": chat_node,
        "destination": "mixed",
        "reason": "driver upgrade",
        "drain_policy": "drain-first",
        "drain_deadline_minutes": "30",
        "preview": "1",
    }
    html = unescape(rita.post("/moves/new/", form).content.decode())
    assert 'data-drain-pool="inference"' in html
    assert (
        "PodDisruptionBudget ml-serving/chat allows 0 disruptions now: draining "
        f"{chat_node} would evict 2 of its pods"
    ) in html
    # Leaving the pods running drains nothing: the panel is not shown.
    html = rita.post("/moves/new/", {**form, "drain_policy": "leave-running"}).content.decode()
    assert "data-drain-pool" not in html
