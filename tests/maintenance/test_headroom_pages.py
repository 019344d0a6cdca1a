"""The maintenance headroom on the pool page and in the API when the disruption budgets
cannot be read (no cluster here): the figure is not given, the page and the API say why,
and the blockers the inventory knows are still listed."""

from __future__ import annotations

from html import unescape

import pytest
from django.test import Client

from pools.models import Node, Pool
from tests.api.conftest import api
from tests.factories import demo_inventory
from tests.moves_helpers import user_in

pytestmark = pytest.mark.django_db


@pytest.fixture
def demo(settings):  # type: ignore[no-untyped-def]
    settings.KUBECONFIG = ""
    settings.KUBE_IN_CLUSTER = False
    demo_inventory()


def test_unknown_budgets_say_why_and_give_no_figure(demo, token_for) -> None:  # type: ignore[no-untyped-def]
    Node.objects.filter(name="a100-train-001").update(cordoned=True)
    body = api(token_for("viewers")).get("/api/v1/pools/training/headroom/").json()
    assert body["drainable_now"] is None and body["drainable_nodes"] == []
    assert body["budgets_error"].startswith("the disruption budgets could not be read: no cluster")
    assert {
        "kind": "down",
        "name": "a100-train-001",
        "message": "a100-train-001 is cordoned",
        "nodes": ["a100-train-001"],
    } in body["blockers"]

    page = Client()
    page.force_login(user_in("viewers", "vera"))
    html = unescape(page.get("/pools/training/?partial=headroom").content.decode())
    assert "data-headroom-error>Not known: the disruption budgets could not be read" in html
    assert "a100-train-001 is cordoned" in html


def test_a_pool_that_does_not_exist_is_a_404(demo, token_for) -> None:  # type: ignore[no-untyped-def]
    response = api(token_for("viewers")).get("/api/v1/pools/no-such-pool/headroom/")
    assert response.status_code == 404
    assert Pool.objects.filter(name="no-such-pool").count() == 0


def test_the_headroom_needs_a_login_or_a_token(demo) -> None:  # type: ignore[no-untyped-def]
    assert Client().get("/api/v1/pools/training/headroom/").status_code in (401, 403)
