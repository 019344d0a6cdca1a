"""Free text people type has one limit, the model field's, which the pages and the API
both refuse past with a 400 naming the field, and nothing is written."""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import timedelta

import pytest
from django.test import Client
from django.utils import timezone

from pools import moves
from pools.models import FREE_TEXT_MAX_LENGTH, Approval, AuditEvent, MoveRequest, Node, Pool
from tests.api.conftest import api
from tests.factories import demo_inventory
from tests.moves_helpers import user_in

LONG = "x" * (FREE_TEXT_MAX_LENGTH + 1)
LIMIT = f"at most {FREE_TEXT_MAX_LENGTH} characters"
MOVE_FORM = {
    "nodes": "a100-reserve-000",
    "destination": "training",
    "drain_policy": "leave-running",
    "drain_deadline_minutes": "30",
    "submit": "1",
}


@pytest.fixture
def inventory(db) -> dict[str, Node]:  # type: ignore[no-untyped-def]
    return demo_inventory()


def client_for(role: str, name: str | None = None) -> Client:
    client = Client()
    client.force_login(user_in(role, name))
    return client


def pending_move(reason: str = "burst", **options: object) -> MoveRequest:
    return moves.move_request_create(
        requested_by=user_in("requesters", "rita"),
        node_names=["a100-reserve-000"],
        destination=Pool.objects.get(name="training"),
        reason=reason,
        now=timezone.now(),
        **options,  # type: ignore[arg-type]
    )


def test_the_limit_is_the_model_fields() -> None:
    for model, field in [
        (MoveRequest, "reason"),
        (MoveRequest, "health_override"),
        (Approval, "comment"),
        (Pool, "description"),
    ]:
        assert model._meta.get_field(field).max_length == FREE_TEXT_MAX_LENGTH, (model, field)


@pytest.mark.django_db
@pytest.mark.parametrize("field", ["reason", "health_override"])
def test_the_move_page_refuses_long_text_and_asks_nothing(
    inventory: dict[str, Node], field: str
) -> None:
    form = {**MOVE_FORM, "reason": "more capacity", field: LONG}
    response = client_for("requesters", "rita").post("/moves/new/", form)
    assert response.status_code == 400
    assert LIMIT in " ".join(response.context["form"].errors[field])
    assert not MoveRequest.objects.exists()
    # At the limit, the same request is asked.
    ok = client_for("requesters", "rita").post(
        "/moves/new/", {**form, field: "y" * FREE_TEXT_MAX_LENGTH}
    )
    assert ok.status_code == 302 and MoveRequest.objects.count() == 1


@pytest.mark.django_db
@pytest.mark.parametrize("field", ["reason", "health_override"])
def test_the_move_api_refuses_long_text_and_asks_nothing(
    inventory: dict[str, Node], token_for: Callable[[str], str], field: str
) -> None:
    body = {"nodes": ["a100-reserve-000"], "destination": "training", "reason": "capacity"}
    response = api(token_for("requesters")).post(
        "/api/v1/moves/", json.dumps({**body, field: LONG}), content_type="application/json"
    )
    assert response.status_code == 400
    assert "no more than 2000 characters" in json.dumps(response.json()["error"]["fields"][field])
    assert not MoveRequest.objects.exists()


@pytest.mark.django_db
@pytest.mark.parametrize("action", ["approve", "reject", "cancel"])
def test_a_decision_with_a_long_reason_is_refused_and_decides_nothing(
    inventory: dict[str, Node], action: str
) -> None:
    move = pending_move()
    client = client_for("requesters", "rita") if action == "cancel" else client_for("approvers")
    events = AuditEvent.objects.count()
    response = client.post(f"/moves/{move.pk}/{action}/", {"reason": LONG})
    assert response.status_code == 400
    assert LIMIT in " ".join(response.context["decision_form"].errors["reason"])
    move.refresh_from_db()
    assert move.state == MoveRequest.State.PENDING and not move.approvals.exists()
    assert AuditEvent.objects.count() == events


@pytest.mark.django_db
def test_the_decision_api_refuses_a_long_reason(
    inventory: dict[str, Node], token_for: Callable[[str], str]
) -> None:
    move = pending_move()
    response = api(token_for("approvers")).post(
        f"/api/v1/moves/{move.pk}/approve/",
        json.dumps({"reason": LONG}),
        content_type="application/json",
    )
    assert response.status_code == 400
    assert "reason" in response.json()["error"]["fields"]
    assert not move.approvals.exists()


@pytest.mark.django_db
def test_a_bulk_decision_with_a_long_reason_decides_nothing(inventory: dict[str, Node]) -> None:
    move = pending_move()
    response = client_for("approvers").post(
        "/moves/bulk/", {"move": [move.pk], "action": "reject", "reason": LONG}
    )
    assert response.status_code == 400
    said = [str(m) for m in response.context["messages"]]
    assert any(m.startswith("Reason: ") and LIMIT in m for m in said), said
    move.refresh_from_db()
    assert move.state == MoveRequest.State.PENDING


@pytest.mark.django_db
def test_a_loan_change_with_a_long_reason_changes_nothing(inventory: dict[str, Node]) -> None:
    now = timezone.now()
    loan = pending_move(loan_until=now + timedelta(hours=5))
    moves.move_decide(
        move=loan,
        user=user_in("approvers", "arno"),
        action=moves.Action.APPROVE,
        reason="",
        until=None,
        now=now,
    )
    loan.refresh_from_db()
    end = loan.loan_until
    response = client_for("approvers", "arno").post(
        f"/loans/{loan.pk}/change/", {"reason": LONG, "end": "1"}
    )
    assert response.status_code == 400
    said = [str(m) for m in response.context["messages"]]
    assert any(m.startswith("Reason: ") and LIMIT in m for m in said), said
    loan.refresh_from_db()
    assert loan.loan_until == end


@pytest.mark.django_db
def test_a_pool_description_past_the_limit_is_refused_on_the_page_and_the_api(
    token_for: Callable[[str], str],
) -> None:
    form = {
        "name": "batch",
        "display_name": "Batch",
        "description": LONG,
        "min_nodes": "0",
        "approvals_required": "1",
        "colour": "#123456",
        "save": "1",
    }
    page = client_for("pool-admins").post("/pools/new/", form)
    assert page.status_code == 400
    assert LIMIT in " ".join(page.context["form"].errors["description"])
    response = api(token_for("pool-admins")).post(
        "/api/v1/pools/",
        json.dumps({"name": "batch", "display_name": "Batch", "description": LONG}),
        content_type="application/json",
    )
    assert response.status_code == 400
    assert "description" in response.json()["error"]["fields"]
    assert not Pool.objects.filter(name="batch").exists()
