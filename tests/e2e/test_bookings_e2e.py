"""A booking end to end with a fast clock: made and approved through the API for tomorrow,
it becomes a loan at its start (the beat's tick given that moment), a real Celery worker on a
real Redis moves the nodes, and at its end the loan's return brings them back; the booking is
then ended. On kubesim and the real control plane."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest
from django.utils import timezone

from pools import bookings, moves
from pools.inventory import inventory_sync
from pools.models import Booking, MoveRequest
from tests.api.conftest import api
from tests.kubesim_process import Kubesim
from tests.moves_helpers import FINAL, wait_for_state
from tests.servers import RedisServer
from tests.workers import celery_worker

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.both_backends]
NODES = ["a100-reserve-006", "a100-reserve-007"]


def test_a_booking_for_tomorrow_is_lent_at_its_start_and_returns_at_its_end(
    cluster: Kubesim, redis: RedisServer, tmp_path: Path, token_for
) -> None:  # type: ignore[no-untyped-def]
    inventory_sync()
    start = (timezone.now() + timedelta(days=1)).replace(microsecond=0)
    end = start + timedelta(hours=6)
    asked = api(token_for("requesters", "rita")).post(
        "/api/v1/bookings/",
        {
            "source": "mixed",
            "destination": "training",
            "team": "vision",
            "nodes": NODES,
            "starts_at": start.isoformat(),
            "ends_at": end.isoformat(),
            "reason": "evaluation run",
        },
        content_type="application/json",
    )
    assert asked.status_code == 201, asked.content
    pk = asked.json()["id"]
    approved = api(token_for("approvers", "arno")).post(
        f"/api/v1/bookings/{pk}/approve/", {}, content_type="application/json"
    )
    assert approved.json()["state"] == "approved"

    with celery_worker(tmp_path):
        assert bookings.bookings_advance(now=start - timedelta(minutes=1))["started"] == []
        assert bookings.bookings_advance(now=start + timedelta(seconds=2))["started"] == [pk]
        loan = wait_for_state(Booking.objects.get(pk=pk).loan, FINAL)
        assert loan.state == MoveRequest.State.SUCCEEDED
        for name in NODES:
            assert cluster.core().read_node(name).metadata.labels["gpu-pool"] == "training"
        assert bookings.bookings_advance(now=start + timedelta(hours=1))["ended"] == []

        (back,) = moves.loans_return_due(now=end + timedelta(seconds=1))
        back = wait_for_state(back, FINAL)
    assert back.state == MoveRequest.State.SUCCEEDED
    for name in NODES:
        assert cluster.core().read_node(name).metadata.labels["gpu-pool"] == "mixed"
    # The beat's next look at the loan sees every node back; then the booking has ended.
    assert moves.loans_return_due(now=end + timedelta(seconds=30)) == []
    assert MoveRequest.objects.get(pk=loan.pk).loan_returned_at is not None
    assert bookings.bookings_advance(now=end + timedelta(seconds=30))["ended"] == [pk]
    booking = api(token_for("viewers")).get(f"/api/v1/bookings/{pk}/").json()
    assert (booking["state"], booking["loan"], booking["taken"]) == ("ended", loan.pk, NODES)
