"""The page's preview, the API's dry run and the request run the same checks: whatever the
request refuses, the dry run reports first (the rules: pools/core/checks.py)."""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest
from django.test import Client
from django.utils import timezone

from pools.core.checks import AskFacts, ask_failures, max_drain_seconds
from pools.models import MoveRequest, Node
from tests.api.conftest import api
from tests.factories import demo_inventory
from tests.moves_helpers import user_in

JSON = "application/json"
PAST = (timezone.now() - timedelta(days=1)).isoformat()

# Each: what the request says beside nodes and destination, and the check it must fail.
BAD_ASKS = [
    ({"nodes": ["gpu-new-000"], "loan_until": "2999-01-01T00:00:00Z"}, "loan_without_pool"),
    ({"reason": ""}, "reason"),
    ({"loan_until": PAST}, "loan_until"),
    ({"drain_policy": "drain-first", "drain_deadline_seconds": 86_400}, "drain_deadline_seconds"),
]


@pytest.fixture
def inventory(db) -> dict[str, Node]:  # type: ignore[no-untyped-def]
    return demo_inventory()


def body(change: dict[str, Any]) -> dict[str, Any]:
    return {"nodes": ["a100-reserve-000"], "destination": "training", "reason": "more", **change}


def failed(checks: list[dict[str, Any]]) -> set[str]:
    return {c["field"] or c["code"] for c in checks}


@pytest.mark.django_db
@pytest.mark.parametrize(("change", "check"), BAD_ASKS)
def test_what_the_request_refuses_the_dry_run_reports(
    inventory: dict[str, Node], token_for: Callable[[str], str], change: dict[str, Any], check: str
) -> None:
    client = api(token_for("requesters"))
    dry = client.post("/api/v1/moves/dry-run/", json.dumps(body(change)), content_type=JSON)
    assert dry.status_code == 200
    assert dry.json()["ok"] is False and check in failed(dry.json()["checks"])
    real = client.post("/api/v1/moves/", json.dumps(body(change)), content_type=JSON)
    assert real.status_code in (400, 409)
    error = real.json()["error"]
    assert check in error["fields"] or check == error["code"]
    assert not MoveRequest.objects.exists()


@pytest.mark.django_db
def test_a_good_ask_passes_the_dry_run_and_the_request(
    inventory: dict[str, Node], token_for: Callable[[str], str]
) -> None:
    client = api(token_for("requesters"))
    dry = client.post("/api/v1/moves/dry-run/", json.dumps(body({})), content_type=JSON)
    assert dry.json()["ok"] is True and dry.json()["checks"] == []
    real = client.post("/api/v1/moves/", json.dumps(body({})), content_type=JSON)
    assert real.status_code == 201


@pytest.mark.django_db
def test_the_page_preview_reports_what_the_request_refuses(inventory: dict[str, Node]) -> None:
    page = Client()
    page.force_login(user_in("requesters", "rita"))
    form = {
        "nodes": "gpu-new-000",
        "destination": "mixed",
        "reason": "",
        "drain_policy": "leave-running",
        "drain_deadline_minutes": "30",
        "loan_until": "2001-01-01T00:00",
        "preview": "1",
    }
    html = page.post("/moves/new/", form).content.decode()
    assert "All checks pass." not in html
    assert "A move needs a reason." in html
    assert "A loan must end in the future." in html
    form["loan_until"] = "2999-01-01T00:00"
    html = page.post("/moves/new/", form).content.decode()
    assert 'data-check="loan_without_pool"' in html


def test_a_drain_must_end_within_the_task_time_limit() -> None:
    ask = AskFacts(
        reason="r",
        node_count=1,
        drain_policy="drain-first",
        drain_policies=("drain-first",),
        drain_deadline_seconds=900,
        max_drain_seconds=max_drain_seconds(840),
        loan_until=None,
        now=timezone.now(),
    )
    (failure,) = ask_failures(ask)
    assert failure.field == "drain_deadline_seconds"
    assert "between 1 and 780 seconds" in failure.message
    assert ask_failures(AskFacts(**{**ask.__dict__, "drain_deadline_seconds": 780})) == []
