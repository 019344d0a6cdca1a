"""Two approvers approving two conflicting bookings at once: one wins, the other is refused
with the conflict, and the window is held once. On the session's database (SQLite), and again
on PostgreSQL, where READ COMMITTED lets both transactions read the bookings at once and only
the lock on the source pool's row keeps the winner single."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.db import connection
from django.utils import timezone

from pools import bookings
from pools.models import AuditEvent, Booking, Node, Pool
from tests.edges.moves.test_concurrency_postgres import race
from tests.moves_helpers import user_in
from tests.postgres_rerun import rerun_on_postgresql, rerunning_on_postgres

ROUNDS = 8


def _nodes(round_: int) -> list[str]:
    pool = Pool.objects.get(name="mixed")
    names = [f"gpu-race-{round_}-{i}" for i in range(2)]
    for name in names:
        Node.objects.create(
            name=name,
            pool=pool,
            pool_label="mixed",
            gpu_model="NVIDIA-A100-SXM4-80GB",
            gpu_count=8,
            gpu_allocatable=8,
            ready=True,
            last_seen=timezone.now(),
        )
    return names


@pytest.mark.django_db(transaction=True)
def test_two_conflicting_bookings_approved_at_once_hold_one_window() -> None:
    if rerunning_on_postgres():
        assert connection.vendor == "postgresql"
    source, destination = Pool.objects.get(name="mixed"), Pool.objects.get(name="training")
    first, second = user_in("approvers", "a1"), user_in("approvers", "a2")
    start = timezone.now() + timedelta(days=1)
    for round_ in range(ROUNDS):
        nodes = _nodes(round_)
        asked = [
            bookings.booking_ask(
                user=user_in("requesters", f"r{i}"),
                source=source,
                destination=destination,
                node_names=nodes,
                starts_at=start + timedelta(hours=i),
                ends_at=start + timedelta(hours=10 + i),
                reason="race",
                now=timezone.now(),
            )
            for i in range(2)
        ]
        outcomes = race(
            lambda b=asked[0]: bookings.booking_approve(b.pk, approver=first, now=timezone.now()),
            lambda b=asked[1]: bookings.booking_approve(b.pk, approver=second, now=timezone.now()),
        )
        assert sorted(outcomes) == ["booking_nodes", "won"], outcomes
        states = sorted(
            Booking.objects.filter(pk__in=[b.pk for b in asked]).values_list("state", flat=True)
        )
        assert states == ["approved", "pending"]
        approved_events = AuditEvent.objects.filter(
            booking__in=asked, action="booking.approved"
        ).count()
        assert approved_events == 1


def test_the_races_on_postgresql() -> None:
    rerun_on_postgresql(__file__, "test_the_races_on_postgresql", expected_passed=1)
