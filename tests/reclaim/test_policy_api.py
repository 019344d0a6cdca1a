"""A pool's reclaim policy over the API and its page, without Prometheus: off by default,
pool admins set it, bad input is a 400 naming the field with nothing written."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client

from pools.models import AuditEvent, ReclaimPolicy
from tests.api.conftest import api
from tests.factories import demo_inventory
from tests.moves_helpers import user_in

pytestmark = pytest.mark.django_db
URL = "/api/v1/pools/mixed/reclaim/"
GOOD = {"enabled": True, "below_percent": 5, "for_hours": 4, "grace_hours": 24}


@pytest.fixture(autouse=True)
def demo(settings):  # type: ignore[no-untyped-def]
    settings.PROMETHEUS_URL = ""
    demo_inventory()


def test_off_by_default_and_set_by_pool_admins(token_for) -> None:  # type: ignore[no-untyped-def]
    body = api(token_for("viewers")).get(URL).json()
    assert body["policy"]["enabled"] is False and body["candidates"] == []
    assert body["metrics_error"] is None  # off: Prometheus is not asked
    for role in ("viewers", "requesters", "approvers"):
        assert (
            api(token_for(role)).put(URL, GOOD, content_type="application/json").status_code == 403
        )
    saved = api(token_for("pool-admins")).put(URL, GOOD, content_type="application/json")
    assert saved.status_code == 200 and saved.json()["below_percent"] == 5.0
    (event,) = AuditEvent.objects.filter(action="reclaim.policy_set")
    assert event.message == "mixed: on, held under 5 % for 4 h, 24 h of grace (was none)"
    on = api(token_for("viewers")).get(URL).json()
    assert on["policy"]["enabled"] is True
    assert on["metrics_error"] == "PROMETHEUS_URL is not set"


@pytest.mark.parametrize(
    ("changes", "field"),
    [
        ({"below_percent": -1}, "below_percent"),
        ({"below_percent": 100.5}, "below_percent"),
        ({"below_percent": "5"}, "below_percent"),
        ({"for_hours": 0}, "for_hours"),
        ({"for_hours": 169}, "for_hours"),
        ({"for_hours": "4"}, "for_hours"),
        ({"grace_hours": -1}, "grace_hours"),
        ({"enabled": None}, "enabled"),
    ],
)
def test_bad_input_is_named_and_writes_nothing(
    token_for, changes: dict[str, Any], field: str
) -> None:  # type: ignore[no-untyped-def]
    answer = api(token_for("pool-admins")).put(
        URL, {**GOOD, **changes}, content_type="application/json"
    )
    assert answer.status_code == 400, answer.content
    assert field in answer.json()["error"]["fields"]
    assert not ReclaimPolicy.objects.exists() and not AuditEvent.objects.exists()


def test_the_page(token_for) -> None:  # type: ignore[no-untyped-def]
    paula = Client()
    paula.force_login(user_in("pool-admins", "paula"))
    refused = paula.post(
        "/pools/mixed/reclaim/",
        {"enabled": "on", "below_percent": "150", "for_hours": "4", "grace_hours": "1"},
    )
    assert "A utilisation in per cent, from 0 to 100." in refused.content.decode()
    assert not ReclaimPolicy.objects.exists()
    saved = paula.post(
        "/pools/mixed/reclaim/",
        {"enabled": "on", "below_percent": "3", "for_hours": "6", "grace_hours": "2"},
    )
    assert saved.status_code == 302
    assert ReclaimPolicy.objects.get().for_hours == 6
    vera = Client()
    vera.force_login(user_in("viewers", "vera"))
    html = vera.get("/pools/mixed/reclaim/").content.decode()
    assert "Held under 3.0 % for 6 h" in html and "Save the policy" not in html
    assert "Metrics unavailable: PROMETHEUS_URL is not set" in html
    vera.post(
        "/pools/mixed/reclaim/",
        {"enabled": "", "below_percent": "1", "for_hours": "1", "grace_hours": "1"},
    )
    assert ReclaimPolicy.objects.get().enabled is True  # a viewer's post changes nothing
